"""Three nightly runs of the job into one output through its flags, the third with a worse model:
the regression gate fails the third night (exit 4, one line), the history command shows the three
dates, the report's trend chart holds them, and the three runs are in a local MLflow store."""

from __future__ import annotations

import contextlib
import html
import importlib.util
import io
import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from ndcg_spark.job import RunResult, cli, run
from ndcg_spark.job.commands import history
from ndcg_spark.job.exits import EXIT_OK, EXIT_QUALITY_GATE
from ndcg_spark.job.outputs.directory.runs import read_per_user
from ndcg_spark.job.outputs.files import files_for
from tests.helpers import browser, frames, layout_at, random_graded

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

NIGHTS = ("2026-11-20", "2026-11-21", "2026-11-22")
SVG = "{http://www.w3.org/2000/svg}"
HAS_MLFLOW = importlib.util.find_spec("mlflow") is not None


def manifest(out, date):
    return json.loads(open(f"{out}/_manifests/run_date={date}/summary.json").read())


@pytest.fixture(scope="module")
def three_nights(spark, tmp_path_factory):
    """{"out", "store", "nights": [(exit code, stdout, stderr)]} of three runs of the job."""
    base = tmp_path_factory.mktemp("three_nights")
    recs, rels = random_graded(seed=23, users=60)
    rng = np.random.default_rng(8)
    # The model ranks by the judged grade with noise; on the third night it ranks by noise alone.
    good = {u: {i: rels[u].get(i, 0) + float(rng.random()) for i in m} for u, m in recs.items()}
    bad = {u: {i: float(rng.random()) for i in m} for u, m in recs.items()}
    out, store = str(base / "out"), (base / "mlruns").as_uri()
    tracked = ["--mlflow-experiment", "nightly", "--mlflow-tracking-uri", store] if HAS_MLFLOW else []
    nights = []
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 opens a local file store only when asked
        for date, model in zip(NIGHTS, (good, good, bad)):
            rec_df, rel_df = frames(spark, model, rels)
            rec_df.write.parquet(str(base / date / "recs"))
            rel_df.write.parquet(str(base / date / "rel"))
            argv = ["--recommendations", str(base / date / "recs"), "--relevance", str(base / date / "rel")]
            argv += ["--output", out, "--k", "5,10", "--run-date", date, "--fail-if-drop", "10:0.02", *tracked]
            stdout, stderr = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                code = run(argv)
            nights.append((code, stdout.getvalue(), stderr.getvalue()))
    return {"out": out, "store": store, "nights": nights}


def test_the_regression_gate_fails_the_third_night_in_one_line(spark, three_nights):
    out, nights = three_nights["out"], three_nights["nights"]
    assert [code for code, _, _ in nights] == [EXIT_OK, EXIT_OK, EXIT_QUALITY_GATE], nights[2][2]
    first, second = nights[0][1].splitlines(), nights[1][1].splitlines()
    assert f"regression gate: no complete run before run_date={NIGHTS[0]} in {out}; passed" in first
    assert any(line.startswith(f"regression gate passed: run_date {NIGHTS[0]} -> {NIGHTS[1]}, ") for line in second)
    # The oracle: the second and third nights' per-user NDCG@10 as published, paired by user.
    a, b = (
        {r.user_id: r.ndcg for r in read_per_user(spark, files_for(spark, out), d).filter("k = 10").collect()}
        for d in NIGHTS[1:]
    )
    d = np.array([b[u] - a[u] for u in sorted(set(a) & set(b))])
    (line,) = nights[2][2].splitlines()
    assert line.startswith(
        f"ndcg-spark: error: regression gate failed: run_date {NIGHTS[1]} -> {NIGHTS[2]}, NDCG@10: {len(d)} users in "
        f"common, difference {d.mean():+.6f}, 95% interval ["
    ), line
    assert line.endswith("allowed drop 0.020000 (outputs were written)")
    finished = json.loads(nights[2][1].splitlines()[-1])
    assert finished["status"] == "quality_gate_failed" and finished["partition"] == {"run_date": NIGHTS[2]}
    # Published before the gate decided, with its decision in the manifest.
    gate = manifest(out, NIGHTS[2])["regression_gate"]
    assert (gate["previous"], gate["current"], gate["message"]) == (
        NIGHTS[1],
        NIGHTS[2],
        line[len("ndcg-spark: error: ") :],
    )
    assert [(g["users_in_common"], g["passed"]) for g in gate["gates"]] == [(len(d), False)]
    assert gate["gates"][0]["mean_difference"] == pytest.approx(d.mean(), abs=1e-12)
    assert manifest(out, NIGHTS[0])["regression_gate"]["previous"] is None
    # The marker is the run's result as one typed value: read back, it writes the same JSON.
    written = manifest(out, NIGHTS[2])
    assert RunResult.from_json(written).to_json() == written
    assert RunResult.from_json(written).failed[0].kind == "drop" and finished["gates"] == "failed: drop@10"
    assert manifest(out, NIGHTS[1])["settings"]["fail_if_drop"] == "10:0.02"


