#!/usr/bin/env bash
# Fetch the table formats' official Spark jars from Maven Central into .jars/<spark line>/ of the
# checkout (ignored by git), for the format tests (tests/test_table_formats.py) and .ci/run.
#
#   scripts/fetch_jars.sh            # both lines
#   scripts/fetch_jars.sh spark35    # one line
#
# A jar already in .jars/ is not fetched again, so a second run needs no network. Maven's own
# cache (~/.m2) is kept inside .jars/m2 too, for the same reason on a clean machine.
#
# Each jar is copied alone (no transitive resolution): Spark already ships what the runtimes
# need (Scala, antlr4-runtime, Jackson, Hadoop, Parquet), and a second copy of any of those on
# the classpath breaks Spark in ways that are hard to trace. Delta's only dependency Spark lacks
# is delta-storage; Iceberg's spark-runtime jar is shaded and self-contained.
set -euo pipefail
cd "$(dirname "$0")/.."

# Spark 3.5 (Scala 2.12): Iceberg 1.10, Delta 3.3 (the line built on Spark 3.5).
SPARK35=(
  org.apache.iceberg:iceberg-spark-runtime-3.5_2.12:1.10.2
  io.delta:delta-spark_2.12:3.3.3
  io.delta:delta-storage:3.3.3
)
# Spark 4.1 (Scala 2.13): Iceberg 1.12 (the first runtime for 4.1), Delta 4.2 (built on Spark 4.1).
SPARK41=(
  org.apache.iceberg:iceberg-spark-runtime-4.1_2.13:1.12.0
  io.delta:delta-spark_2.13:4.2.0
  io.delta:delta-storage:4.2.0
)

fetch() {
  local line=$1
  shift
  local dir=".jars/$line"
  mkdir -p "$dir"
  local coordinate group artifact version jar
  for coordinate in "$@"; do
    IFS=: read -r group artifact version <<<"$coordinate"
    jar="$dir/$artifact-$version.jar"
    [[ -s $jar ]] && continue
    mvn -q -B -Dmaven.repo.local="$PWD/.jars/m2" dependency:copy \
      -Dartifact="$coordinate" -DoutputDirectory="$dir" -Dmdep.overWriteReleases=false >&2
    [[ -s $jar ]] || { echo "fetch_jars: $coordinate did not arrive in $dir" >&2; exit 1; }
  done
}

lines=("$@")
((${#lines[@]})) || lines=(spark35 spark41)
for line in "${lines[@]}"; do
  case $line in
    spark35) fetch spark35 "${SPARK35[@]}" ;;
    spark41) fetch spark41 "${SPARK41[@]}" ;;
    *) echo "fetch_jars: unknown line $line (spark35 or spark41)" >&2; exit 2 ;;
  esac
done
