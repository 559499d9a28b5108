"""Results in Iceberg and Delta tables, on the formats' official jars.

Each setup of :mod:`tests.formats` is a session as a team configures it: Iceberg's
``SparkSessionCatalog`` over a Hive metastore with Iceberg's JDBC catalog ``lake`` (SQLite) and
its hadoop catalog ``hadoop`` beside it, or Delta's ``DeltaCatalog`` as the session catalog over
a Hive metastore. The job runs through its
command line (``ndcg_spark.job.run``) in this process on the setup's session; the SIGKILLs, a job
without the formats' jars and the run over Spark Connect in processes of their own.

Run with the jars fetched (``scripts/fetch_jars.sh``), on PySpark 3.5 or 4.1::

    .venv41/bin/python -m pytest -q -n 0 -m formats tests/test_table_formats.py

The main suite leaves these tests out (``tests/conftest.py`` deselects the ``formats`` marker
unless ``-m`` names it); ``.ci/run`` runs them in each Spark line's stage (``-m`` naming them).
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from chispa import assert_df_equality

from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_OK, EXIT_QUALITY_GATE
from tests import formats
from tests.publishing import DATE

pytestmark = [pytest.mark.formats, pytest.mark.job]

NEXT = "2026-11-22"
FORMAT = {"iceberg": "iceberg", "delta": "delta"}


@dataclass
class Setup:
    name: str
    spark: object
    base: Path
    inputs: dict
    folder: Path

    @property
    def format(self) -> str:
        return FORMAT[self.name]


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """One metastore and warehouse for the process: the setups take turns on one JVM."""
    return tmp_path_factory.mktemp("formats")


@pytest.fixture(scope="module", params=formats.SETUPS)
def setup(request, base):
    reason = formats.missing()
    if reason is not None:
        pytest.skip(reason)
    spark = formats.session(request.param, base)
    folder = base / f"inputs-{request.param}"
    rows = [(u, f"i{j}", float(10 - j)) for u in range(1, 31) for j in range(6)]
    rel = [(u, f"i{j}", float((u + j) % 4)) for u in range(1, 31) for j in range(0, 8, 2)]
    recs = spark.createDataFrame(rows, "user_id int, item_id string, score double")
    frames = {
        "good": recs,
        "worse": recs.selectExpr("user_id", "item_id", "-score AS score"),
        "bad": recs.selectExpr("user_id", "item_id", "IF(user_id = 7, CAST('NaN' AS DOUBLE), score) AS score"),
        "rel": spark.createDataFrame(rel, "user_id int, item_id string, relevance double"),
    }
    for name, df in frames.items():
        df.coalesce(1).write.mode("overwrite").parquet(str(folder / name))
    inputs = {name: str(folder / name) for name in frames}
    # The folder output of the same input: the figures every format's tables must hold.
    published = base / f"folder-{request.param}"
    assert run(["--recommendations", inputs["good"], "--relevance", inputs["rel"], "--output", str(published),
                "--k", "3,5", "--run-date", DATE]) == EXIT_OK  # fmt: skip
    yield Setup(request.param, spark, base, inputs, published)


@pytest.fixture
def db(setup, request):
    # A name of its own per test and parameter: Iceberg's catalog caches tables by name.
    name = f"{setup.name}_{abs(hash(request.node.nodeid)) % 10**8}"
    setup.spark.sql(f"CREATE DATABASE {name}")
    yield name
    setup.spark.sql(f"DROP DATABASE {name} CASCADE")


def table_args(setup, family, model="good", *extra):
    return ["--recommendations", setup.inputs[model], "--relevance", setup.inputs["rel"], "--output-table", family,
            "--k", "3,5", *extra]  # fmt: skip


def ids(spark, table, date):
    """The run ids a table holds for a night (a view: what readers see; a storage table: what is kept)."""
    return sorted(r[0] for r in spark.sql(f"SELECT DISTINCT run_id FROM {table} WHERE run_date = '{date}'").collect())


def provider(spark, table) -> str:
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {table}").collect()
    return next(r[1] for r in rows if r[0] == "Provider").lower()


def empty_commits(spark, setup, table) -> list:
    """The table's commits that added and removed nothing (Iceberg snapshots, Delta versions)."""
    if setup.name == "iceberg":
        rows = spark.sql(
            f"SELECT snapshot_id, operation, summary FROM {table}.snapshots "
            "WHERE coalesce(summary['added-data-files'], '0') = '0' AND coalesce(summary['deleted-data-files'], '0') = '0'"
        ).collect()
        return [(r[0], r[1]) for r in rows]
    rows = spark.sql(f"DESCRIBE HISTORY {table}").collect()
    changed = ("numFiles", "numAddedFiles", "numRemovedFiles", "numDeletedRows", "numOutputRows")
    return [
        (r["version"], r["operation"])
        for r in rows
        if r["operation"] not in ("CREATE TABLE", "CREATE OR REPLACE TABLE")
        and all(int((r["operationMetrics"] or {}).get(m, "0")) == 0 for m in changed)
    ]