def test_the_history_command_prints_the_three_nights(spark, three_nights, capsys, monkeypatch):
    out = three_nights["out"]
    # A local output's markers are read without Spark: no session is asked for.
    monkeypatch.setattr(cli, "spark_session", lambda config: pytest.fail("history started Spark"))
    assert run(["history", "--output", out]) == EXIT_OK
    table = capsys.readouterr().out.splitlines()
    assert table[0].split() == ["k", "run_date", *[h for _, h in history.HISTORY_COLUMNS], "gates"]
    assert [line.split()[:2] for line in table[1:]] == [[k, d] for d in NIGHTS for k in ("5", "10")]
    # Each night's gates: the third night's drop gate at k = 10 failed.
    gates = ["passed", "passed", "failed: drop@10"]
    assert [line.split(None, 10)[10] for line in table[1:]] == [g for g in gates for _ in (5, 10)]
    assert run(["history", "--output", out, "--json", "--last", "2"]) == EXIT_OK
    record = json.loads(capsys.readouterr().out)
    assert record["runs"] == list(NIGHTS[1:]) and record["key"] == "run_date"
    for row in record["rows"]:
        (m,) = [m for m in manifest(out, row["run_date"])["metrics"] if m["k"] == row["k"]]
        assert {c: row[c] for c, _ in history.HISTORY_COLUMNS} == {c: m[c] for c, _ in history.HISTORY_COLUMNS}
    assert len(record["rows"]) == 4
    assert [row["gates"] for row in record["rows"]] == ["passed", "passed", "failed: drop@10", "failed: drop@10"]


def test_the_third_report_charts_the_three_nights(three_nights):
    out = three_nights["out"]
    page = open(f"{out}/_manifests/run_date={NIGHTS[2]}/report.html").read()
    svg = ET.fromstring(re.search(r'<svg id="ndcg-trend".*?</svg>', page).group(0))
    lines = svg.findall(f"{SVG}polyline")
    assert [len(line.get("points").split()) for line in lines] == [3, 3]  # k 5 and 10, one point a night
    # Each point's figure: the earlier nights' from their markers, tonight's from its own summary.
    titles = [c.find(f"{SVG}title").text for c in svg.findall(f"{SVG}circle")]
    expected = [
        f"all users, NDCG@{m['k']} {date}: {m['mean_ndcg']:.4f} [{m['ndcg_ci_low']:.4f}, {m['ndcg_ci_high']:.4f}]"
        for k in (5, 10)
        for date in NIGHTS
        for m in manifest(out, date)["metrics"]
        if m["k"] == k
    ]
    assert titles == expected
    first = open(f"{out}/_manifests/run_date={NIGHTS[0]}/report.html").read()
    assert first.count('class="trend"') == 2 and 'points="295.0,' in first  # one night: the middle of the chart
    # The failed night's page opens with its verdict, and draws the lowest mean the drop gate allowed.
    (failure,) = three_nights["nights"][2][2].splitlines()
    verdict = re.search(r'<div id="verdict" class="failed">.*?</div>', page).group(0)
    assert "1 of 1 gate failed" in verdict
    assert html.escape(failure.removeprefix("ndcg-spark: error: ").removesuffix(" (outputs were written)")) in verdict
    (drop,) = manifest(out, NIGHTS[2])["regression_gate"]["gates"]
    (limit,) = [t.text for t in svg.findall(f"{SVG}line[@class='limit']/{SVG}title")]
    assert limit == f"lowest NDCG@10 the drop gate allows: {drop['mean_previous'] - drop['threshold']:.4f}"
    assert '<div id="verdict" class="passed">' in first


@pytest.mark.skipif(not HAS_MLFLOW, reason="MLflow is not installed")
def test_the_three_nights_are_in_mlflow(three_nights, tmp_path):
    from mlflow.tracking import MlflowClient

    out, nights = three_nights["out"], three_nights["nights"]
    client = MlflowClient(tracking_uri=three_nights["store"])
    runs = client.search_runs([client.get_experiment_by_name("nightly").experiment_id])
    assert sorted(r.data.params["run_date"] for r in runs) == list(NIGHTS)
    logged = {json.loads(stdout.splitlines()[-1])["mlflow_run_id"] for _, stdout, _ in nights}
    assert logged == {r.info.run_id for r in runs}
    for r in runs:
        date = r.data.params["run_date"]
        published = manifest(out, date)
        assert r.data.metrics["mean_ndcg_at_10"] == [m for m in published["metrics"] if m["k"] == 10][0]["mean_ndcg"]
        assert r.data.params["fail_if_drop"] == "10:0.02" and r.data.params["k"] == "5,10"
        assert r.data.tags["ndcg_spark.gate"] == ("failed" if date == NIGHTS[2] else "passed")
        assert sorted(a.path for a in client.list_artifacts(r.info.run_id)) == ["report.html", "summary.json"]
        # The artifacts are the files as published.
        local = client.download_artifacts(r.info.run_id, "summary.json", str(tmp_path / date))
        assert json.loads(open(local).read()) == published


@browser
def test_the_failed_nights_page_says_so_on_its_first_screen_and_fits_1280_pixels(three_nights, tmp_path):
    page = open(f"{three_nights['out']}/_manifests/run_date={NIGHTS[2]}/report.html").read()
    layout = layout_at(page, tmp_path)
    assert layout["scroll_width"] <= 1280 and 0 < layout["verdict_bottom"] <= 800, layout
