"""Model comparison (library and `ndcg-spark compare`) and the HTML report rendered in Chromium."""

from __future__ import annotations

import functools
import json
import subprocess

import numpy as np
import pytest
from pyspark.sql import functions as F
from scipy import stats
from statsmodels.stats.multitest import multipletests

from ndcg_spark import compare_models, evaluate
from ndcg_spark._comparison.statistics import adjust_p_values
from ndcg_spark.compare import compare
from ndcg_spark.errors import ConfigError, InputDataError
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_OK
from tests.helpers import browser, frames, random_graded, texts_outside_svgs


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


#: The cutoffs of the comparisons below; the whole list (k null) among them.
CUTOFFS = (5, 10, None)


@pytest.fixture(scope="module")
def three_models(spark, two_models):
    baseline, candidate, rel = two_models
    recs, _ = random_graded(seed=31, users=50)
    rng = np.random.default_rng(5)
    # v3 keeps most of the baseline's order: a small difference, so p-values spread out.
    third = {u: {i: s + rng.normal(0, 0.5) for i, s in m.items()} for u, m in recs.items()}
    third_df, _ = frames(spark, third, {})
    return {"prod": baseline, "v2": candidate, "v3": third_df}, rel


@pytest.fixture(scope="module")
def per_user_ndcg(three_models):
    """{model: {k: {user: NDCG@k}}}: each model's own evaluation, the oracle every comparison below
    is held to (one evaluation per model at every cutoff the tests ask for)."""
    models, rel = three_models
    ndcg = {name: {k: {} for k in CUTOFFS} for name in models}
    for name, recs in models.items():
        for r in evaluate(recs, rel, k=list(CUTOFFS)).per_user.collect():
            ndcg[name][r.k][r.user_id] = r.ndcg
    return ndcg


@pytest.fixture(scope="module")
def compared(two_models):
    """compare's report of the baseline and the candidate at every cutoff, by k."""
    baseline, candidate, rel = two_models
    return {r["k"]: r for r in compare(baseline, candidate, rel, k=list(CUTOFFS)).report()}


# The whole list (k null in the output) pairs its users although a null key never equals a null key.
def test_compare_matches_separate_evaluations_and_scipy(compared, per_user_ndcg):
    assert list(compared) == list(CUTOFFS)
    for k in CUTOFFS:
        r = compared[k]
        a, b = per_user_ndcg["prod"][k], per_user_ndcg["v2"][k]
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


@pytest.mark.job
def test_compare_command_line_with_a_model_column(spark, two_models, compared, tmp_path, capsys):
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
    assert [row["k"] for row in manifest["comparison"]] == [5, 10]
    for row in manifest["comparison"]:
        assert row["mean_difference"] == pytest.approx(compared[row["k"]]["mean_difference"], abs=1e-12)
        assert row["p_value"] == pytest.approx(compared[row["k"]]["p_value"], abs=1e-12)
    assert spark.read.parquet(str(out / "comparison")).count() == 2


@pytest.mark.job
def test_compare_needs_a_candidate(tmp_path, capsys):
    assert run(["compare", "--recommendations", "x/", "--relevance", "y/", "--output", str(tmp_path / "o")]) == 2
    assert "compare needs --candidate" in capsys.readouterr().err


def test_three_models_against_a_baseline_with_holm_p_values_as_statsmodels(three_models, per_user_ndcg):
    models, rel = three_models
    result = compare_models(models, rel, k=[5, 10], baseline="prod")
    assert result.pairs == [("prod", "v2"), ("prod", "v3")]
    rows = result.report()
    assert [(r["baseline_model"], r["candidate_model"], r["k"]) for r in rows] == [
        ("prod", "v2", 5),
        ("prod", "v2", 10),
        ("prod", "v3", 5),
        ("prod", "v3", 10),
    ]
    for k in (5, 10):
        ndcg = {name: figures[k] for name, figures in per_user_ndcg.items()}
        users = sorted(ndcg["prod"])
        # Independent p-values (scipy's paired t-test), then statsmodels' Holm over the two pairs at this k.
        p_values = [
            stats.ttest_rel([ndcg[name][u] for u in users], [ndcg["prod"][u] for u in users]).pvalue
            for name in ("v2", "v3")
        ]
        rejected, holm, _, _ = multipletests(p_values, alpha=0.05, method="holm")
        at_k = [r for r in rows if r["k"] == k]
        assert [r["p_value"] for r in at_k] == pytest.approx(p_values, abs=1e-9)
        assert [r["p_value_adjusted"] for r in at_k] == pytest.approx(list(holm), abs=1e-9)
        assert holm[0] != pytest.approx(p_values[0])  # the correction changed something


