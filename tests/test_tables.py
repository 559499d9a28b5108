"""Results in catalog tables (``--output-table``): whole nights only, re-runs replace, a failed or
killed run never shows, the next run repairs what it left; the drop gate, the trend and
``history`` read the tables; quarantine and compare have their tables.

The in-process tests use the suite's session and its session catalog (each test a database of
its own); the kills run the job on a Hive metastore with embedded Derby in processes of their own
(one metastore folder per process), killed at named steps (:mod:`tests.table_faults`).
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest
from chispa import assert_df_equality

from ndcg_spark.job import parse_config, run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK, EXIT_QUALITY_GATE
from ndcg_spark.job.outputs import contract, kinds
from ndcg_spark.job.result import RunResult
from tests.faults import failing_at
from tests.publishing import DATE, ROOT, WAIT, kill_group

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

NEXT = "2026-11-22"


def table_args(inputs, family, model="good", *extra):
    return ["--recommendations", inputs[model], "--relevance", inputs["rel"], "--output-table", family, "--k", "3,5",
            *extra]  # fmt: skip


@pytest.fixture
def db(spark, tmp_path, request):
    name = "t_" + request.node.name.split("[")[0][-40:].replace("-", "_")
    spark.sql(f"CREATE DATABASE {name} LOCATION '{tmp_path / 'warehouse'}'")
    yield name
    spark.sql(f"DROP DATABASE {name} CASCADE")


def night(spark, family, date):
    """What a reader sees of one night: the runs' ids in each view, and the runs row."""
    ids = {m: {r[0] for r in spark.sql(f"SELECT DISTINCT run_id FROM {family}_{m} WHERE run_date = '{date}'").collect()}
           for m in ("per_user", "summary", "runs")}  # fmt: skip
    return ids


def partitions(spark, family, member, date):
    return sorted(r[0] for r in spark.sql(f"SHOW PARTITIONS {family}_{member}_data PARTITION (run_date = '{date}')")
                  .collect())  # fmt: skip


def test_nights_reruns_and_failures_show_whole_nights_only(spark, inputs, published, db, capsys, monkeypatch):
    """First night; a second one whose drop gate (against the first, read from the tables) fails;
    re-runs of it failing before their runs row (the night stays as it was, the failed run's rows
    go) and between their drops (the new night shows whole); a plain retry replaces the night,
    one run per table. The figures are the directory output's for the same input."""
    family = f"{db}.ndcg"
    assert run(table_args(inputs, family, "good", "--run-date", DATE)) == EXIT_OK
    assert run(table_args(inputs, family, "worse", "--run-date", NEXT, "--fail-if-drop", "5:0.01")) == EXIT_QUALITY_GATE
    assert "regression gate failed: run_date 2026-11-21 -> 2026-11-22" in capsys.readouterr().err
    shown = night(spark, family, NEXT)["runs"]
    for step in ("staged", "dropped:per_user"):
        monkeypatch.setattr(contract, "at_step", failing_at(step))
        assert run(table_args(inputs, family, "good", "--run-date", NEXT)) == EXIT_FAILURE
        seen = night(spark, family, NEXT)
        assert seen["per_user"] == seen["summary"] == seen["runs"] and len(seen["runs"]) == 1, step
        assert (seen["runs"] == shown) == (step == "staged"), step
        assert spark.table(f"{family}_per_user").where(f"run_date = '{NEXT}'").count() == 60
        assert spark.table(f"{family}_summary").where(f"run_date = '{NEXT}'").count() == 2
        if step == "staged":  # the failed run dropped its own rows
            assert len(partitions(spark, family, "per_user", NEXT)) == 1
        shown = seen["runs"]
    monkeypatch.setattr(contract, "at_step", contract._no_fault)
    assert run(table_args(inputs, family, "good", "--run-date", NEXT, "--fail-if-drop", "5:0.01")) == EXIT_OK
    out = capsys.readouterr().out
    assert f"wrote {family}" in out and "regression gate passed: run_date 2026-11-21 -> 2026-11-22" in out
    # Replaced, not duplicated: one run per night in every view and storage table.
    retried = night(spark, family, NEXT)
    assert len(retried["runs"]) == 1 and retried["per_user"] == retried["summary"] == retried["runs"] != shown
    for member in ("per_user", "summary", "runs"):
        assert [p.split("/run_id=")[1] for p in partitions(spark, family, member, NEXT)] == sorted(retried["runs"])
    # The folder output of the same input, the same figures.
    summary = spark.table(f"{family}_summary").where(f"run_date = '{DATE}'").drop("run_date", "run_id")
    folder = spark.read.parquet(str(published / "summary" / f"run_date={DATE}"))
    assert_df_equality(summary, folder, ignore_row_order=True, ignore_nullable=True)
    per_user = spark.table(f"{family}_per_user").where(f"run_date = '{DATE}'").drop("run_date", "run_id")
    folder_users = spark.read.parquet(str(published / "per_user" / f"run_date={DATE}"))
    assert_df_equality(per_user, folder_users, ignore_row_order=True, ignore_nullable=True)
    # The runs row: status, verdict, the gate, the report and the manifest.
    row = spark.table(f"{family}_runs").where(f"run_date = '{NEXT}'").collect()[0]
    assert (row.status, row.verdict, row.command) == ("ok", "passed", "evaluate")
    assert json.loads(row.gates)[0]["passed"] is True and json.loads(row.rows)["relevance"]["read"] == 120
    assert row.report.startswith("<!DOCTYPE html>") and "Mean NDCG@k by run_date" in row.report and DATE in row.report
    assert json.loads(row.manifest)["run"]["id"] == row.run_id and row.duration_seconds > 0
    # MLflow's artifacts: the manifest and the report, read back from the runs row.
    config, _ = parse_config(table_args(inputs, family, "good", "--run-date", NEXT))
    texts = kinds.sink_for(spark, config).texts(RunResult.from_json(json.loads(row.manifest)))
    assert texts == {"summary.json": row.manifest, "report.html": row.report}
    # history --output-table: both nights, the second as re-run.
    assert run(["history", "--output-table", family, "--json"]) == EXIT_OK
    history = json.loads(capsys.readouterr().out)
    assert history["output"] == family and history["runs"] == [DATE, NEXT]
    assert {(r["run_date"], r["k"], r["gates"]) for r in history["rows"]} == {
        (DATE, 3, "-"), (DATE, 5, "-"), (NEXT, 3, "passed"), (NEXT, 5, "passed")}  # fmt: skip


