"""Each run logged as an MLflow run, read back from a real local tracking store with MLflow's client."""

from __future__ import annotations

import json
import sys

import pytest

from ndcg_spark import evaluate
from ndcg_spark.errors import ConfigError
from ndcg_spark.job.commands import tracking
from ndcg_spark.job.exits import EXIT_CONFIG, exit_code
from ndcg_spark.job.result import RunResult
from tests.helpers import frames, random_graded

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

NIGHTS = ("2026-11-20", "2026-11-21", "2026-11-22")


@pytest.fixture
def store(tmp_path, monkeypatch):
    """A local file tracking store (newer MLflow keeps it behind an opt-in; a server needs none)."""
    pytest.importorskip("mlflow")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    return (tmp_path / "mlruns").as_uri()


@pytest.fixture(scope="module")
def manifests(spark):
    """Three nights' manifests as the job writes them: figures by segment, with the companion metrics."""
    recs, rels = random_graded(seed=17, users=30)
    attributes = spark.createDataFrame(
        [(u, "kr" if u % 3 else "us/east") for u in range(30)], "user_id int, country string"
    )
    rec_df, rel_df = frames(spark, recs, rels)
    metrics = [
        r.asDict()
        for r in evaluate(
            rec_df, rel_df, k=[5, None], group_by=["country"], user_attributes=attributes, companion_metrics=True
        ).summary.collect()
    ]
    settings = {
        "recommendations": "s3a://key:secret@bucket/recs",
        "relevance": "/data/relevance",
        "output": "/data/ndcg",
        "remote": "sc://host:15002/;token=abc",
        "group_by": ["country"],
        "k": [5, "all"],
        "convention": "trec_eval",
        "gain": "linear",
        "gains": {},
        "user_attributes": None,
        "report": True,
    }
    return [
        {
            "metrics": [dict(m, mean_ndcg=m["mean_ndcg"] - 0.1 * night) for m in metrics],
            "rows": {},
            "quality_gates": [],
            "partition": {"run_date": date},
            "settings": settings,
            "input_rows": {"recommendations": 750, "relevance": 450},
            "spark_version": spark.version,
            "duration_seconds": 3.5,
        }
        for night, date in enumerate(NIGHTS)
    ]


def test_three_nightly_runs_in_a_local_mlflow_store(store, manifests, tmp_path):
    from mlflow.tracking import MlflowClient

    report = tmp_path / "report.html"
    report.write_text("<html>report</html>")
    ids = []
    for night, manifest in enumerate(manifests):
        ids.append(
            tracking.log_run(
                RunResult.from_json(manifest),
                experiment="ndcg-nightly",
                tracking_uri=store,
                artifacts=[str(report), str(tmp_path / "missing.html")],
                gate_failed=night == 2,
            )
        )
    client = MlflowClient(tracking_uri=store)
    experiment = client.get_experiment_by_name("ndcg-nightly")
    found = client.search_runs([experiment.experiment_id], order_by=["attributes.start_time ASC"])
    assert [r.info.run_id for r in found] == ids
    for night, (run, manifest) in enumerate(zip(found, manifests)):
        assert run.info.status == "FINISHED" and run.info.run_name == f"evaluate run_date={NIGHTS[night]}"
        params = run.data.params
        assert params["run_date"] == NIGHTS[night] and params["convention"] == "trec_eval"
        assert params["k"] == "5,all" and params["group_by"] == "country" and params["command"] == "evaluate"
        assert params["recommendations"] == "s3a://bucket/recs"  # no credentials from a URI
        assert params["relevance"] == "/data/relevance" and params["spark_version"] == manifest["spark_version"]
        assert "remote" not in params and "user_attributes" not in params
        # Every figure of every segment and k, under a name MLflow accepts.
        expected = {}
        for m in manifest["metrics"]:
            scope = "country_" + m["country"]  # "/" is allowed in a name
            k = "all" if m["k"] is None else str(m["k"])
            for figure in (
                "mean_ndcg",
                "ndcg_ci_low",
                "ndcg_ci_high",
                "users",
                "users_excluded",
                "mean_ap",
                "hit_rate",
            ):
                expected[f"{scope}/{figure}_at_{k}"] = float(m[figure])
        assert {name: run.data.metrics[name] for name in expected} == pytest.approx(expected, abs=1e-12)
        assert (
            "country_kr/mean_ndcg_at_5" in run.data.metrics and "country_us/east/mean_ndcg_at_all" in run.data.metrics
        )
        assert run.data.tags["ndcg_spark.gate"] == ("failed" if night == 2 else "passed")
        assert run.data.tags["ndcg_spark.partition"] == f"run_date={NIGHTS[night]}"
        # The manifest and the report as artifacts; a missing file is skipped.
        assert sorted(a.path for a in client.list_artifacts(run.info.run_id)) == ["report.html", "summary.json"]
        local = client.download_artifacts(run.info.run_id, "summary.json", str(tmp_path / f"night{night}"))
        assert json.loads(open(local).read()) == json.loads(json.dumps(RunResult.from_json(manifest).to_json()))
    # The third night's mean NDCG is 0.2 below the first's, as logged.
    first, third = (r.data.metrics["country_kr/mean_ndcg_at_5"] for r in (found[0], found[2]))
    assert first - third == pytest.approx(0.2, abs=1e-12)


