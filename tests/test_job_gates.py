"""The job's gates on change, history command and MLflow logging through its flags: exit codes,
one-line messages, what is published and where it is checked."""

from __future__ import annotations

import html
import importlib.util
import json
import re
import sys

import numpy as np
import pytest

from ndcg_spark.job import CompareConfig, EvaluateConfig, run
from ndcg_spark.job.commands import tracking
from ndcg_spark.job.config.gate_specs import Gate
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_OK, EXIT_QUALITY_GATE
from ndcg_spark.job.gates import wording
from ndcg_spark.job.result import RunResult
from tests.helpers import frames, random_graded

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None
REQUIRED = {"recommendations": "r/", "relevance": "g/", "output": "o/"}


def one_error_line(capsys) -> str:
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("ndcg-spark: error: ")
    return line[len("ndcg-spark: error: ") :]


@pytest.mark.parametrize(
    "argv, words",
    [
        (["--fail-if-drop", "10:0.02"], "fail_if_drop compares a run with the previous run of the same output"),
        (["--run-date", "2026-11-20", "--fail-if-drop", "20:0.02"], "fail_if_drop names k = 20"),
        (["--run-date", "2026-11-20", "--fail-if-drop", "10"], "expected [column=value:]k:drop"),
        (["--drop-baseline", "best"], "drop_baseline = 'best' is not one of last, last_passed"),
        (["--trend-runs", "-1"], "trend_runs must be a whole number of runs"),
        (["--fail-if-worse", "10:0.01"], "unrecognized argument --fail-if-worse"),
        (["--mlflow-tracking-uri", "http://mlflow:5000"], "mlflow_tracking_uri is set without mlflow_experiment"),
        (["compare", "--fail-if-drop", "10:0.02"], "unrecognized argument --fail-if-drop"),
        (["compare", "--candidate", "c/", "--fail-if-worse", "10:2%"], "expected [column=value:]k:margin"),
        (["history"], "the following arguments are required: --output"),
        (["history", "--output", "o/", "--last", "0"], "argument --last: must be a positive whole number, got '0'"),
    ],
)
def test_bad_gate_and_tracking_flags_exit_2_with_one_line(tmp_path, capsys, argv, words):
    # The inputs do not exist: a config error is found before anything is read.
    paths = ["--recommendations", str(tmp_path / "r"), "--relevance", str(tmp_path / "g"), "--output", str(tmp_path)]
    command = argv[:1] if argv[0] in ("compare", "history") else []
    args = argv if command == ["history"] else [*command, *paths, "--k", "10", *argv[len(command) :]]
    assert run(args) == EXIT_CONFIG
    assert words in one_error_line(capsys)


def test_a_config_key_of_the_other_command_is_refused(tmp_path, capsys):
    (tmp_path / "c.toml").write_text('fail_if_drop = "10:0.02"\ncandidate = "c/"\n')
    assert (
        run(
            ["compare", "--config", str(tmp_path / "c.toml"), "--baseline", "b/", "--relevance", "g/", "--output", "o/"]
        )
        == 2
    )
    assert one_error_line(capsys) == "fail_if_drop is a key of 'ndcg-spark evaluate', not of 'ndcg-spark compare'"


def test_the_gates_on_change_as_config_values():
    config = EvaluateConfig.from_mapping(
        {**REQUIRED, "k": [5, 10], "group_by": ["model"], "run_date": "2026-11-22",
         "fail_if_drop": ["10:0.02", "model=v2:5:2%"], "drop_on_estimate": True, "drop_baseline": "last_passed",
         "trend_runs": 3}
    )  # fmt: skip
    assert config.drop.gates == (Gate("drop", (), 10, 0.02), Gate("drop", (("model", "v2"),), 5, 0.02, True))
    assert (config.drop.on_estimate, config.drop.baseline, config.trend_runs) == (True, "last_passed", 3)
    settings = config.to_dict()
    assert settings["fail_if_drop"] == "10:0.02,model=v2:5:2%" and settings["drop_baseline"] == "last_passed"
    plain = EvaluateConfig.from_mapping({**REQUIRED, "drop_on_estimate": "true", "trend_runs": "0"})
    assert plain.drop is None and plain.trend_runs == 0 and plain.to_dict()["fail_if_drop"] is None
    compare = CompareConfig.from_mapping({**REQUIRED, "candidate": "c/", "k": "10", "fail_if_worse": "10:0.01"})
    assert compare.worse_gates == (Gate("worse", (), 10, 0.01),) and compare.to_dict()["fail_if_worse"] == "10:0.01"


