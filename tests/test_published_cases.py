"""Published test cases that need more than the gain and cutoffs, through their presets alone.

Users without judgements (``no_relevance``), negative grades read as not judged
(``negative_relevance = "unjudged"``), and trec_eval's mean over the topics it evaluates. Each
test names the library's own test it reproduces; one Spark job per evaluation.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import pytrec_eval
from chispa import assert_approx_df_equality

from ndcg_spark import evaluate

RECS = "user_id int, item_id string, score double"
REL = "user_id int, item_id string, relevance double"


def ranked(spark, lists):
    """Recommendations from {user: [item at rank 1, ...]} with descending scores."""
    rows = [(u, str(i), float(len(items) - r)) for u, items in lists.items() for r, i in enumerate(items)]
    return spark.createDataFrame(rows, RECS)


def judged(spark, rels):
    """Relevance from {user: {item: relevance}}."""
    return spark.createDataFrame([(u, str(i), float(r)) for u, m in rels.items() for i, r in m.items()], REL)


def per_user(result):
    return {(r.user_id, r.k): r.ndcg for r in result.per_user.select("user_id", "k", "ndcg").collect()}


def test_replay_metric_value_by_user(spark):
    """RePlay tests/metrics/test_metrics.py ``test_metric_value_by_user[NDCG]`` at ks [1, 5]:
    ground truth [1, 2] and recommendations [1, 3] give [1.0, 0.6131471927654584]; no ground truth
    gives [0.0, 0.0]; ground truth [1, 2] and recommendations [3, 4] give [0.0, 0.0].

    RePlay's empty ground truth is a user whose judgements are all 0 here: it scores 0 and counts.
    A user the ground truth does not hold at all is never evaluated by RePlay (its frames join
    the recommendations to the ground truth's users, its dicts iterate over them): user 4 is left
    out, so the mean is that of users 1-3, [1/3, 0.6131471927654584/3].
    """
    recs = ranked(spark, {1: [1, 3], 2: [1, 3], 3: [3, 4], 4: [1, 3]})
    rel = judged(spark, {1: {1: 1, 2: 1}, 2: {1: 0, 2: 0}, 3: {1: 1, 2: 1}})
    result = evaluate(recs, rel, convention="replay", k=[1, 5])
    expected = {(1, 1): 1.0, (1, 5): 0.6131471927654584, (2, 1): 0.0, (2, 5): 0.0, (3, 1): 0.0, (3, 5): 0.0}
    assert per_user(result) == pytest.approx(expected, abs=1e-12)
    summary = {r.k: r for r in result.summary.collect()}
    assert [summary[k].mean_ndcg for k in (1, 5)] == pytest.approx([1 / 3, 0.6131471927654584 / 3], abs=1e-12)
    assert (summary[1].users, summary[1].users_without_relevance, summary[1].users_excluded) == (3, 1, 1)


@pytest.mark.parametrize(
    ("ratings", "expected"), [([-1, -2, -3, -4, -5], 0.0), ([-6, -2, 3, 1, -3], 0.5982)], ids=["all", "mixed"]
)
def test_lenskit_negative_gains(spark, ratings, expected):
    """LensKit tests/eval/test_rank_ndcg.py ``test_ndcg_negative_gains``: items 1-5 recommended in
    order, rated ``ratings``, ``gain="rating"``: all negative gives 0.0, mixed 0.5982 (rel 1e-3).
    LensKit clips negative gains to 0 and scores an ideal of 0 as 0.0, counted."""
    recs = ranked(spark, {1: [1, 2, 3, 4, 5]})
    rel = judged(spark, {1: dict(zip([1, 2, 3, 4, 5], ratings))})
    result = evaluate(recs, rel, convention="lenskit")
    assert per_user(result)[(1, None)] == pytest.approx(expected, rel=1e-3, abs=1e-12)
    assert result.summary.first().users == 1


IR_QRELS = {
    0: {"D0": 1, "D1": -1, "D2": 0, "D3": 2, "D4": 0},
    1: {"D0": 1, "D3": 2, "D4": -1, "D5": 0},
}
IR_RUN = {
    0: {"D0": 0.8, "D2": 0.7, "D1": 0.3, "D3": 0.4, "D4": 0.1},
    1: {"D1": 0.8, "D4": 0.7, "D3": 0.3, "D2": 0.4},
}


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"k": None}, [0.76018, 0.32739]),
        ({"k": 3}, [0.76018, 0.0]),
        ({"k": None, "gains": {0: 1, 1: 4}}, [0.97177, 0.14949]),
    ],
    ids=["nDCG", "nDCG@3", "nDCG(gains={0:1,1:4})"],
)
def test_ir_measures_ndcg(spark, options, expected):
    """ir_measures tests/test_pytrec_eval.py ``test_nDCG``: nDCG, nDCG@3 and nDCG(gains={0:1,1:4}) per
    query (5 decimals). A grade of -1 is not judged: it gains 0, not the gain the map gives 0."""
    recs = spark.createDataFrame([(u, d, s) for u, m in IR_RUN.items() for d, s in m.items()], RECS)
    rel = spark.createDataFrame([(u, d, float(g)) for u, m in IR_QRELS.items() for d, g in m.items()], REL)
    got = per_user(evaluate(recs, rel, convention="ir_measures", **options))
    k = options["k"]
    assert [got[(0, k)], got[(1, k)]] == pytest.approx(expected, abs=1e-5)


def test_trec_eval_mean_over_the_topics_it_evaluates(spark):
    """trec_eval's mean (without ``-c``) averages the topics of both the run and the qrels. The run
    also holds topics the qrels do not judge (skipped, not 0), the qrels topics the run misses
    (skipped) and topics judged all 0 (evaluated, 0); grades of -1 are not judged. Live against
    pytrec_eval, whose per-topic output holds exactly the topics trec_eval averages."""
    rng = np.random.default_rng(32)
    run, qrels = {}, {}
    for t in range(30):
        docs = [f"d{i:02d}" for i in rng.choice(40, size=12, replace=False)]
        if t % 6 != 5:  # every 6th topic: not in the qrels
            judged_docs = [f"d{i:02d}" for i in rng.choice(40, size=15, replace=False)]
            qrels[str(t)] = {d: int(rng.choice([-1, 0, 0, 1, 2, 3])) for d in judged_docs}
        if t % 8 == 3:
            qrels[str(t)] = {d: 0 for d in qrels.get(str(t), {"d00": 0})}  # judged, nothing relevant
        if t % 10 != 9:  # every 10th topic: judged but not run
            run[str(t)] = {d: float(rng.integers(0, 5)) for d in docs}
    trec = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.3,10", "ndcg"}).evaluate(run)
    assert 0 < len(trec) < len(run)
    recs = spark.createDataFrame([(int(t), d, s) for t, m in run.items() for d, s in m.items()], RECS)
    rel = spark.createDataFrame([(int(t), d, float(g)) for t, m in qrels.items() for d, g in m.items()], REL)
    summary = {r.k: r for r in evaluate(recs, rel, convention="trec_eval", k=[3, 10, None]).summary.collect()}
    for k, measure in ((3, "ndcg_cut_3"), (10, "ndcg_cut_10"), (None, "ndcg")):
        expected = math.fsum(v[measure] for v in trec.values()) / len(trec)
        assert summary[k].mean_ndcg == pytest.approx(expected, abs=1e-12), k
        assert summary[k].users == len(trec)
    # Scoring the topics the qrels do not judge as 0 gives another mean.
    kept = evaluate(recs, rel, convention="trec_eval", no_relevance="include", k=3).summary.first()
    assert kept.mean_ndcg != pytest.approx(summary[3].mean_ndcg, abs=1e-3)


# ----------------------------------------------------------------------------- the switches alone


@pytest.mark.parametrize("ideal", ["relevance", "candidates"])
def test_zero_idcg_one_and_no_relevance(spark, ideal):
    """``zero_idcg = "one"`` scores 1.0 the users without positive relevance (user 2: judged all 0;
    user 4: no relevance rows), whatever the ideal list; a user with relevant items shown none of
    them scores 0 (user 1, whose ideal from the candidates is empty too; user 3, without
    recommendations). ``no_relevance = "exclude"`` leaves out user 4 alone."""
    rows = [(1, "a", 0.9), (1, "b", 0.5), (2, "a", 0.9), (4, "a", 0.9), (5, "a", 0.9), (5, "b", 0.8)]
    recs = spark.createDataFrame(rows, RECS)
    rel = judged(spark, {1: {"c": 1, "a": 0}, 2: {"z": 0}, 3: {"q": 2}, 5: {"b": 1}})
    ndcg = {1: 0.0, 2: 1.0, 3: 0.0, 4: 1.0, 5: 1 / math.log2(3)}
    for no_relevance, users in (("include", [1, 2, 3, 4, 5]), ("exclude", [1, 2, 3, 5])):
        result = evaluate(recs, rel, k=2, ideal=ideal, zero_idcg="one", no_relevance=no_relevance)
        expected = spark.createDataFrame([(u, ndcg[u]) for u in users], "user_id int, ndcg double")
        got = result.per_user.select("user_id", "ndcg").orderBy("user_id")
        assert_approx_df_equality(got, expected, precision=1e-12, ignore_nullable=True)