def one_line(err: str) -> str:
    """The job's one error line, checked to name no Java class."""
    lines = [line for line in err.strip().splitlines() if line]
    assert len(lines) == 1, err
    # Settings to make may name classes (spark.sql.catalog.x = org.apache...); never an exception's.
    assert not re.search(r"Exception|Error:|java\.lang|Py4J", lines[0]), lines[0]
    return lines[0]


# ----------------------------------------------------------------------------- in this process


def test_nights_reruns_gates_and_history_in_the_format(setup, db, capsys):
    """The session catalog by ``db.ndcg`` (Iceberg) and by ``spark_catalog.db.ndcg`` (Delta), as
    Unity Catalog users write names: one naming per format keeps the stage's time (both ran on both)."""
    family = f"{db}.ndcg" if setup.name == "iceberg" else f"spark_catalog.{db}.ndcg"
    nights_reruns_gates_and_history(setup, family, capsys)


def test_an_iceberg_catalog_of_its_own_name_publishes_every_night(setup, db, capsys):
    """Iceberg's JDBC catalog ``lake``, which holds views, named with three parts
    (``lake.db.ndcg``) while the current catalog, the session's, holds a schema of the same name
    with tables and views of the family's names: every statement of the family names its own
    catalog (a name resolved in the current one would find these, or hide the catalog's views:
    night 1 shown empty, every later night refused as its views already exist)."""
    if setup.name != "iceberg":
        pytest.skip("the JDBC catalog is Iceberg's")
    spark = setup.spark
    spark.sql(f"CREATE NAMESPACE lake.{db}")
    # The current catalog's same-named tables and views: rows of another night and run each.
    decoy = "SELECT '2026-11-21' AS run_date, 'decoy' AS run_id, 3 AS k, 0.0D AS mean_ndcg"
    for member in ("per_user", "summary", "runs"):
        spark.sql(f"CREATE TABLE {db}.ndcg_{member}_data USING parquet AS {decoy}")
        spark.sql(f"CREATE VIEW {db}.ndcg_{member} AS SELECT * FROM {db}.ndcg_{member}_data")
    assert spark.catalog.currentCatalog() == "spark_catalog"
    nights_reruns_gates_and_history(setup, f"lake.{db}.ndcg", capsys)
    # The views are the JDBC catalog's own, and the current catalog's tables are untouched.
    views = {r.viewName for r in spark.sql(f"SHOW VIEWS IN lake.{db}").collect() if not r.isTemporary}
    assert views == {"ndcg_per_user", "ndcg_summary", "ndcg_runs"}, views
    for member in ("per_user", "summary", "runs"):
        for table in (f"{db}.ndcg_{member}_data", f"{db}.ndcg_{member}"):
            assert [tuple(r) for r in spark.table(table).collect()] == [("2026-11-21", "decoy", 3, 0.0)], table


