"""The learning-to-rank libraries' NDCG through their presets, against the libraries themselves.

LightGBM, XGBoost and CatBoost evaluate given scores: LightGBM's ``init_score`` under a booster
whose one tree adds nothing (a custom objective with zero gradients), XGBoost's ``base_margin``
under ``eta = 0``, CatBoost's ``catboost.utils.eval_metric``. The queries are random graded
labels 0-4 with many tied scores, queries whose labels are all 0 and one-document queries; the
documents of a query are numbered in the order the library reads them, which is the order its
ties keep (LightGBM and XGBoost) or fall back on (CatBoost). One Spark job per evaluation.
"""

from __future__ import annotations

import numpy as np
import pytest

from ndcg_spark import evaluate

pytestmark = pytest.mark.peers

lgb = pytest.importorskip("lightgbm")
xgb = pytest.importorskip("xgboost")
catboost_utils = pytest.importorskip("catboost.utils")

RECS = "user_id int, item_id int, score double"
REL = "user_id int, item_id int, relevance double"


def random_queries(seed, queries=60, largest=16, long_queries=0):
    """[(labels, scores)] per query: grades 0-4 (mostly 0), scores in quarters (exact in float32,
    many ties). Every 7th query is all 0, every 10th has one document; ``long_queries`` more
    queries of 40 documents come last."""
    rng = np.random.default_rng(seed)
    out = []
    for q in range(queries + long_queries):
        n = 40 if q >= queries else (1 if q % 10 == 0 else int(rng.integers(2, largest + 1)))
        labels = rng.choice([0, 0, 0, 1, 2, 3, 4], size=n)
        if q % 7 == 0:
            labels[:] = 0
        out.append((labels.astype(float), rng.integers(-4, 5, size=n) / 4.0))
    return out


def spark_means(spark, queries, ks, **options):
    """{k: mean NDCG@k} of ndcg-spark over the queries (query = user, document index = item)."""
    recs = [(q, i, float(s)) for q, (_, scores) in enumerate(queries) for i, s in enumerate(scores)]
    rels = [(q, i, float(g)) for q, (labels, _) in enumerate(queries) for i, g in enumerate(labels)]
    result = evaluate(spark.createDataFrame(recs, RECS), spark.createDataFrame(rels, REL), k=list(ks), **options)
    return {r.k: r.mean_ndcg for r in result.summary.select("k", "mean_ndcg").collect()}


def flat(queries):
    labels = np.concatenate([q[0] for q in queries])
    scores = np.concatenate([q[1] for q in queries])
    return labels, scores, [len(q[0]) for q in queries]


def lightgbm_means(queries, ks):
    labels, scores, sizes = flat(queries)
    features = np.arange(len(labels), dtype=float).reshape(-1, 1)
    train = lgb.Dataset(features, label=labels, group=sizes, init_score=scores)
    valid = lgb.Dataset(features, label=labels, group=sizes, init_score=scores, reference=train)

    def no_change(predictions, _):
        # Zero gradients: the one tree's leaves are 0, so the scores evaluated are init_score.
        return np.zeros(len(predictions)), np.ones(len(predictions))

    params = {"objective": no_change, "metric": "ndcg", "eval_at": list(ks), "verbosity": -1, "num_threads": 1}
    record = {}
    lgb.train(params, train, 1, valid_sets=[valid], valid_names=["v"], callbacks=[lgb.record_evaluation(record)])
    return {k: record["v"][f"ndcg@{k}"][-1] for k in ks}


def xgboost_means(queries, metrics, **params):
    labels, scores, sizes = flat(queries)
    data = xgb.DMatrix(np.zeros((len(labels), 1)), label=labels, base_margin=scores)
    data.set_group(sizes)
    record = {}
    settings = {"objective": "rank:ndcg", "eta": 0.0, "eval_metric": list(metrics), "nthread": 1, **params}
    xgb.train(settings, data, 1, evals=[(data, "v")], evals_result=record, verbose_eval=False)
    return {m: record["v"][m][-1] for m in metrics}


