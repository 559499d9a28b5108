"""Independent oracles: Spark's RankingMetricsSuite, trec_eval (its own test data and pytrec_eval), scikit-learn."""

from __future__ import annotations

import numpy as np
import pytest
import pytrec_eval
from chispa import assert_approx_df_equality
from sklearn.metrics import ndcg_score

from ndcg_spark import evaluate
from tests.helpers import frames, judged, random_graded, ranked_lists, trec_expected, trec_tables

# --------------------------------------------------------------------- Spark's RankingMetricsSuite

SUITE_PREDICTIONS = {1: [1, 6, 2, 7, 8, 3, 9, 10, 4, 5], 2: [4, 1, 5, 6, 2, 7, 3, 8, 9, 10], 3: [1, 2, 3, 4, 5]}


def _summary_by_k(result):
    return {row.k: row for row in result.summary.collect()}


def test_ranking_metrics_suite_binary(spark):
    """ndcgAt(3) = 1/3, ndcgAt(5) = 0.328788, ndcgAt(10) = 0.487913, ndcgAt(15) = ndcgAt(10)."""
    recs = ranked_lists(spark, SUITE_PREDICTIONS, item_type="int")
    rel = judged(spark, {1: {i: 1 for i in [1, 2, 3, 4, 5]}, 2: {i: 1 for i in [1, 2, 3]}}, item_type="int")
    got = _summary_by_k(evaluate(recs, rel, k=[3, 5, 10, 15]))
    assert got[3].mean_ndcg == pytest.approx(1 / 3, abs=1e-5)
    assert got[5].mean_ndcg == pytest.approx(0.328788, abs=1e-5)
    assert got[10].mean_ndcg == pytest.approx(0.487913, abs=1e-5)
    assert got[15].mean_ndcg == pytest.approx(got[10].mean_ndcg, abs=1e-12)
    # User 3 has no relevance rows: IDCG = 0, scored 0.0 and counted, as Spark does.
    assert (got[10].users, got[10].users_zero_idcg, got[10].users_without_relevance) == (3, 1, 1)


def test_ranking_metrics_suite_graded(spark):
    """With relevance and 2^rel - 1 gain: ndcgAt(3) 0.511959, (5) 0.487806, (10) 0.518700."""
    recs = ranked_lists(spark, SUITE_PREDICTIONS, item_type="int")
    rel = judged(
        spark,
        {1: dict(zip([1, 2, 3, 4, 5], [3.0, 2.0, 1.0, 1.0, 1.0])), 2: dict(zip([1, 2, 3], [2.0, 0.0, 0.0]))},
        item_type="int",
    )
    got = _summary_by_k(evaluate(recs, rel, k=[3, 5, 10, 15], gain="exponential"))
    assert got[3].mean_ndcg == pytest.approx(0.511959, abs=1e-5)
    assert got[5].mean_ndcg == pytest.approx(0.487806, abs=1e-5)
    assert got[10].mean_ndcg == pytest.approx(0.518700, abs=1e-5)
    assert got[15].mean_ndcg == pytest.approx(got[10].mean_ndcg, abs=1e-12)


def test_ranking_metrics_suite_few_predictions(spark):
    """SPARK-14886: ndcgAt(1) 0.5, ndcgAt(2) 0.30657; a user with no predictions scores 0 and counts."""
    recs = ranked_lists(spark, {1: [1, 6, 2]}, item_type="int")
    rel = judged(spark, {1: {i: 1 for i in [1, 2, 3, 4, 5]}, 2: {i: 1 for i in [1, 2, 3]}}, item_type="int")
    got = _summary_by_k(evaluate(recs, rel, k=[1, 2]))
    assert got[1].mean_ndcg == pytest.approx(0.5, abs=1e-5)
    assert got[2].mean_ndcg == pytest.approx(0.30657, abs=1e-5)
    assert got[2].users_without_recommendations == 1


# --------------------------------------------------------------------- trec_eval's own test suite


TREC_CUTOFFS = [5, 10, 15, 20, 30, 100, 200, 500, 1000]


def test_trec_eval_conformance_per_topic_and_mean(spark, data_dir):
    """trec_eval 10.0's ndcg_cut figures for its own test run (rounded to 4 places there)."""
    results, qrels = trec_tables(spark, data_dir)
    result = evaluate(results, qrels, k=TREC_CUTOFFS, tie_break="item_descending")
    per_topic = {(r.user_id, r.k): r.ndcg for r in result.per_user.collect()}
    expected = trec_expected(data_dir / "trec_eval" / "out.test.aq", per_topic=True)
    assert len(expected) == 3 * len(TREC_CUTOFFS)
    for key, value in expected.items():
        assert per_topic[key] == pytest.approx(value, abs=5e-5), key
    means = {r.k: r.mean_ndcg for r in result.summary.collect()}
    for (_, k), value in trec_expected(data_dir / "trec_eval" / "out.test.a", per_topic=False).items():
        assert means[k] == pytest.approx(value, abs=5e-5), k


def test_random_graded_matches_pytrec_eval_per_user(spark):
    recs, rels = random_graded(seed=7)
    cutoffs = [1, 3, 5, 10, 20, 25, 30]
    evaluator = pytrec_eval.RelevanceEvaluator(
        {str(u): m for u, m in rels.items()}, {"ndcg_cut." + ",".join(map(str, cutoffs))}
    )
    trec = evaluator.evaluate({str(u): m for u, m in recs.items()})
    rows = [(u, k, trec[str(u)][f"ndcg_cut_{k}"]) for u in recs for k in cutoffs]
    expected = spark.createDataFrame(rows, "user_id int, k int, ndcg double").orderBy("user_id", "k")
    got = evaluate(*frames(spark, recs, rels), k=cutoffs, tie_break="item_descending").per_user
    assert_approx_df_equality(
        got.select("user_id", "k", "ndcg").orderBy("user_id", "k"), expected, precision=1e-9, ignore_nullable=True
    )


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_random_graded_matches_scikit_learn_per_user(spark, gain):
    recs, rels = random_graded(seed=11)
    cutoffs = [1, 5, 10, 25]
    rows = []
    for u, scored in recs.items():
        universe = sorted(set(scored) | set(rels[u]))
        # Judged items the model did not recommend rank below every recommendation.
        y_score = np.array([[scored.get(i, -1.0 - j) for j, i in enumerate(universe)]])
        rel = np.array([[rels[u].get(i, 0) for i in universe]], dtype=float)
        y_true = rel if gain == "linear" else 2.0**rel - 1.0
        for k in cutoffs:
            value = 0.0 if not y_true.any() else ndcg_score(y_true, y_score, k=k, ignore_ties=True)
            rows.append((u, k, float(value)))
    expected = spark.createDataFrame(rows, "user_id int, k int, ndcg double").orderBy("user_id", "k")
    got = evaluate(*frames(spark, recs, rels), k=cutoffs, gain=gain).per_user
    assert_approx_df_equality(
        got.select("user_id", "k", "ndcg").orderBy("user_id", "k"), expected, precision=1e-9, ignore_nullable=True
    )
