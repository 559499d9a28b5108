"""Reading the job's inputs and writing its outputs: tables, partitions, manifests, small files."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlparse

from ndcg_spark.errors import ConfigError, InputDataError

#: What a previous ndcg-spark run may have left in an output directory.
OUR_OUTPUTS = {
    "per_user",
    "summary",
    "summary.json",
    "rejected",
    "_manifests",
    "report.html",
    "comparison",
    "comparison.json",
    ".summary.json.tmp",
    ".report.html.tmp",
    ".comparison.json.tmp",
}

Partition = Optional[Tuple[str, str]]


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, without Spark's SQLSTATE tail.

    A raw Py4J error (a Spark job that failed in classic mode, e.g. reading a file of another
    format) is read at its first cause that carries a Spark error condition: the message that
    Spark Connect reports for the same failure.
    """
    text = _spark_condition_message(getattr(exc, "java_exception", None)) or str(exc)
    for line in text.strip().splitlines():
        line = line.strip()
        if line:
            return line.split(" SQLSTATE:")[0]
    return type(exc).__name__


def _spark_condition_message(java_exception) -> Optional[str]:
    """The message of the first exception in a Java cause chain with a Spark error condition."""
    seen = 0
    while java_exception is not None and seen < 20:
        try:
            if java_exception.getCondition() is not None:
                return str(java_exception.getMessage())
        except Exception:  # noqa: BLE001 - not a SparkThrowable
            pass
        java_exception, seen = java_exception.getCause(), seen + 1
    return None


def is_path(source: str) -> bool:
    """Whether an input names a path (anything with a slash or a URI scheme, or that exists),
    not a catalog table."""
    return "/" in source or "://" in source or os.path.exists(source)


def read_table(spark, source: str, fmt: str, what: str):
    """A path (anything with a slash or a URI scheme, or that exists) or else a catalog table."""
    is_path = "/" in source or "://" in source or os.path.exists(source)
    try:
        if not is_path:
            return spark.read.table(source)
        reader = spark.read.format(fmt)
        if fmt == "csv":
            reader = reader.option("header", "true").option("inferSchema", "true")
        return reader.load(source)
    except Exception as exc:  # AnalysisException: path or table not found, unreadable format
        where = fmt if is_path else "a table"
        raise InputDataError(f"cannot read {what} {source!r} as {where}: {first_line(exc)}") from exc


def check_output(output: str) -> None:
    """Refuse to overwrite a local directory that holds something other than our own output."""
    path = output[len("file:") :] if output.startswith("file:") else output
    if "://" in path or not os.path.exists(path):
        return
    if not os.path.isdir(path):
        raise ConfigError(f"output {output} is a file, not a directory")
    strange = sorted(set(os.listdir(path)) - OUR_OUTPUTS)[:3]
    if strange:
        raise ConfigError(
            f"output {output} already holds other data ({', '.join(strange)}); "
            "choose an empty directory or a previous ndcg-spark output"
        )


def check_partition_column(partition: Partition, *frames) -> None:
    """The partition column must not be a column of what is written: its value would replace it."""
    if partition is None:
        return
    for df in frames:
        if partition[0] in df.columns:
            raise ConfigError(f"partition column {partition[0]!r} is also a column of the output; choose another name")


def partition_directory(partition: Tuple[str, str]) -> str:
    """``key=value``, the directory Spark's partition discovery maps to the column ``key``."""
    return "=".join(partition)


def table_path(output: str, name: str, partition: Partition) -> str:
    """Where table ``name`` of this run lives: ``DIR/name`` or ``DIR/name/key=value``."""
    path = os.path.join(output, name)
    return path if partition is None else os.path.join(path, partition_directory(partition))


def write_table(df, output: str, name: str, partition: Partition) -> None:
    """Parquet; under a partition, replace that partition only, even with an empty frame.

    A partition is written straight into its directory, which Spark's partition discovery reads
    back as the column: a dynamic partition overwrite writes nothing for an empty frame (e.g. no
    rejected rows), which would leave a previous run's rows of that partition in place.
    """
    df.write.mode("overwrite").parquet(table_path(output, name, partition))


def manifest_dir(output: str, partition: Partition) -> str:
    """Where the run's manifest and report go: ``DIR``, or ``DIR/_manifests/key=value``."""
    return output if partition is None else os.path.join(output, "_manifests", partition_directory(partition))


def write_json(spark, directory: str, name: str, record: Dict[str, Any]) -> None:
    """A manifest: indented JSON in one small file."""
    write_text(spark, directory, name, json.dumps(record, indent=2, default=str) + "\n")


def is_connect(spark) -> bool:
    """Whether ``spark`` is a Spark Connect session (no JVM, no Hadoop API on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def write_text(spark, directory: str, name: str, text: str) -> None:
    """Write one small file ``directory/name`` atomically: a temporary name, then a rename.

    In classic mode through the session's Hadoop FileSystem API, so the file lands, as itself,
    on whatever file system Spark writes the tables to (``hdfs://``, ``s3a://``, a path on the
    default file system). Over Spark Connect the client has no Hadoop API: it writes with its
    own file system (the job refuses, before reading anything, an output it cannot reach this
    way: see :func:`ndcg_spark.job.pipeline.check_connect`).
    """
    if is_connect(spark):
        path = urlparse(directory).path if directory.startswith("file:") else directory
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, f".{name}.tmp")
        with open(tmp, "w") as fh:
            fh.write(text)
        os.replace(tmp, os.path.join(path, name))
        return
    write_hadoop_file(spark, directory, name, text.encode("utf-8"))


def write_hadoop_file(spark, directory: str, name: str, data: bytes) -> None:
    """``directory/name`` through Hadoop's FileSystem: written as ``.name.tmp``, then renamed.

    On the local file system the raw file system is used, so no ``.crc`` side files appear. A
    previous file of that name is deleted just before the rename (Hadoop's rename does not
    replace): a reader sees the old file, then none, then the complete new one, never a part.
    """
    jvm = spark._jvm
    Path = jvm.org.apache.hadoop.fs.Path
    folder = Path(directory)
    fs = folder.getFileSystem(spark._jsc.hadoopConfiguration())
    if fs.getScheme() == "file":
        fs = fs.getRawFileSystem()
    target, tmp = Path(folder, name), Path(folder, f".{name}.tmp")
    fs.mkdirs(folder)
    stream = fs.create(tmp, True)
    try:
        stream.write(bytearray(data))
    finally:
        stream.close()
    if fs.exists(target):
        fs.delete(target, False)
    if not fs.rename(tmp, target):
        raise OSError(f"could not rename {tmp.toString()} to {target.toString()}")


def write_rejected(spark, rejected, output: str, partition: Partition) -> Dict[str, Dict[str, int]]:
    """Write quarantined rows to ``DIR/rejected/<table>/`` and count them per reason, as written."""
    counts: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    for table, frame in (rejected or {}).items():
        write_table(frame, output, os.path.join("rejected", table), partition)
        written = spark.read.parquet(table_path(output, os.path.join("rejected", table), partition))
        for row in written.groupBy("reason").count().collect():
            counts[table][row["reason"]] = row["count"]
    return counts