def test_two_models_give_the_figures_of_compare(three_models, per_user_ndcg):
    models, rel = three_models
    single = compare(models["prod"], models["v3"], rel, k=[5, None]).report()
    many = compare_models({"prod": models["prod"], "v3": models["v3"]}, rel, k=[5, None]).report()
    assert [
        {k: v for k, v in r.items() if k not in ("baseline_model", "candidate_model", "p_value_adjusted")} for r in many
    ] == single
    # One pair per family: nothing to correct.
    assert [r["p_value_adjusted"] for r in many] == [r["p_value"] for r in single]
    # The figures themselves, from each model's own evaluation and scipy.
    prod, v3 = per_user_ndcg["prod"], per_user_ndcg["v3"]
    assert [r["k"] for r in many] == [5, None]
    for r in many:
        users = sorted(prod[r["k"]])
        a = np.array([prod[r["k"]][u] for u in users])
        b = np.array([v3[r["k"]][u] for u in users])
        diffs = b - a
        assert (r["baseline_model"], r["candidate_model"], r["pairs"]) == ("prod", "v3", len(users))
        assert (r["mean_ndcg_baseline"], r["mean_ndcg_candidate"], r["mean_difference"]) == pytest.approx(
            (a.mean(), b.mean(), diffs.mean()), abs=1e-12
        )
        assert r["p_value"] == pytest.approx(stats.ttest_rel(b, a).pvalue, abs=1e-9)
        low, high = stats.t.interval(0.95, len(diffs) - 1, loc=diffs.mean(), scale=stats.sem(diffs))
        assert (r["difference_ci_low"], r["difference_ci_high"]) == pytest.approx((low, high), abs=1e-9)
        assert (r["wins"], r["ties"], r["losses"]) == ((diffs > 0).sum(), (diffs == 0).sum(), (diffs < 0).sum())


@pytest.mark.parametrize("method", ["holm", "bonferroni"])
def test_corrections_match_statsmodels_on_random_families(method):
    """Families of 1 to 12 p-values, with ties, exact 0 and 1, and missing tests left out of m."""
    rng = np.random.default_rng(17)
    for size in range(1, 13):
        p_values = list(rng.choice([0.0, 0.001, 0.02, 0.02, 0.3, 1.0], size=3)) + list(rng.random(size))
        missing = sorted(rng.choice(len(p_values), size=2, replace=False))
        with_gaps = [None if i in missing else p for i, p in enumerate(p_values)]
        present = [p for p in with_gaps if p is not None]
        expected = iter(multipletests(present, method=method)[1])
        adjusted = adjust_p_values(with_gaps, method)
        assert [a is None for a in adjusted] == [p is None for p in with_gaps]
        assert [a for a in adjusted if a is not None] == pytest.approx(list(expected), abs=1e-15)


def test_compare_models_refuses_what_it_cannot_pair(spark, three_models):
    models, rel = three_models
    with pytest.raises(ConfigError, match="baseline model 'nope' is not among the models: prod, v2, v3"):
        compare_models(models, rel, baseline="nope")
    with pytest.raises(ConfigError, match="at least two models, got 1"):
        compare_models({"prod": models["prod"]}, rel)
    with pytest.raises(ConfigError, match="correction = 'sidak'"):
        compare_models(models, rel, correction="sidak")
    one_table = spark.createDataFrame(
        [("a", 1, "x", 0.5), (None, 1, "y", 0.4)], "model string, user_id int, item_id string, score double"
    )
    with pytest.raises(InputDataError, match="'model' is null in some rows"):
        compare_models(one_table, rel, model_col="model")