def test_a_compare_run_logs_each_pair(store, tmp_path):
    from mlflow.tracking import MlflowClient

    rows = [
        {"baseline_model": "prod", "candidate_model": "v2", "k": 10, "pairs": 50, "mean_difference": -0.02,
         "difference_ci_low": -0.03, "difference_ci_high": -0.01, "p_value": 0.001, "p_value_adjusted": 0.002},
        {"baseline_model": "prod", "candidate_model": "v3 (new)", "k": 10, "pairs": 50, "mean_difference": 0.01,
         "difference_ci_low": None, "difference_ci_high": None, "p_value": None, "p_value_adjusted": None},
    ]  # fmt: skip
    worse = {"gate": "10:0.01", "segment": {}, "k": 10, "margin": 0.01, "pairs": 50, "passed": False}
    settings = {"k": [10], "pairs": "baseline"}
    manifest = {"comparison": rows, "non_inferiority": [worse], "settings": settings, "spark_version": "4.1"}
    run_id = tracking.log_run(
        RunResult.from_json(manifest, "compare"), experiment="compare", tracking_uri=store, gate_failed=True
    )
    run = MlflowClient(tracking_uri=store).get_run(run_id)
    assert run.data.metrics == {
        "v2_vs_prod/pairs_at_10": 50.0,
        "v2_vs_prod/mean_difference_at_10": -0.02,
        "v2_vs_prod/difference_ci_low_at_10": -0.03,
        "v2_vs_prod/difference_ci_high_at_10": -0.01,
        "v2_vs_prod/p_value_at_10": 0.001,
        "v2_vs_prod/p_value_adjusted_at_10": 0.002,
        "v3 _new__vs_prod/pairs_at_10": 50.0,
        "v3 _new__vs_prod/mean_difference_at_10": 0.01,
    }
    assert run.data.tags["ndcg_spark.command"] == "compare" and run.data.tags["ndcg_spark.gate"] == "failed"
    assert run.data.tags["ndcg_spark.gates"] == "failed: worse@10"
    assert run.info.run_name == "compare"
    artifacts = [a.path for a in MlflowClient(tracking_uri=store).list_artifacts(run_id)]
    assert artifacts == ["comparison.json"]


def test_metric_names_are_safe_and_distinct():
    rows = [
        {"segment": "a=b", "k": 5, "mean_ndcg": 0.1},
        {"segment": "a+b", "k": 5, "mean_ndcg": 0.2},
        {"segment": None, "k": None, "mean_ndcg": 0.3, "users": 4, "flag": True},
    ]
    names = tracking.metric_rows(RunResult.from_json({"metrics": rows, "settings": {"group_by": ["segment"]}}))
    assert names == [
        ("segment_a_b/mean_ndcg_at_5", 0.1),
        ("segment_a_b/mean_ndcg_at_5_2", 0.2),
        ("segment_None/mean_ndcg_at_all", 0.3),
        ("segment_None/users_at_all", 4.0),
    ]
    assert tracking.metric_rows(RunResult.from_json({"metrics": rows[:1], "settings": {}})) == [("mean_ndcg_at_5", 0.1)]


def test_the_beyond_accuracy_figures_asked_for_are_logged_beside_ndcg():
    row = {"k": 10, "mean_ndcg": 0.4, "mean_novelty": 3.5, "novelty_ci_low": 3.1, "novelty_ci_high": 3.9,
           "mean_diversity": None, "catalog_coverage": 0.25, "gini_index": 0.8}  # fmt: skip
    assert tracking.metric_rows(RunResult.from_json({"metrics": [row], "settings": {}})) == [
        ("mean_ndcg_at_10", 0.4),
        ("mean_novelty_at_10", 3.5),
        ("novelty_ci_low_at_10", 3.1),
        ("novelty_ci_high_at_10", 3.9),
        ("catalog_coverage_at_10", 0.25),
        ("gini_index_at_10", 0.8),
    ]


def test_without_mlflow_logging_is_a_one_line_config_error(monkeypatch):
    for name in ("mlflow", "mlflow.tracking"):
        monkeypatch.setitem(sys.modules, name, None)  # as if not installed: importing it raises ImportError
    with pytest.raises(
        ConfigError, match=r"^MLflow logging needs MLflow: pip install 'ndcg-spark\[mlflow\]'"
    ) as caught:
        tracking.log_run(RunResult("evaluate"), experiment="x")
    assert "\n" not in str(caught.value) and exit_code(caught.value) == EXIT_CONFIG


def test_a_store_mlflow_cannot_open_is_a_one_line_config_error(store):
    with pytest.raises(ConfigError, match=r"^MLflow tracking store 'bogus://nowhere': ") as caught:
        tracking.log_run(RunResult("evaluate"), experiment="x", tracking_uri="bogus://nowhere")
    assert "\n" not in str(caught.value)


def test_a_store_set_in_the_environment_is_named_when_mlflow_refuses_it(store, monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "bogus://from-the-environment")
    with pytest.raises(ConfigError, match=r"^MLflow tracking store 'bogus://from-the-environment': "):
        tracking.log_run(RunResult("evaluate"), experiment="x")
