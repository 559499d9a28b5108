"""The outputs' contract holds a kind the job has never seen: a minimal third sink, defined here
(the published runs kept in memory), chosen by one entry of ``outputs.kinds.KINDS``, runs
``evaluate``, a re-run of a night with the drop gate, and ``history``, with no other change to
the job. And the job's own errors carry their conditions."""

from __future__ import annotations

import contextlib
import json
from types import SimpleNamespace

import pytest
from chispa import assert_df_equality

from ndcg_spark import evaluate
from ndcg_spark.errors import EMPTY_TABLE, InputDataError
from ndcg_spark.job import main, parse_config, run
from ndcg_spark.job.exits import EXIT_INPUT, EXIT_OK, EXIT_QUALITY_GATE
from ndcg_spark.job.outputs import kinds
from ndcg_spark.job.result import RunResult, strict_json

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

RECS = "user_id int, item_id string, score double"
RELS = "user_id int, item_id string, relevance double"
NIGHTS = ("2026-11-20", "2026-11-21")


# ----------------------------------------------------------------------------- the third kind
# Every output named memory://NAME is a dict of this process: {night: (run id, manifest, {table: frame})}.
STORE: dict = {}


class MemoryStage:
    def __init__(self, spark, sink, run_id):
        self.spark, self.sink, self.run_id, self.tables, self.files = spark, sink, run_id, {}, {}

    def write(self, name, df):
        self.tables[name] = self.spark.createDataFrame(df.collect(), df.schema)

    def read(self, name):
        return self.tables[name]

    def file(self, name, text):
        self.files[name] = text

    def describe(self):
        return {"tables": {n: {"memory": n} for n in self.tables}, "files": sorted(self.files)}

    def publish(self, marker, guard=None):
        if guard is not None:
            guard()
        STORE.setdefault(self.sink.root, {})[self.sink.value] = (self.run_id, strict_json(marker), self.tables)

    def discard(self):
        self.tables = {}


class MemoryRuns:
    def __init__(self, root):
        self.root = self.shown = root

    def nights(self):
        return STORE.get(self.root, {})

    def key(self):
        return "run_date"

    def history(self, key="run_date", last=None, before=None):
        values = [v for v in sorted(self.nights()) if before is None or v < before]
        values = values[-last:] if last else [] if last == 0 else values
        return [(v, RunResult.from_json(json.loads(self.nights()[v][1]))) for v in values]

    def previous(self, before, key="run_date", *, passed_only=False):
        earlier = [v for v, r in self.history(key, before=before) if not (passed_only and r.failed)]
        return (earlier[-1] if earlier else None), []

    def per_user(self, spark, value, key="run_date"):
        return self.nights()[value][2]["per_user"]

    def missing(self, value, key, result):
        return []

    def unfinished(self, key="run_date"):
        return []


class MemorySink:
    def __init__(self, config):
        self.root = self.shown = config.output.path
        self.value = config.output.partition.value
        self.failures = []

    def check(self, spark, config):
        pass

    def locked(self, run_id, output):
        return contextlib.nullcontext(SimpleNamespace(broke=None, ensure=lambda: None))

    def recover(self):
        pass

    def stage(self, spark, run_id):
        return MemoryStage(spark, self, run_id)

    def tidy(self):
        pass

    def runs(self):
        return MemoryRuns(self.root)

    def texts(self, result):
        return {"summary.json": STORE[self.root][self.value][1]}

    def note_failure(self, exit_code, message):
        STORE.setdefault("failures", []).append((self.root, exit_code, message))


#: The kind: five functions, as a module of outputs/ would hold them.
MEMORY = SimpleNamespace(
    serves=lambda path, table: path is not None and path.startswith("memory://"),
    sink=lambda spark, config: MemorySink(config),
    runs=lambda spark, path, table: MemoryRuns(path),
    without_spark=lambda path, table: True,
    refuse_early=lambda config: None,
)


@pytest.fixture
def memory_kind(monkeypatch):
    """The one line where the kind is chosen, with the third kind in it."""
    monkeypatch.setattr(kinds, "KINDS", (MEMORY, *kinds.KINDS))
    STORE.clear()
    yield
    STORE.clear()


