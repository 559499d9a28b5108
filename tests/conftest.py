"""One SparkSession for the whole suite: local, UI off, few shuffle partitions."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from tests import class_archive
from tests.helpers import QUICK_JVM

DATA = Path(__file__).parent / "data"

# Every JVM started through spark-submit (this session's, the job's in a process of its own, the
# benchmarks', the cluster's drivers) takes the quick flags, and the class archive when there is
# one (tests/class_archive.py); set before any starts, so the pytest-xdist workers and their
# subprocesses inherit them.
_OWN_OPTS = os.environ.get("SPARK_SUBMIT_OPTS", "")
os.environ["SPARK_SUBMIT_OPTS"] = f"{_OWN_OPTS} {QUICK_JVM} {class_archive.flags()}".strip()
# The job's progress lines off (its one error line is what most tests read on stderr); the tests
# of the progress lines turn them on.
os.environ["NDCG_SPARK_QUIET"] = "1"
# Spark's scratch folders (each JVM's copies of --jars, 600 MB with the S3 SDK; block files) in one
# folder of this run's, removed when the run ends: a JVM killed by a test never deletes its own,
# and left in /tmp they filled the disk after a few runs. Made once by the run's first process;
# pytest-xdist's workers and every job started in a process of its own inherit it.
if "SPARK_LOCAL_DIRS" not in os.environ:
    os.environ["SPARK_LOCAL_DIRS"] = _SCRATCH = tempfile.mkdtemp(prefix="ndcg-spark-tests-")
else:
    _SCRATCH = None


#: The files that take longest (their tests' summed durations in a ``--durations=0`` run), longest
#: first. pytest-xdist hands whole files to its two workers in collection order
#: (``--dist loadfile --no-loadscope-reorder``, pyproject.toml): started first, the long ones end
#: beside each other and the short ones fill the gaps, so both workers finish together.
LONGEST_FIRST = (
    # The Spark lines' stages of .ci/run with the formats: their longest files spread over the two
    # workers (the kill chains on this disk and on S3, the in-process formats file, the job on S3).
    "test_table_format_processes.py",
    "test_table_formats.py",
    "test_table_formats_on_s3.py",
    "test_object_store.py",
    "test_cluster.py",
    "test_beyond_movielens.py",
    "test_validation.py",
    "test_publish.py",
    "test_benchmark_smoke.py",
    "test_beyond_peers.py",
    "test_segments.py",
    "test_unattended.py",
    "test_tables.py",
    "test_ml.py",
    "test_job.py",
    "test_extensions.py",
    "test_compare_report.py",
    "test_inputs.py",
)


#: The slow tier: the kinds of test that start JVMs, daemons or programs of their own (a standalone
#: cluster, a Spark Connect server, the job in a fresh process killed at each step, the benchmark
#: scripts, a real Airflow, the table formats' sessions, the job on an S3 server). Each such test is
#: marked ``slow`` too.
#: The README's test command runs the quick tier (everything else); ``--slow`` runs both, as CI does.
SLOW = ("cluster", "process", "bench", "airflow", "formats", "s3")


def pytest_addoption(parser):
    parser.addoption(
        "--slow",
        action="store_true",
        default=False,
        help="run the slow tier too (tests marked " + ", ".join(SLOW) + "; the formats only when -m names them)",
    )


def pytest_configure(config):
    """A run with the slow tier (or of chosen kinds: the formats, Airflow) starts many JVMs of its
    own: without a class archive for this environment, make one first (about a minute, once)."""
    wide = config.getoption("slow") or config.getoption("markexpr")
    if not wide or os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("collectonly"):
        return
    if class_archive.enabled() and not class_archive.archive_path().is_file():
        class_archive.make(QUICK_JVM)
        os.environ["SPARK_SUBMIT_OPTS"] = f"{_OWN_OPTS} {QUICK_JVM} {class_archive.flags()}".strip()


def pytest_unconfigure(config):
    if _SCRATCH is not None:
        shutil.rmtree(_SCRATCH, ignore_errors=True)


def pytest_report_header(config):
    path = class_archive.archive_path()
    return f"class archive: {path if path.is_file() else 'none (the slow tier makes it)'}"


def pytest_itemcollected(item):
    if any(item.get_closest_marker(kind) is not None for kind in SLOW):
        item.add_marker(pytest.mark.slow)


def _deselect(config, items, leave_out) -> int:
    gone = [item for item in items if leave_out(item)]
    if gone:
        config.hook.pytest_deselected(items=gone)
        items[:] = [item for item in items if not leave_out(item)]
    return len(gone)


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's own order is kept
    markexpr = config.getoption("markexpr") or ""
    left_out = {}
    # The table formats' tests need the formats' jars and sessions of their own (tests/formats.py):
    # run only when -m names them (.ci/run's stage), never by the suite's default run.
    if "formats" not in markexpr:
        left_out["formats"] = _deselect(config, items, lambda item: item.get_closest_marker("formats") is not None)
    # Without --slow (and without a -m of the caller's own, which chooses for itself): the quick tier.
    if not config.getoption("slow") and not markexpr:
        left_out["slow"] = _deselect(config, items, lambda item: item.get_closest_marker("slow") is not None)
    config.stash[LEFT_OUT] = left_out


LEFT_OUT = pytest.StashKey[dict]()


def pytest_report_collectionfinish(config, start_path, items):
    """One line naming what the tiers left out (``.ci/run`` reads it to check the README's command)."""
    left_out = config.stash.get(LEFT_OUT, {})
    return f"tiers: {len(items)} run, {left_out.get('slow', 0)} slow left out, {left_out.get('formats', 0)} formats left out"


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("ndcg-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.session.timeZone", "UTC")
        # The JVM's flags are QUICK_JVM, through SPARK_SUBMIT_OPTS (above).
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{DATA / 'log4j2-tests.properties'}")
        # Tiny test queries spend a quarter of the JVM's time compiling generated code (Janino,
        # looking classes up in the jars); the interpreted operators give the same rows and
        # figures. (The runs in a process of their own - the process, cluster and bench tests -
        # keep Spark's default code generation, and the cluster tests compare their figures with
        # this session's to the last bit.)
        .config("spark.sql.codegen.wholeStage", "false")
        .config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return DATA


# ----------------------------------------------------------------------------- publish and unattended
# The inputs and the published result of tests/test_publish.py and tests/test_unattended.py: made
# once per worker, whichever of the two files runs first. Every test copies ``published`` before
# it changes anything.


@pytest.fixture(scope="session")
def inputs(spark, tmp_path_factory):
    """A good model, a worse one (scores reversed), one with a bad row, and the relevance of 30 users."""
    base = tmp_path_factory.mktemp("publish-inputs")
    rows = [(u, f"i{j}", float(10 - j)) for u in range(1, 31) for j in range(6)]
    rel = [(u, f"i{j}", float((u + j) % 4)) for u in range(1, 31) for j in range(0, 8, 2)]
    recs = spark.createDataFrame(rows, "user_id int, item_id string, score double")
    paths = {
        "good": recs,
        "worse": recs.selectExpr("user_id", "item_id", "-score AS score"),
        "bad": recs.selectExpr("user_id", "item_id", "IF(user_id = 7, CAST('NaN' AS DOUBLE), score) AS score"),
        "rel": spark.createDataFrame(rel, "user_id int, item_id string, relevance double"),
    }
    for name, df in paths.items():
        df.coalesce(1).write.parquet(str(base / name))
    return {name: str(base / name) for name in paths}


@pytest.fixture(scope="session")
def published(inputs, tmp_path_factory):
    """An output holding one complete dated result of the good model: the result a bad night must not lose."""
    from ndcg_spark.job import run
    from ndcg_spark.job.exits import EXIT_OK
    from tests.publishing import DATE, args

    out = tmp_path_factory.mktemp("published") / "out"
    assert run(args(inputs, out, "good", "--run-date", DATE)) == EXIT_OK
    return out
