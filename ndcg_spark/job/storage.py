"""Reading the job's inputs and writing its outputs: tables, partitions, manifests, small files."""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple
from urllib.parse import urlparse

from ndcg_spark.errors import ConfigError
from ndcg_spark.reading import read_table

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


def read_input(spark, config, role: str, source: Optional[str] = None, label: Optional[str] = None):
    """One input table of the job, with its format and schema (:func:`ndcg_spark.read_table`)."""
    return read_table(
        spark,
        source if source is not None else getattr(config, role),
        config.input_format(role),
        role=role,
        schema=getattr(config, f"{role}_schema"),
        options=config.options,
        label=label,
    )


def is_path(source: str) -> bool:
    """Whether an input names a path (anything with a slash or a URI scheme, or that exists),
    not a catalog table."""
    return "/" in source or "://" in source or os.path.exists(source)


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