def test_quarantine_and_compare_have_their_tables(spark, inputs, db, capsys):
    family, pairs = f"{db}.ndcg", f"{db}.pairs"
    quarantine = ["--run-date", DATE, "--on-invalid-rows", "quarantine"]
    assert run(table_args(inputs, family, "bad", *quarantine)) == EXIT_OK
    rejected = spark.table(f"{family}_rejected").collect()
    assert [(r.source, r.run_date) for r in rejected] == [("recommendations", DATE)] * 6
    assert {json.loads(r.row)["user_id"] for r in rejected} == {7} and rejected[0].reason == "bad_score"
    compare = ["compare", "--baseline", inputs["good"], "--candidate", inputs["worse"], "--relevance", inputs["rel"],
               "--k", "3,5", "--run-date", DATE]  # fmt: skip
    assert run([*compare, "--output-table", pairs]) == EXIT_OK
    rows = spark.table(f"{pairs}_comparison").collect()
    assert {(r.k, r.pairs, r.run_date) for r in rows} == {(3, 30, DATE), (5, 30, DATE)}
    assert spark.table(f"{pairs}_per_user").count() == 60
    capsys.readouterr()
    # Another command's family, another partition key: refused before anything is read.
    assert run([*compare, "--output-table", family]) == EXIT_CONFIG
    assert "holds the results of 'ndcg-spark evaluate'" in capsys.readouterr().err
    assert run(table_args(inputs, family, "good", "--partition", "model=a")) == EXIT_CONFIG
    assert "is partitioned by run_date, not by model" in capsys.readouterr().err


def test_a_second_run_of_the_night_while_the_first_lives_exits_5(spark, inputs, db, capsys):
    """The night's lock lies beside the database's tables: a live holder refuses the second run."""
    config, _ = parse_config(table_args(inputs, f"{db}.ndcg", "good", "--run-date", DATE))
    sink = kinds.sink_for(spark, config)
    with sink.locked("20261121T020001Z-1a2b3c4d", config.output):
        assert run(table_args(inputs, f"{db}.ndcg", "good", "--run-date", DATE)) == EXIT_LOCKED
    err = capsys.readouterr().err
    assert f"output {db}.ndcg (run_date={DATE}) is locked by run 20261121T020001Z-1a2b3c4d" in err
    assert not spark.catalog.tableExists(f"{db}.ndcg_runs_data")


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--output", "o/", "--output-table", "db.t", "--run-date", DATE], "give output (a directory) or output_table"),
        (["--output-table", "db.t"], "output_table needs --run-date or --partition"),
        (["--output-table", "db.t;drop", "--run-date", DATE], "is not a table name"),
        (["--output-table", "db.t", "--run-date", DATE, "--output-table-format", "csv"], "is not one of parquet"),
        (["--output", "o/", "--conf", "spark.x"], "--conf 'spark.x' must look like key=value"),
    ],
)
def test_table_config_errors(argv, words):
    with pytest.raises(Exception, match=words.replace("(", r"\(").replace(")", r"\)")):
        parse_config(["--recommendations", "r/", "--relevance", "g/", *argv])


