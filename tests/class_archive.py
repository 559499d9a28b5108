"""A class-data-sharing archive of the classes a Spark job's JVM loads, for the JVMs the suite starts.

A fresh Spark JVM spends a large share of its CPU loading, parsing and linking Spark's classes
(some 10,000, from the jars of the PySpark install). Java's application class-data sharing
(``-XX:ArchiveClassesAtExit``, Java 13 on) writes the classes one JVM loaded into an archive that
later JVMs map instead: the process tests of test_errors, test_job and test_inputs took 61 s
against 80 s, their JVMs' CPU 46-50 s against 67-68 s (interleaved, nothing else running). Nothing a run computes, prints or exits with changes: the flags below keep the JVM
silent about the archive, and a JVM whose class path differs from the archive's (a session with
the table formats' or S3A's jars on it) loads its classes as before.

One archive per PySpark install and Java (its path names both), made once by running the
README's sample in a JVM that writes the archive as it exits (``python -m tests.class_archive``,
or the slow tier's first run, tests/conftest.py), in ``.jars/class-archives/`` (ignored).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
ARCHIVES = ROOT / ".jars" / "class-archives"
#: Set to "off": no archive is made or used (to measure what it saves, or to rule it out).
SWITCH = "NDCG_SPARK_TESTS_CLASS_ARCHIVE"
#: The JVM says nothing about the archive: not that it is used, nor that a class path differs.
SILENT = "-Xlog:cds=off,cds+dynamic=off"  # no glob character: spark-class splits SPARK_SUBMIT_OPTS unquoted


def _java() -> str:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java else "java"


def archive_path() -> Path:
    """The archive for this environment's PySpark and Java (which need not exist yet)."""
    import pyspark

    key = f"{os.path.realpath(os.path.dirname(pyspark.__file__))}|{pyspark.__version__}|{_java()}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:12]
    return ARCHIVES / f"pyspark-{pyspark.__version__}-{digest}.jsa"


def enabled() -> bool:
    """False when the environment turns the archive off (``SWITCH``)."""
    return os.environ.get(SWITCH, "").lower() != "off"


def flags(path: Optional[Path] = None) -> str:
    """The JVM flags that use the archive, or "" when there is none (a JVM given an archive file
    that does not exist would give up the JDK's own shared classes too)."""
    if not enabled():
        return ""
    path = path or archive_path()
    return f"-XX:SharedArchiveFile={path} {SILENT}" if path.is_file() else ""


def make(quick_jvm: str, timeout: float = 600) -> Path:
    """Write the archive (if absent): the README's sample run by the job's entry point in a JVM
    that dumps its loaded classes when it exits. Returns its path."""
    path = archive_path()
    if path.is_file():
        return path
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_suffix(f".{os.getpid()}.partial")
    env = {
        **os.environ,
        "SPARK_SUBMIT_OPTS": f"{quick_jvm} -XX:ArchiveClassesAtExit={partial} {SILENT}",
        "NDCG_SPARK_QUIET": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep),
    }
    subprocess.run(
        [sys.executable, "-m", "tests.class_archive", "--run-sample"], env=env, cwd=ROOT, check=True, timeout=timeout
    )
    if not partial.is_file():
        raise RuntimeError(f"the JVM wrote no class archive at {partial}")
    os.replace(partial, path)
    return path


def _run_sample_and_exit() -> None:
    """In the archiving JVM's driver: the sample's run, then the JVM's own exit (the archive is
    written as the JVM exits, so the caller waits for the process to end)."""
    from pyspark.sql import SparkSession

    from ndcg_spark.job import cli

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    jvm = spark.sparkContext._gateway.proc  # the JVM's process (pyspark.java_gateway)
    with tempfile.TemporaryDirectory() as out, contextlib.redirect_stdout(io.StringIO()):
        code = cli.run(["--config", str(ROOT / "conf" / "sample.toml"), "--output", out, "--report", "false"])
    if code != 0:
        raise SystemExit(f"the sample run ended with exit code {code}")
    spark.stop()
    with contextlib.suppress(Exception):
        spark._jvm.java.lang.System.exit(0)  # the call's connection closes as the JVM ends
    jvm.wait(timeout=300)


if __name__ == "__main__":
    if sys.argv[1:] == ["--run-sample"]:
        _run_sample_and_exit()
    else:
        from tests.helpers import QUICK_JVM

        print(make(QUICK_JVM))