def catboost_mean(queries, metric):
    labels, scores, sizes = flat(queries)
    group_id = np.repeat(np.arange(len(sizes)), sizes)
    return catboost_utils.eval_metric(labels, scores, metric, group_id=group_id)[0]


def test_lightgbm_ndcg_at_k(spark):
    """LightGBM's ``ndcg@k``: default label_gain 2^i - 1, a query without a relevant document scores
    1, ties in the query's row order (std::sort, which keeps that order up to 16 documents)."""
    queries = random_queries(1)
    ks = (1, 3, 5, 10, 20)
    expected = lightgbm_means(queries, ks)
    got = spark_means(spark, queries, ks, convention="lightgbm")
    assert got == pytest.approx(expected, abs=1e-6)
    # Not every convention gives it: the default one differs on the same scores.
    assert spark_means(spark, queries, (3,))[3] != pytest.approx(expected[3], abs=1e-3)


def test_xgboost_ndcg_at_k_minus_and_without_cutoff(spark):
    """XGBoost's ``ndcg@k`` (exponential gain, an IDCG of 0 scores 1), ``ndcg@k-`` (it scores 0),
    ``ndcg`` without ``@n`` (the top 32), and linear gain with ``ndcg_exp_gain = false``;
    stable sort, so ties keep the row order."""
    queries = random_queries(2, long_queries=4)
    expected = xgboost_means(queries, ["ndcg@1", "ndcg@3", "ndcg@10", "ndcg@3-", "ndcg"])
    got = spark_means(spark, queries, (1, 3, 10, 32, None), convention="xgboost")
    assert [got[1], got[3], got[10], got[32]] == pytest.approx(
        [expected["ndcg@1"], expected["ndcg@3"], expected["ndcg@10"], expected["ndcg"]], abs=1e-6
    )
    # The queries of 40 documents tell the top 32 from the whole list.
    assert got[None] != pytest.approx(expected["ndcg"], abs=1e-4)
    minus = spark_means(spark, queries, (3,), convention="xgboost", zero_idcg="zero")
    assert minus[3] == pytest.approx(expected["ndcg@3-"], abs=1e-6)
    linear = xgboost_means(queries, ["ndcg@5"], ndcg_exp_gain=False)
    assert spark_means(spark, queries, (5,), convention="xgboost", gain="linear")[5] == pytest.approx(
        linear["ndcg@5"], abs=1e-6
    )


def test_catboost_ndcg_types_denominators_and_top(spark):
    """CatBoost's ``NDCG``: ``type = Base`` (default, the label) or ``Exp``, ``denominator =
    LogPosition`` (default) or ``Position``, ``top`` (default: the whole query); tied scores
    least relevant first; an IDCG of 0 scores 1."""
    queries = random_queries(3)
    variants = [
        ({}, "NDCG:top={k}", (1, 3, 10)),
        ({"gain": "exponential"}, "NDCG:top={k};type=Exp", (3, 10)),
        ({"discount": "position"}, "NDCG:top={k};denominator=Position", (2, 5)),
        ({"gain": "exponential", "discount": "position"}, "NDCG:top={k};type=Exp;denominator=Position", (4,)),
    ]
    for options, metric, ks in variants:
        got = spark_means(spark, queries, (*ks, None), convention="catboost", **options)
        for k in ks:
            assert got[k] == pytest.approx(catboost_mean(queries, metric.format(k=k)), abs=1e-6), (metric, k)
        whole = metric.replace("top={k};", "").replace(":top={k}", "")
        assert got[None] == pytest.approx(catboost_mean(queries, whole), abs=1e-6), whole


def test_catboost_orders_ties_least_relevant_first(spark):
    """One query, all scores tied: CatBoost puts the 0 first, where the item order would put the 3 first."""
    queries = [(np.array([3.0, 0.0, 1.0]), np.array([0.5, 0.5, 0.5]))]
    expected = catboost_mean(queries, "NDCG:top=1")
    assert expected == 0.0
    assert spark_means(spark, queries, (1, 2), convention="catboost") == pytest.approx(
        {1: expected, 2: catboost_mean(queries, "NDCG:top=2")}, abs=1e-12
    )
