"""Three nightly runs of the job into one output, the third with a worse model: the history, the
trend, the regression gate and MLflow read what the job wrote."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from ndcg_spark._report import trend_chart
from ndcg_spark.errors import EXIT_OK
from ndcg_spark.job import history, regression, run, tracking
from tests.helpers import frames, random_graded

NIGHTS = ("2026-11-20", "2026-11-21", "2026-11-22")


@pytest.fixture(scope="module")
def three_nights(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("three_nights")
    recs, rels = random_graded(seed=23, users=60)
    rng = np.random.default_rng(8)
    # The model ranks by the judged grade with noise; on the third night it ranks by noise alone.
    good = {u: {i: rels[u].get(i, 0) + float(rng.random()) for i in m} for u, m in recs.items()}
    bad = {u: {i: float(rng.random()) for i in m} for u, m in recs.items()}
    out = base / "out"
    for date, model in zip(NIGHTS, (good, good, bad)):
        rec_df, rel_df = frames(spark, model, rels)
        rec_df.write.parquet(str(base / date / "recs"))
        rel_df.write.parquet(str(base / date / "rel"))
        argv = ["--recommendations", str(base / date / "recs"), "--relevance", str(base / date / "rel")]
        assert run([*argv, "--output", str(out), "--k", "5,10", "--run-date", date]) == EXIT_OK
    return str(out)


def test_history_of_three_nights(spark, three_nights):
    text = history.history_text(spark, three_nights).splitlines()
    assert text[0].split() == ["k", "run_date", *[h for _, h in history.HISTORY_COLUMNS]]
    assert [line.split()[:2] for line in text[1:]] == [[k, d] for d in NIGHTS for k in ("5", "10")]
    record = json.loads(history.history_text(spark, three_nights, last=2, as_json=True))
    assert record["runs"] == list(NIGHTS[1:])
    for row in record["rows"]:
        manifest = json.loads(open(f"{three_nights}/_manifests/run_date={row['run_date']}/summary.json").read())
        (m,) = [m for m in manifest["metrics"] if m["k"] == row["k"]]
        assert {c: row[c] for c, _ in history.HISTORY_COLUMNS} == {c: m[c] for c, _ in history.HISTORY_COLUMNS}
    svg = ET.fromstring(trend_chart(history.trend_rows(history.read_history(spark, three_nights)), []))
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 2  # k 5 and 10, all users


def test_the_regression_gate_fails_the_third_night(spark, three_nights):
    gates = regression.parse_drop_gates("10:0.02", (), [5, 10])
    second = history.read_per_user(spark, three_nights, NIGHTS[1])
    third = history.read_per_user(spark, three_nights, NIGHTS[2])
    outcome = regression.regression_gate(spark, three_nights, NIGHTS[2], third, gates, (), "user_id")
    assert outcome.failed and outcome.previous == NIGHTS[1]
    a = {r.user_id: r.ndcg for r in second.filter("k = 10").collect()}
    b = {r.user_id: r.ndcg for r in third.filter("k = 10").collect()}
    d = np.array([b[u] - a[u] for u in sorted(set(a) & set(b))])
    assert outcome.message.startswith(
        f"regression gate failed: run_date {NIGHTS[1]} -> {NIGHTS[2]}, NDCG@10: {len(d)} users in common, "
        f"difference {d.mean():+.6f}, 95% interval ["
    )
    passed = regression.regression_gate(spark, three_nights, NIGHTS[1], second, gates, (), "user_id")
    assert not passed.failed and passed.checked[0]["mean_difference"] == 0.0


def test_three_nights_in_mlflow(spark, three_nights, tmp_path, monkeypatch):
    pytest.importorskip("mlflow")
    from mlflow.tracking import MlflowClient

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    store = (tmp_path / "mlruns").as_uri()
    for date in NIGHTS:
        folder = f"{three_nights}/_manifests/run_date={date}"
        manifest = json.loads(open(f"{folder}/summary.json").read())
        tracking.log_run(
            manifest,
            experiment="nightly",
            tracking_uri=store,
            artifacts=[f"{folder}/summary.json", f"{folder}/report.html"],
            gate_failed=date == NIGHTS[2],
        )
    client = MlflowClient(tracking_uri=store)
    runs = client.search_runs([client.get_experiment_by_name("nightly").experiment_id])
    assert sorted(r.data.params["run_date"] for r in runs) == list(NIGHTS)
    for r in runs:
        manifest = json.loads(
            open(f"{three_nights}/_manifests/run_date={r.data.params['run_date']}/summary.json").read()
        )
        assert r.data.metrics["mean_ndcg_at_10"] == [m for m in manifest["metrics"] if m["k"] == 10][0]["mean_ndcg"]
        assert sorted(a.path for a in client.list_artifacts(r.info.run_id)) == ["report.html", "summary.json"]
        assert r.data.tags["ndcg_spark.gate"] == ("failed" if r.data.params["run_date"] == NIGHTS[2] else "passed")
