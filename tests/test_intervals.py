"""95% intervals are null where fewer than two users are averaged, in the summary and in compare."""

from __future__ import annotations

import math

import pytest
from chispa import assert_approx_df_equality

from ndcg_spark import evaluate
from ndcg_spark.compare import compare

RECS = "model string, user_id int, item_id string, score double"
REL = "user_id int, item_id string, relevance double"
INTERVALS = "model string, k int, users long, ndcg_ci_low double, ndcg_ci_high double"


@pytest.fixture(scope="module")
def segments(spark):
    """Model a: users 1-3 (NDCG@1 1, 0, 1); b: user 1 alone; c: user 9 alone, who has no judgements.

    Each model is a run of its own against the whole relevance table: with no_recommendations =
    "exclude" the judged users a model did not serve are left out of its segment."""
    rows = [("a", 1, "x", 0.9), ("a", 2, "y", 0.9), ("a", 2, "x", 0.1), ("a", 3, "x", 0.9)]
    rows += [("b", 1, "x", 0.9), ("c", 9, "x", 0.9)]
    recs = spark.createDataFrame(rows, RECS)
    rel = spark.createDataFrame([(u, "x", 1.0) for u in (1, 2, 3)], REL)
    return recs, rel


def normal_interval(values):
    """The normal interval of a mean, clipped to [0, 1], written independently of the library."""
    n = len(values)
    if n < 2:
        return None, None
    mean = sum(values) / n
    half = 1.959963984540054 * math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1)) / math.sqrt(n)
    return max(mean - half, 0.0), min(mean + half, 1.0)


def test_normal_interval_is_null_for_one_user_or_none(spark, segments):
    recs, rel = segments
    summary = evaluate(
        recs, rel, k=[1], group_by=["model"], no_relevance="exclude", no_recommendations="exclude"
    ).summary
    expected = spark.createDataFrame(
        [("a", 1, 3, *normal_interval([1.0, 0.0, 1.0])), ("b", 1, 1, None, None), ("c", 1, 0, None, None)], INTERVALS
    )
    got = summary.select("model", "k", "users", "ndcg_ci_low", "ndcg_ci_high").orderBy("model")
    assert_approx_df_equality(got, expected, precision=1e-12, ignore_nullable=True)


def test_bootstrap_interval_is_null_for_one_user_or_none(spark, segments):
    recs, rel = segments
    options = dict(k=[1], group_by=["model"], no_relevance="exclude", no_recommendations="exclude")
    options.update(confidence_interval="bootstrap", seed=3)
    rows = {r.model: r for r in evaluate(recs, rel, **options).summary.collect()}
    assert (rows["b"].users, rows["b"].ndcg_ci_low, rows["b"].ndcg_ci_high) == (1, None, None)
    assert (rows["c"].users, rows["c"].ndcg_ci_low, rows["c"].ndcg_ci_high) == (0, None, None)
    assert 0.0 <= rows["a"].ndcg_ci_low <= rows["a"].mean_ndcg <= rows["a"].ndcg_ci_high <= 1.0


def test_a_whole_run_of_one_user_has_no_interval(spark):
    recs = spark.createDataFrame([("m", 1, "x", 0.9), ("m", 1, "y", 0.5)], RECS)
    rel = spark.createDataFrame([(1, "y", 1.0)], REL)
    row = evaluate(recs, rel, k=[2]).summary.first()
    assert (row.users, row.ndcg_ci_low, row.ndcg_ci_high) == (1, None, None)
    assert row.mean_ndcg == pytest.approx(1 / math.log2(3))


def test_compare_difference_interval_is_null_for_one_pair(spark, segments):
    recs, rel = segments
    baseline = recs.filter("model = 'a'").drop("model")
    candidate = baseline.selectExpr("user_id", "item_id", "1.0 - score AS score")
    attributes = spark.createDataFrame([(1, "kr"), (2, "kr"), (3, "cn")], "user_id int, country string")
    rows = {
        r["country"]: r
        for r in compare(baseline, candidate, rel, k=[1], group_by=["country"], user_attributes=attributes).report()
    }
    assert rows["cn"]["pairs"] == 1
    assert [rows["cn"][c] for c in ("difference_ci_low", "difference_ci_high", "t_statistic", "p_value")] == [None] * 4
    assert rows["kr"]["pairs"] == 2 and rows["kr"]["difference_ci_low"] is not None