@pytest.mark.job
def test_compare_command_line_all_pairs_by_segment_with_bonferroni(spark, three_models, tmp_path, capsys):
    models, rel = three_models
    one_table = functools.reduce(
        lambda a, b: a.unionByName(b), [df.withColumn("model", F.lit(name)) for name, df in models.items()]
    )
    one_table.write.parquet(str(tmp_path / "recs"))
    rel.write.parquet(str(tmp_path / "rel"))
    attributes = spark.createDataFrame(
        [(u, "odd" if u % 2 else "even") for u in range(50)], "user_id int, parity string"
    )
    attributes.write.parquet(str(tmp_path / "attrs"))
    out = tmp_path / "out"
    argv = ["compare", "--recommendations", str(tmp_path / "recs"), "--model-col", "model", "--pairs", "all"]
    argv += ["--correction", "bonferroni", "--relevance", str(tmp_path / "rel"), "--output", str(out), "--k", "5"]
    argv += ["--user-attributes", str(tmp_path / "attrs"), "--group-by", "parity"]
    assert run(argv) == EXIT_OK
    assert "p_adjusted" in capsys.readouterr().out
    rows = json.loads((out / "comparison.json").read_text())["comparison"]
    assert sorted((r["baseline_model"], r["candidate_model"], r["parity"]) for r in rows) == [
        (a, b, parity) for a, b in (("prod", "v2"), ("prod", "v3"), ("v2", "v3")) for parity in ("even", "odd")
    ]
    for parity in ("even", "odd"):
        family = [r for r in rows if r["parity"] == parity]
        expected = multipletests([r["p_value"] for r in family], method="bonferroni")[1]
        assert [r["p_value_adjusted"] for r in family] == pytest.approx(list(expected), abs=1e-12)
    assert spark.read.parquet(str(out / "comparison")).count() == 6
    page = (out / "report.html").read_text()
    assert 'id="comparison"' in page and page.count('class="pair"') == 6


@pytest.mark.job
def test_compare_command_line_with_several_candidate_tables(spark, three_models, tmp_path):
    models, rel = three_models
    for name, df in models.items():
        df.write.parquet(str(tmp_path / name))
    rel.write.parquet(str(tmp_path / "rel"))
    out = tmp_path / "out"
    argv = ["compare", "--baseline", str(tmp_path / "prod"), "--candidate", str(tmp_path / "v2")]
    argv += ["--candidate", str(tmp_path / "v3"), "--relevance", str(tmp_path / "rel"), "--output", str(out)]
    assert run([*argv, "--k", "10", "--report", "false"]) == EXIT_OK
    manifest = json.loads((out / "comparison.json").read_text())
    rows = manifest["comparison"]
    assert [(r["baseline_model"], r["candidate_model"]) for r in rows] == [
        (str(tmp_path / "prod"), str(tmp_path / name)) for name in ("v2", "v3")
    ]
    holm = multipletests([r["p_value"] for r in rows], method="holm")[1]
    assert [r["p_value_adjusted"] for r in rows] == pytest.approx(list(holm), abs=1e-12)
    assert set(manifest["input_rows"]) == {str(tmp_path / name) for name in models}


@browser
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


@browser
def test_report_labels_of_long_segment_names_stay_inside_their_charts(tmp_path):
    """Every text of every chart, legends included, lies within its SVG as Chromium lays it out
    (measured by a script in a test copy of the page; the report itself has none)."""
    from ndcg_spark.report import render

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
    overflow, legend = texts_outside_svgs(page, tmp_path, "text.legend")
    assert legend == 6 and overflow == []
    # A name cut to fit is whole in its tooltip.
    assert f"<title>model={models[1]}, country=kr</title>" in page
