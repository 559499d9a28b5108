"""Model comparison (library and `ndcg-spark compare`) and the HTML report rendered in Chromium."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess

import numpy as np
import pytest
from pyspark.sql import functions as F
from scipy import stats

from ndcg_spark import evaluate
from ndcg_spark.compare import compare
from ndcg_spark.errors import EXIT_OK
from ndcg_spark.job import run
from tests.helpers import frames, random_graded


@pytest.fixture(scope="module")
def two_models(spark):
    recs, rels = random_graded(seed=31, users=50)
    rng = np.random.default_rng(2)
    # The candidate re-scores the same items: better for users whose noise helps, worse for others.
    candidate = {u: {i: s + rng.normal(0, 3) for i, s in m.items()} for u, m in recs.items()}
    del candidate[7]  # user 7 only in the baseline
    baseline_df, rel_df = frames(spark, recs, rels)
    candidate_df, _ = frames(spark, candidate, rels)
    return baseline_df, candidate_df, rel_df


# The whole list (k null in the output) once failed to pair any user: a null key never equals a null key.
@pytest.mark.parametrize("cutoffs", [[5, 10], [10, None]])
def test_compare_matches_separate_evaluations_and_scipy(spark, two_models, cutoffs):
    baseline, candidate, rel = two_models
    result = compare(baseline, candidate, rel, k=cutoffs)
    report = {r["k"]: r for r in result.report()}
    assert len(report) == len(cutoffs)
    for k in cutoffs:
        r = report[k]
        a = {r.user_id: r.ndcg for r in evaluate(baseline, rel, k=[k]).per_user.collect()}
        b = {r.user_id: r.ndcg for r in evaluate(candidate, rel, k=[k]).per_user.collect()}
        # User 7 has relevance rows, so the candidate scores it as a user without recommendations (NDCG 0).
        assert 7 in b and b[7] == 0.0
        users = sorted(a)
        diffs = np.array([b[u] - a[u] for u in users])
        assert r["pairs"] == len(users) == 50
        assert r["mean_ndcg_baseline"] == pytest.approx(np.mean([a[u] for u in users]), abs=1e-12)
        assert r["mean_ndcg_candidate"] == pytest.approx(np.mean([b[u] for u in users]), abs=1e-12)
        assert r["mean_difference"] == pytest.approx(diffs.mean(), abs=1e-12)
        assert r["p_value"] == pytest.approx(
            stats.ttest_rel([b[u] for u in users], [a[u] for u in users]).pvalue, abs=1e-9
        )
        low, high = stats.t.interval(0.95, len(diffs) - 1, loc=diffs.mean(), scale=stats.sem(diffs))
        assert (r["difference_ci_low"], r["difference_ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert (r["wins"], r["ties"], r["losses"]) == (
            int((diffs > 0).sum()),
            int((diffs == 0).sum()),
            int((diffs < 0).sum()),
        )
        assert r["users_only_in_baseline"] == 0  # user 7 is paired through its relevance rows


def test_compare_excludes_one_sided_users_under_the_exclude_policy(spark, two_models):
    baseline, candidate, rel = two_models
    report = compare(baseline, candidate, rel, k=[5], no_recommendations="exclude").report()[0]
    assert report["pairs"] == 49 and report["users_excluded"] == 1


def test_compare_command_line_with_a_model_column(spark, two_models, tmp_path, capsys):
    baseline, candidate, rel = two_models
    both = baseline.withColumn("model", F.lit("prod")).unionByName(candidate.withColumn("model", F.lit("v2")))
    both.write.parquet(str(tmp_path / "recs"))
    rel.write.parquet(str(tmp_path / "rel"))
    out = tmp_path / "out"
    code = run(
        [
            "compare",
            "--recommendations",
            str(tmp_path / "recs"),
            "--model-col",
            "model",
            "--baseline-model",
            "prod",
            "--candidate-model",
            "v2",
            "--relevance",
            str(tmp_path / "rel"),
            "--output",
            str(out),
            "--k",
            "5,10",
        ]
    )
    assert code == EXIT_OK
    printed = capsys.readouterr().out
    assert "p_value" in printed and "wins" in printed
    manifest = json.loads((out / "comparison.json").read_text())
    library = {r["k"]: r for r in compare(baseline, candidate, rel, k=[5, 10]).report()}
    for row in manifest["comparison"]:
        assert row["mean_difference"] == pytest.approx(library[row["k"]]["mean_difference"], abs=1e-12)
        assert row["p_value"] == pytest.approx(library[row["k"]]["p_value"], abs=1e-12)
    assert spark.read.parquet(str(out / "comparison")).count() == 2


def test_compare_needs_a_candidate(tmp_path, capsys):
    assert run(["compare", "--recommendations", "x/", "--relevance", "y/", "--output", str(tmp_path / "o")]) == 2
    assert "compare needs --candidate" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_renders_in_headless_chromium(spark, two_models, tmp_path):
    baseline, _, rel = two_models
    attributes = spark.createDataFrame([(u, "a" if u % 2 else "b") for u in range(50)], "user_id int, segment string")
    baseline.write.parquet(str(tmp_path / "recs"))
    rel.write.parquet(str(tmp_path / "rel"))
    attributes.write.parquet(str(tmp_path / "attrs"))
    out = tmp_path / "out"
    assert (
        run(
            [
                "--recommendations",
                str(tmp_path / "recs"),
                "--relevance",
                str(tmp_path / "rel"),
                "--user-attributes",
                str(tmp_path / "attrs"),
                "--group-by",
                "segment",
                "--output",
                str(out),
                "--k",
                "1,5,10,20",
            ]
        )
        == EXIT_OK
    )
    page = (out / "report.html").read_text()
    assert "http://" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "") and "<script" not in page
    dom = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={tmp_path / 'chromium'}",
            "--dump-dom",
            (out / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    # The browser parsed the charts: one curve per segment, one histogram per (segment, k).
    assert dom.count('class="segment"') == 2
    assert dom.count('class="histogram"') == 8
    assert 'id="summary"' in dom and "segment=a" in dom
    # Histogram counts come from Spark and add up to the users of each chart.
    summary = json.loads((out / "summary.json").read_text())["metrics"]
    assert sum(m["users"] for m in summary if m["k"] == 10) == 50


@pytest.mark.skipif(shutil.which("chromium") is None, reason="Debian's chromium is not installed (.ci/run installs it)")
def test_report_labels_of_long_segment_names_stay_inside_their_charts(tmp_path):
    """Every text of every chart, legends included, lies within its SVG as Chromium lays it out
    (measured by a script in a test copy of the page; the report itself has none)."""
    from ndcg_spark._report import render

    models = [
        "a",
        "two-tower-retrieval-candidate-trained-2026-11-20-with-hard-negatives-v2",
        "WWWWWWWWWWWWWWWWWWWWWWWW",
    ]
    metrics = [
        {"model": m, "country": c, "k": k, "users": 3, "mean_ndcg": 0.1 * (i + 1) + 0.01 * k}
        for i, m in enumerate(models)
        for c in ("kr", None)
        for k in (1, 5, 10)
    ]
    bins = [{"model": m["model"], "country": m["country"], "k": m["k"], "bin": 3, "users": 3} for m in metrics]
    page = render(metrics, bins, ["model", "country"])
    probe = """<script>
    const out = [];
    for (const svg of document.querySelectorAll("svg")) {
      const width = svg.width.baseVal.value;
      for (const t of svg.querySelectorAll("text")) {
        const b = t.getBBox();
        if (b.x < -0.5 || b.x + b.width > width + 0.5) out.push(t.textContent);
      }
    }
    document.body.setAttribute("data-overflow", JSON.stringify(out));
    document.body.setAttribute("data-legend", document.querySelectorAll("text.legend").length);
    </script></body>"""
    (tmp_path / "probe.html").write_text(page.replace("</body>", probe))
    dom = subprocess.run(
        ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-sync",
         "--disable-background-networking", "--disable-component-update", f"--user-data-dir={tmp_path / 'c'}",
         "--dump-dom", (tmp_path / "probe.html").as_uri()],
        capture_output=True, text=True, timeout=120,
    ).stdout  # fmt: skip
    assert 'data-legend="6"' in dom, dom[:2000]
    overflow = json.loads(html.unescape(re.search(r'data-overflow="([^"]*)"', dom).group(1)))
    assert overflow == []
    # A name cut to fit is whole in its tooltip.
    assert f"<title>model={models[1]}, country=kr</title>" in page