def nights_reruns_gates_and_history(setup, family, capsys):
    """Night 1 created in the format; night 2 failing its drop gate, then re-run: the re-run
    replaces it whole (no flag says the tables are V2: the job asks the tables)."""
    spark = setup.spark
    fmt = ["--output-table-format", setup.format]
    assert run(table_args(setup, family, "good", "--run-date", DATE, *fmt)) == EXIT_OK, capsys.readouterr().err
    for member in ("per_user", "summary", "runs"):
        assert provider(spark, f"{family}_{member}_data") == setup.format
    drop = ["--fail-if-drop", "5:0.01"]
    assert run(table_args(setup, family, "worse", "--run-date", NEXT, *drop)) == EXIT_QUALITY_GATE
    assert "regression gate failed: run_date 2026-11-21 -> 2026-11-22" in capsys.readouterr().err
    (failed,) = ids(spark, f"{family}_runs", NEXT)
    assert run(table_args(setup, family, "good", "--run-date", NEXT, *drop)) == EXIT_OK, capsys.readouterr().err
    assert "regression gate passed: run_date 2026-11-21 -> 2026-11-22" in capsys.readouterr().out
    # The re-run replaced the night: one run in every view, and only its rows kept.
    (current,) = ids(spark, f"{family}_runs", NEXT)
    assert current != failed
    for member in ("per_user", "summary", "runs"):
        assert ids(spark, f"{family}_{member}", NEXT) == [current], member
        assert ids(spark, f"{family}_{member}_data", NEXT) == [current], member
        assert len(ids(spark, f"{family}_{member}_data", DATE)) == 1, member
    assert spark.table(f"{family}_per_user").where(f"run_date = '{NEXT}'").count() == 60
    # The figures are the folder output's, to the last digit.
    summary = spark.table(f"{family}_summary").where(f"run_date = '{DATE}'").drop("run_date", "run_id")
    folder = spark.read.parquet(str(setup.folder / "summary" / f"run_date={DATE}"))
    assert_df_equality(summary, folder, ignore_row_order=True, ignore_column_order=True, ignore_nullable=True)
    means = spark.sql(f"SELECT k, mean_ndcg FROM {family}_summary WHERE run_date = '{DATE}'")
    assert_df_equality(means, folder.select("k", "mean_ndcg"), ignore_row_order=True, ignore_nullable=True)
    per_user = spark.table(f"{family}_per_user").where(f"run_date = '{DATE}'").drop("run_date", "run_id")
    users = spark.read.parquet(str(setup.folder / "per_user" / f"run_date={DATE}"))
    assert_df_equality(per_user, users, ignore_row_order=True, ignore_column_order=True, ignore_nullable=True)
    # No commit that changes nothing (the empty runs table made for the views, say).
    for member in ("per_user", "summary", "runs"):
        assert empty_commits(spark, setup, f"{family}_{member}_data") == [], member
    # history --output-table: both nights, the second as re-run.
    assert run(["history", "--output-table", family, "--json"]) == EXIT_OK
    history = json.loads(capsys.readouterr().out)
    assert history["runs"] == [DATE, NEXT]
    assert {(r["run_date"], r["k"], r["gates"]) for r in history["rows"]} == {
        (DATE, 3, "-"), (DATE, 5, "-"), (NEXT, 3, "passed"), (NEXT, 5, "passed")}  # fmt: skip


def test_quarantine_and_compare_have_their_tables_in_the_format(setup, db, capsys):
    spark, family, pairs = setup.spark, f"{db}.ndcg", f"{db}.pairs"
    fmt = ["--output-table-format", setup.format]
    quarantine = ["--run-date", DATE, "--on-invalid-rows", "quarantine", *fmt]
    assert run(table_args(setup, family, "bad", *quarantine)) == EXIT_OK, capsys.readouterr().err
    rejected = spark.table(f"{family}_rejected").collect()
    assert [(r.source, r.run_date) for r in rejected] == [("recommendations", DATE)] * 6
    assert {json.loads(r.row)["user_id"] for r in rejected} == {7} and rejected[0].reason == "bad_score"
    assert provider(spark, f"{family}_rejected_data") == setup.format
    # Re-run: the night's rejected rows replaced, not added.
    assert run(table_args(setup, family, "bad", *quarantine)) == EXIT_OK, capsys.readouterr().err
    assert spark.table(f"{family}_rejected").count() == 6 and len(ids(spark, f"{family}_rejected_data", DATE)) == 1
    compare = ["compare", "--baseline", setup.inputs["good"], "--candidate", setup.inputs["worse"],
               "--relevance", setup.inputs["rel"], "--k", "3,5", "--run-date", DATE, *fmt]  # fmt: skip
    assert run([*compare, "--output-table", pairs]) == EXIT_OK, capsys.readouterr().err
    rows = spark.table(f"{pairs}_comparison").collect()
    assert {(r.k, r.pairs, r.run_date) for r in rows} == {(3, 30, DATE), (5, 30, DATE)}
    assert provider(spark, f"{pairs}_comparison_data") == setup.format
    assert spark.table(f"{pairs}_per_user").count() == 60