def test_spark_settings_from_the_file_and_conf_flags(tmp_path):
    conf = tmp_path / "job.toml"
    conf.write_text('output = "o/"\n[spark]\n"spark.sql.catalogImplementation" = "hive"\n"spark.a" = 1\n')
    config, _ = parse_config(["--config", str(conf), "--recommendations", "r/", "--relevance", "g/",
                              "--conf", "spark.a=2", "--conf", "spark.s3a.secret.key=x", "--output-table", "db.t",
                              "--run-date", DATE])  # fmt: skip
    assert config.spark == (
        ("spark.sql.catalogImplementation", "hive"),
        ("spark.a", "2"),
        ("spark.s3a.secret.key", "x"),
    )
    assert config.output.path is None and config.output.table == "db.t"  # the flag's output replaces the file's
    assert config.to_dict()["spark"]["spark.s3a.secret.key"] == "<redacted>"


# ----------------------------------------------------------------------------- real kills, Hive metastore


def hive_args(base, inputs):
    """The job on a Hive metastore of its own (embedded Derby under ``base``), through --conf."""
    return [*table_args(inputs, "ndcg", "good", "--run-date", DATE),
            "--conf", "spark.sql.catalogImplementation=hive",
            "--conf", f"spark.sql.warehouse.dir={base / 'warehouse'}",
            "--conf", f"spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={base / 'metastore_db'};"
            "create=true",
            "--conf", "spark.sql.shuffle.partitions=2"]  # fmt: skip


def start(base, inputs, step, first=False):
    seen = base / "seen.json"
    cmd = [sys.executable, "-m", "tests.table_faults", str(seen), step, str(base / "paused"),
           *(["--first"] if first else []), "--", *hive_args(base, inputs)]  # fmt: skip
    env = {"PYTHONPATH": str(ROOT), **{k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}}
    proc = subprocess.Popen(cmd, cwd=base, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip
    return proc


class KillChain(threading.Thread):
    """The night published, its re-run SIGKILLed at ``staged`` (before its runs row); then a plain
    retry, SIGKILLed at ``published`` (right after its runs row): two JVMs on one Hive metastore,
    one after the other, each recording what a reader saw when it started and at the kill."""

    def __init__(self, base, inputs):
        super().__init__(daemon=True)
        self.base, self.inputs, self.seen, self.stderr, self.error, self.proc = base, inputs, [], [], None, None

    def run(self) -> None:
        try:
            for step in ("staged", "published"):
                self.proc = start(self.base, self.inputs, step, first=step == "staged")
                deadline = time.time() + WAIT
                while not (self.base / "paused").exists():
                    assert self.proc.poll() is None and time.time() < deadline, self.proc.stderr.read()[-3000:]
                    time.sleep(0.1)
                kill_group(self.proc)
                self.stderr.append(self.proc.stderr.read())
                (self.base / "paused").unlink()
                self.seen.append(json.loads((self.base / "seen.json").read_text()))
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            self.error = exc


@pytest.fixture(scope="module", autouse=True)
def kill_chain(request, tmp_path_factory):
    """The kill chain, started before this file's first test when its test is selected, so that
    its JVMs run beside the in-process tests; its test, the file's last, checks what it saw."""
    if not any(item.name == KILL_TEST for item in request.session.items):
        yield None
        return
    chain = KillChain(tmp_path_factory.mktemp("hive"), request.getfixturevalue("inputs"))
    chain.start()
    yield chain
    if chain.is_alive() and chain.proc is not None and chain.proc.poll() is None:
        kill_group(chain.proc)


KILL_TEST = "test_sigkilled_reruns_on_a_hive_metastore_never_show_a_partial_night"


@pytest.mark.process
def test_sigkilled_reruns_on_a_hive_metastore_never_show_a_partial_night(kill_chain):
    """A night published, then its re-run SIGKILLed before its runs row (``staged``): the next
    process's readers see the old night whole. That next process, a plain retry with no flag,
    breaks the dead run's lock, drops the rows it left and publishes: SIGKILLed right after its
    runs row (``published``), its readers see the new night whole. (What a kill right after that
    leaves, the night's next run drops: the in-process test above fails a run there.)"""
    kill_chain.join(WAIT)
    if kill_chain.error is not None:
        raise kill_chain.error
    first, retry = kill_chain.seen
    assert first["before"] == {} and first["first"] == EXIT_OK  # a new metastore, then the first night
    assert "breaking the lock of run" in kill_chain.stderr[1]
    old, new = retry["before"], retry["paused"]
    for killed in (old, new):  # one run in every view, whole (60 per-user rows, 2 summary rows)
        ((date, shown, n),) = killed["per_user"]
        assert killed["summary"] == [[date, shown, 2]] and killed["runs"] == [[date, shown, 1]] and n == 60
        assert killed["figures"] == first["paused"]["figures"]
    ids = sorted(p.split("/run_id=")[1] for p in old["per_user_data"])
    assert len(ids) == 2 and old["per_user"][0][1] == ids[0]  # the old night shown, the killed run's rows unseen
    assert first["paused"]["per_user_data"] == old["per_user_data"]
    # The retry dropped the killed run's rows, published its own; the old night's are superseded.
    now = sorted(p.split("/run_id=")[1] for p in new["per_user_data"])
    assert now[0] == ids[0] and ids[1] not in now and new["per_user"][0][1] == now[1]
    assert new["runs_data"] == new["summary_data"] == new["per_user_data"]
