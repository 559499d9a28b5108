#!/usr/bin/env bash
# Fetch the table formats' official Spark jars from Maven Central into .jars/<spark line>/ of the
# checkout (ignored by git), for the format tests (tests/test_table_formats.py) and .ci/run.
#
#   scripts/fetch_jars.sh                # both lines
#   scripts/fetch_jars.sh spark35        # one line
#   scripts/fetch_jars.sh hadoop-3.4.2   # S3A for one Hadoop (tests/object_store.py)
#
# A jar already in .jars/ is not fetched again, so a second run needs no network. Each jar comes
# straight from Maven Central's repository layout and is checked against the SHA-1 published
# beside it: no Maven run, so a clean checkout fetches eight files, not Maven's plugins first.
#
# Each jar is copied alone (no transitive resolution): Spark already ships what the runtimes
# need (Scala, antlr4-runtime, Jackson, Hadoop, Parquet), and a second copy of any of those on
# the classpath breaks Spark in ways that are hard to trace. Delta's only dependency Spark lacks
# is delta-storage; Iceberg's spark-runtime jar is shaded and self-contained. SQLite's JDBC driver
# (its native library inside) holds the tests' Iceberg JDBC catalog: its one dependency, SLF4J's
# API, Spark ships.
set -euo pipefail
cd "$(dirname "$0")/.."

# S3A (hadoop-aws) at the Hadoop version a PySpark wheel ships (its jars/hadoop-client-api-*.jar),
# with the AWS SDK bundle that Hadoop release was built against (hadoop-project's pom): Spark 3.5
# has Hadoop 3.3.4 (SDK v1), 4.0 has 3.4.1, 4.1 has 3.4.2, 4.2 and later 3.5.0 (SDK v2). From 3.4.2
# hadoop-aws also depends on the analytics accelerator (loaded only for its input stream, but
# named by the S3A classes). The bundles are large (280-690 MB): fetched only when asked for.
declare -A HADOOP=(
  [3.3.4]="org.apache.hadoop:hadoop-aws:3.3.4 com.amazonaws:aws-java-sdk-bundle:1.12.262"
  [3.4.1]="org.apache.hadoop:hadoop-aws:3.4.1 software.amazon.awssdk:bundle:2.24.6"
  [3.4.2]="org.apache.hadoop:hadoop-aws:3.4.2 software.amazon.awssdk:bundle:2.29.52 software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.2.1"
  [3.5.0]="org.apache.hadoop:hadoop-aws:3.5.0 software.amazon.awssdk:bundle:2.35.4 software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:1.3.1"
)

# Spark 3.5 (Scala 2.12): Iceberg 1.10, Delta 3.3 (the line built on Spark 3.5).
SPARK35=(
  org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2
  io.delta:delta-spark_2.12:3.3.3
  io.delta:delta-storage:3.3.3
  org.xerial:sqlite-jdbc:3.51.3.0
)
# Spark 4.1 (Scala 2.13): Iceberg 1.12 (the first runtime for 4.1), Delta 4.2 (built on Spark 4.1).
SPARK41=(
  org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0
  io.delta:delta-spark_2.13:4.2.0
  io.delta:delta-storage:4.2.0
  org.xerial:sqlite-jdbc:3.51.3.0
)

CENTRAL=${MAVEN_CENTRAL:-https://repo1.maven.org/maven2}

fetch() {
  local line=$1
  shift
  local dir=".jars/$line"
  mkdir -p "$dir"
  local coordinate group artifact version jar url sum
  for coordinate in "$@"; do
    IFS=: read -r group artifact version <<<"$coordinate"
    jar="$dir/$artifact-$version.jar"
    [[ -s $jar ]] && continue
    url="$CENTRAL/${group//.//}/$artifact/$version/$artifact-$version.jar"
    curl -fsSL --retry 3 -o "$jar.part" "$url" \
      || { echo "fetch_jars: $coordinate could not be fetched from $url" >&2; rm -f "$jar.part"; exit 1; }
    sum=$(curl -fsSL --retry 3 "$url.sha1" | cut -c1-40)
    if [[ $(sha1sum "$jar.part" | cut -c1-40) != "$sum" ]]; then
      echo "fetch_jars: $coordinate does not match its published SHA-1" >&2
      rm -f "$jar.part"
      exit 1
    fi
    mv "$jar.part" "$jar"
  done
}

lines=("$@")
((${#lines[@]})) || lines=(spark35 spark41)
for line in "${lines[@]}"; do
  case $line in
    spark35) fetch spark35 "${SPARK35[@]}" ;;
    spark41) fetch spark41 "${SPARK41[@]}" ;;
    hadoop-*)
      [[ -n ${HADOOP[${line#hadoop-}]:-} ]] || { echo "fetch_jars: no S3A jars listed for $line" >&2; exit 2; }
      # shellcheck disable=SC2086 # the coordinates are words
      fetch "$line" ${HADOOP[${line#hadoop-}]}
      ;;
    *) echo "fetch_jars: unknown line $line (spark35, spark41 or hadoop-VERSION)" >&2; exit 2 ;;
  esac
done