def test_a_catalog_without_views_is_refused_before_anything_is_computed(setup, capsys):
    """Iceberg's hadoop catalog holds tables but no views, which the whole-night guarantee needs:
    exit 2 in the first seconds, one line naming what the catalog lacks and what to use."""
    if setup.name != "iceberg":
        pytest.skip("the hadoop catalog is Iceberg's")
    spark = setup.spark
    spark.sql("CREATE NAMESPACE IF NOT EXISTS hadoop.ev")
    started = time.monotonic()
    code = run(table_args(setup, "hadoop.ev.ndcg", "good", "--run-date", DATE))
    line = one_line(capsys.readouterr().err)
    assert code == EXIT_CONFIG, line
    assert "'hadoop'" in line and "views" in line, line
    assert not spark.catalog.tableExists("hadoop.ev.ndcg_per_user_data")
    assert not spark.catalog.tableExists("hadoop.ev.ndcg_runs_data")
    assert time.monotonic() - started < 60


@pytest.mark.parametrize(
    "table, extra, words",
    [
        ("nocat.ev.ndcg", [], ["no catalog 'nocat'", "spark.sql.catalog.nocat"]),
        ("{db}.ndcg", ["--output-table-format", "{other}"], ["{other}", "catalog"]),
    ],
    ids=["no-such-catalog", "format-the-catalog-cannot-create"],
)
def test_catalog_and_format_errors_are_one_plain_line_exit_2(setup, db, table, extra, words, capsys):
    other = "delta" if setup.format == "iceberg" else "iceberg"
    table = table.format(db=db)
    extra = [e.format(other=other) for e in extra]
    code = run(table_args(setup, table, "good", "--run-date", DATE, *extra))
    line = one_line(capsys.readouterr().err)
    assert code == EXIT_CONFIG, line
    for word in words:
        assert word.format(other=other) in line, line
    assert not setup.spark.catalog.tableExists(f"{db}.ndcg_per_user_data")


def test_snapshots_expire_and_nights_say_their_storage(setup, db, capsys):
    """Maintenance: each runs row says the bytes its night holds; expiring snapshots (Iceberg's
    ``expire_snapshots``, Delta's ``VACUUM``) as docs/job.md gives it keeps every published night."""
    spark, family = setup.spark, f"{db}.ndcg"
    fmt = ["--output-table-format", setup.format]
    for date in (DATE, NEXT, NEXT):
        assert run(table_args(setup, family, "good", "--run-date", date, *fmt)) == EXIT_OK, capsys.readouterr().err
    stored = {r.run_date: r.stored_bytes for r in spark.table(f"{family}_runs").collect()}
    assert set(stored) == {DATE, NEXT} and all(b > 0 for b in stored.values()), stored
    before = spark.table(f"{family}_summary").orderBy("run_date", "k").collect()
    for member in ("per_user", "summary", "runs"):
        table = f"{family}_{member}_data"
        if setup.name == "iceberg":
            # A literal, as docs/job.md gives it: on Spark 3.5 with Delta's SQL extension also on
            # the session, Delta 3.3's parser fails on a function call among CALL's arguments.
            now = spark.sql("SELECT date_format(current_timestamp(), 'yyyy-MM-dd HH:mm:ss.SSS')").first()[0]
            spark.sql(
                f"CALL spark_catalog.system.expire_snapshots(table => '{db}.ndcg_{member}_data', "
                f"older_than => TIMESTAMP '{now}', retain_last => 1)"
            )
        else:
            spark.conf.set("spark.databricks.delta.retentionDurationCheck.enabled", "false")
            spark.sql(f"VACUUM {table} RETAIN 0 HOURS")
    assert spark.table(f"{family}_summary").orderBy("run_date", "k").collect() == before
    assert spark.table(f"{family}_per_user").count() == 120