def _inputs(spark, tmp_path, night: int):
    """Night 0: user 1 finds its relevant item first. Night 1: second. User 2 finds nothing
    either night; user 3 has no recommendations (an edge row: it counts, with NDCG 0)."""
    first, second = ("a", "b") if night == 0 else ("b", "a")
    recs = spark.createDataFrame([(1, first, 0.9), (1, second, 0.5), (2, "c", 0.7)], RECS)
    rels = spark.createDataFrame([(1, "a", 1.0), (2, "d", 1.0), (3, "e", 2.0)], RELS)
    paths = []
    for name, df in (("recs", recs), ("rels", rels)):
        path = str(tmp_path / f"{name}{night}")
        df.write.mode("overwrite").parquet(path)
        paths.append(path)
    return ["--recommendations", paths[0], "--relevance", paths[1], "--k", "2", "--report", "false"], recs, rels


def test_a_third_kind_of_output_runs_evaluate_a_rerun_and_history(spark, tmp_path, capsys, memory_kind):
    output = "memory://nightly"
    argv0, recs0, rels0 = _inputs(spark, tmp_path, 0)
    argv1, recs1, rels1 = _inputs(spark, tmp_path, 1)
    drop = ["--fail-if-drop", "2:0.1", "--drop-on-estimate"]
    assert run([*argv0, "--output", output, "--run-date", NIGHTS[0], *drop]) == EXIT_OK
    assert run([*argv1, "--output", output, "--run-date", NIGHTS[1], *drop]) == EXIT_QUALITY_GATE
    first_id = STORE[output][NIGHTS[1]][0]
    # A re-run of the night replaces its result, and holds it against the night before again.
    assert run([*argv1, "--output", output, "--run-date", NIGHTS[1], *drop]) == EXIT_QUALITY_GATE
    assert sorted(STORE[output]) == list(NIGHTS) and STORE[output][NIGHTS[1]][0] != first_id

    for night, recs, rels in ((0, recs0, rels0), (1, recs1, rels1)):
        _, manifest, tables = STORE[output][NIGHTS[night]]
        expected = evaluate(recs, rels, k=2)
        assert_df_equality(tables["per_user"], expected.per_user, ignore_row_order=True)
        assert_df_equality(tables["summary"], expected.summary, ignore_row_order=True)
        recorded = json.loads(manifest)
        assert recorded["metrics"] == [r.asDict() for r in expected.summary.collect()]
        assert recorded["run"]["output"] == output and recorded["partition"] == {"run_date": NIGHTS[night]}
    # User 1's NDCG@2 fell from 1 to 1/log2(3) = 0.6309: the mean over 3 users by 0.1230 > 0.1.
    gate = json.loads(STORE[output][NIGHTS[1]][1])["regression_gate"]
    assert (gate["previous"], gate["current"]) == NIGHTS and gate["gates"][0]["passed"] is False
    assert gate["gates"][0]["mean_difference"] == pytest.approx((1 / 1.584962500721156 - 1) / 3)

    capsys.readouterr()
    assert run(["history", "--output", output, "--json"]) == EXIT_OK
    shown = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert shown["output"] == output and shown["runs"] == list(NIGHTS) and shown["unfinished"] == {}
    assert [(r["run_date"], r["k"], r["gates"]) for r in shown["rows"]] == [
        (NIGHTS[0], 2, "passed"),
        (NIGHTS[1], 2, "failed: drop@2"),
    ]


def test_a_failed_run_is_noted_by_its_own_sink(spark, tmp_path, capsys, memory_kind):
    argv, _, _ = _inputs(spark, tmp_path, 0)
    empty = spark.createDataFrame([], RELS)
    empty.write.parquet(str(tmp_path / "empty"))
    argv[3] = str(tmp_path / "empty")
    assert run([*argv, "--output", "memory://nightly", "--run-date", NIGHTS[0]]) == EXIT_INPUT
    assert STORE["failures"] == [("memory://nightly", EXIT_INPUT, "relevance table is empty")]
    assert "memory://nightly" not in STORE


def test_the_job_raises_an_empty_table_with_its_condition(spark, tmp_path):
    argv, _, _ = _inputs(spark, tmp_path, 0)
    spark.createDataFrame([], RECS).write.parquet(str(tmp_path / "none"))
    argv[1] = str(tmp_path / "none")
    config, _ = parse_config([*argv, "--output", str(tmp_path / "out")])
    with pytest.raises(InputDataError) as raised:
        main(spark, config)
    error = raised.value
    assert (error.condition, error.parameters) == (EMPTY_TABLE, {"table": "recommendations"})
    assert str(error) == "recommendations table is empty"