def test_the_settings_keep_no_spark_connect_token():
    config = EvaluateConfig.from_mapping({**REQUIRED, "remote": "sc://host:15002/;user_id=etl;token=abc123"})
    assert config.remote.endswith("token=abc123")  # the session still gets it
    assert config.to_dict()["remote"] == "sc://host:15002/;user_id=etl;token=<redacted>"
    assert "abc123" not in json.dumps(config.to_dict())


def test_mlflow_asked_for_without_mlflow_is_a_config_error_before_reading(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if not installed
    argv = ["--recommendations", str(tmp_path / "missing"), "--relevance", str(tmp_path / "missing")]
    assert run([*argv, "--output", str(tmp_path / "out"), "--mlflow-experiment", "nightly"]) == EXIT_CONFIG
    assert one_error_line(capsys) == tracking.NOT_INSTALLED
    assert not (tmp_path / "out").exists()


def test_failed_gates_name_the_first_failure():
    floor = {"segment": {}, "k": 10, "threshold": 0.5, "users": 3, "mean_ndcg": 0.25, "passed": False}
    drop = {"message": "regression gate failed: ... (outputs were written)", "gates": [{"passed": False}]}
    both = wording.failed_gates(RunResult.from_json({"quality_gates": [floor], "regression_gate": drop}))
    assert both == (
        "quality gate failed: mean NDCG@10 = 0.250000 is below 0.5; the regression gate failed too "
        "(outputs were written)"
    )
    assert wording.failed_gates(RunResult.from_json({"quality_gates": [], "regression_gate": drop})) == drop["message"]
    passed = {"message": "regression gate passed: ...", "gates": [{"passed": True}]}
    assert wording.failed_gates(RunResult.from_json({"quality_gates": [], "regression_gate": passed})) is None
    assert wording.failed_gates(RunResult.from_json({"non_inferiority": []})) is None


@pytest.fixture(scope="module")
def three_models(spark, tmp_path_factory):
    """One table with a model column: the baseline, the same model again, and one at random (worse)."""
    base = tmp_path_factory.mktemp("models")
    recs, rels = random_graded(seed=11, users=50)
    rng = np.random.default_rng(4)
    good = {u: {i: rels[u].get(i, 0) + float(rng.random()) for i in m} for u, m in recs.items()}
    bad = {u: {i: float(rng.random()) for i in m} for u, m in recs.items()}
    (prod, rel), (worse, _) = frames(spark, good, rels), frames(spark, bad, rels)
    tables = [
        df.selectExpr(f"'{name}' AS model", "*") for name, df in (("prod", prod), ("same", prod), ("random", worse))
    ]
    tables[0].unionByName(tables[1]).unionByName(tables[2]).write.parquet(str(base / "recs"))
    rel.write.parquet(str(base / "rel"))
    return str(base / "recs"), str(base / "rel")


def test_compare_fails_a_worse_candidate_with_exit_4_and_draws_the_margin(three_models, tmp_path, capsys):
    recs, rel = three_models
    out = tmp_path / "cmp"
    argv = ["compare", "--recommendations", recs, "--relevance", rel, "--output", str(out), "--k", "5,10"]
    argv += ["--model-col", "model", "--baseline-model", "prod", "--fail-if-worse", "10:0.01"]
    assert run(argv) == EXIT_QUALITY_GATE
    captured = capsys.readouterr()
    finished = json.loads(captured.out.splitlines()[-1])
    assert (finished["status"], finished["gates"]) == ("quality_gate_failed", "failed: worse@10")
    (line,) = captured.err.splitlines()
    written = json.loads((out / "comparison.json").read_text())
    assert RunResult.from_json(written).to_json() == written  # the marker is the typed result's JSON
    checked = written["non_inferiority"]
    assert [(g["candidate_model"], g["passed"]) for g in checked] == [("random", False), ("same", True)]
    (row,) = [r for r in written["comparison"] if r["candidate_model"] == "random" and r["k"] == 10]
    assert row["difference_ci_high"] < -0.01 and checked[0]["difference_ci_high"] == row["difference_ci_high"]
    assert line == (
        f"ndcg-spark: error: non-inferiority gate failed: random vs prod is worse at NDCG@10 by more than 0.01: "
        f"difference {row['mean_difference']:+.6f}, 95% interval [{row['difference_ci_low']:+.6f}, "
        f"{row['difference_ci_high']:+.6f}] over {row['pairs']} users (outputs were written)"
    )
    page = (out / "report.html").read_text()
    # The page opens with the verdict: the failed candidate named, by how much; the passing one too.
    assert '<div id="verdict" class="failed"><p><strong>FAILED</strong>: 1 of 2 gates failed</p>' in page
    assert html.escape(line.removeprefix("ndcg-spark: error: ").removesuffix(" (outputs were written)")) in page
    assert "non-inferiority gate passed: same vs prod is not worse at NDCG@10 by more than 0.01" in page
    charts = dict(re.findall(r'<svg class="differences".*?<text[^>]*>(NDCG@\d+)</text>(.*?)</svg>', page))
    assert set(charts) == {"NDCG@5", "NDCG@10"}
    assert charts["NDCG@10"].count('class="margin"') == 1 and 'class="margin"' not in charts["NDCG@5"]
    assert "non-inferiority margin -0.01" in charts["NDCG@10"]


def test_compare_of_a_model_with_a_copy_of_itself_passes_with_a_zero_difference(spark, three_models, tmp_path, capsys):
    # Every per-user difference is 0: the t statistic is undefined (null in every row), the
    # interval is [0, 0] and the p-value 1; the table is still written with its declared types.
    recs, rel = three_models
    out = tmp_path / "same"
    argv = ["compare", "--recommendations", recs, "--relevance", rel, "--output", str(out), "--k", "10"]
    argv += ["--model-col", "model", "--baseline-model", "prod", "--candidate-model", "same"]
    assert run([*argv, "--fail-if-worse", "10:0.01"]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert json.loads(lines[-1])["status"] == "ok"
    (row,) = json.loads((out / "comparison.json").read_text())["comparison"]
    assert (row["mean_difference"], row["difference_ci_low"], row["difference_ci_high"]) == (0.0, 0.0, 0.0)
    assert (row["t_statistic"], row["p_value"], row["p_value_adjusted"]) == (None, 1.0, 1.0)
    passed = (
        f"non-inferiority gate passed: same vs prod is not worse at NDCG@10 by more than 0.01: difference "
        f"+0.000000, 95% interval [+0.000000, +0.000000] over {row['pairs']} users"
    )
    assert passed in lines
    table = spark.read.parquet(str(out / "comparison"))
    assert dict(table.dtypes)["t_statistic"] == "double" and table.first()["t_statistic"] is None
    assert '<div id="verdict" class="passed">' in (out / "report.html").read_text()


def test_history_refuses_outputs_without_dated_runs(three_models, tmp_path, capsys):
    recs, rel = three_models
    out = str(tmp_path / "single")
    argv = ["--recommendations", recs, "--relevance", rel, "--output", out, "--group-by", "model", "--k", "5"]
    assert run([*argv, "--trend-runs", "3"]) == EXIT_OK
    page = open(f"{out}/report.html").read()
    assert "ndcg-trend" not in page  # a run without a date has no trend
    capsys.readouterr()
    for output, words in (
        (out, f"output {out} holds one run, not dated runs"),
        (str(tmp_path / "none"), f"output {tmp_path / 'none'} holds no ndcg-spark runs"),
    ):
        assert run(["history", "--output", output]) == EXIT_CONFIG
        assert one_error_line(capsys).startswith(words)


@pytest.mark.skipif(not HAS_MLFLOW, reason="MLflow is not installed")
def test_a_failed_mlflow_logging_leaves_the_result_published_and_exits_1(three_models, tmp_path, capsys, monkeypatch):
    recs, rel = three_models
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = (tmp_path / "mlruns").as_uri()

    def down(*args, **kwargs):
        raise ConnectionError("tracking server unreachable")

    monkeypatch.setattr(tracking, "log_run", down)
    out = tmp_path / "out"
    argv = ["--recommendations", recs, "--relevance", rel, "--output", str(out), "--k", "5", "--run-date", "2026-11-20"]
    assert run([*argv, "--mlflow-experiment", "nightly", "--mlflow-tracking-uri", store]) == EXIT_FAILURE
    captured = capsys.readouterr()
    finished = json.loads(captured.out.splitlines()[-1])
    assert (finished["status"], finished["mlflow_run_id"]) == ("mlflow_failed", None)
    assert captured.err.splitlines() == [
        "ndcg-spark: error: MLflow logging failed: ConnectionError: tracking server unreachable (outputs were written)"
    ]
    assert json.loads((out / "_manifests/run_date=2026-11-20/summary.json").read_text())["metrics"]
    # A store MLflow cannot open is found before anything is read or written.
    assert (
        run([*argv, "--output", str(tmp_path / "o2"), "--mlflow-experiment", "x", "--mlflow-tracking-uri", "bogus://x"])
        == 2
    )
    assert one_error_line(capsys).startswith("MLflow tracking store 'bogus://x': ")
    assert not (tmp_path / "o2").exists()
