"""Beyond accuracy against the peers' own functions, through their presets, on data generated here.

* Microsoft Recommenders' ``SparkDiversityEvaluation`` (``recommenders`` 1.2.1,
  recommenders/evaluation/spark_evaluation.py), run in this session on the top k of the same
  lists: catalog and distributional coverage, novelty, diversity and serendipity, with the
  co-occurrence similarity and with item feature vectors.
* RePlay's metrics (``replay-rec`` 0.22, replay/metrics/*.py), their pandas path: NDCG on tied
  scores (RePlay breaks ties by item descending), Novelty, Surprisal, Unexpectedness,
  CategoricalDiversity and Coverage, per user and as means.

Every figure is compared to 1e-9.
"""

from __future__ import annotations

import random

import pandas as pd
import pytest

from ndcg_spark import evaluate

pytestmark = pytest.mark.peers

# recommenders is installed without its dependencies (.ci/run): its Spark evaluator needs PySpark
# (and numpy for pyspark.ml) only, which the test extra has; the rest of its list (TensorFlow-era
# pins) cannot sit beside PySpark 4 and pandas 2.
recommenders = pytest.importorskip("recommenders.evaluation.spark_evaluation")
replay_metrics = pytest.importorskip("replay.metrics")

K = 5
TOL = 1e-9


def generated(seed: int, ties: bool):
    """Interactions, lists, relevance, a baseline and categories of 40 users over 30 items.

    Popularity is skewed (item i drawn with weight 1/i); a user's list holds 1 to 8 items it never
    interacted with (Recommenders refuses a list that repeats the history), among them cold items
    (31-33, in no interaction); some users have interactions only, some a list only.
    """
    rnd = random.Random(seed)
    items = list(range(1, 31))
    weights = [1.0 / i for i in items]
    train, recs, rel, base = [], [], [], []
    for user in range(1, 41):
        history = set()
        if user % 10 != 7:  # users 7, 17, ... have no history
            while len(history) < rnd.randint(2, 8):
                history.add(rnd.choices(items, weights)[0])
        train += [(user, i) for i in sorted(history)]
        if user % 13 == 5:  # users 5, 18, 31 have no list
            continue
        pool = [i for i in [*items, 31, 32, 33] if i not in history]
        chosen = rnd.sample(pool, rnd.randint(1, 8))
        for i in chosen:
            score = float(rnd.randint(1, 3)) if ties else rnd.random()
            recs.append((user, i, score))
            if rnd.random() < 0.4:
                rel.append((user, i, float(rnd.randint(1, 3))))
        if user % 4 != 0:  # every fourth user has no baseline list
            base += [(user, i, rnd.random()) for i in rnd.sample(items, 6)]
    rel.append((99, 1, 1.0))  # judged, nothing recommended
    categories = [(i, f"c{i % 4}") for i in range(1, 34)]
    return train, recs, rel, base, categories


def frames(spark, train, recs, rel, base, categories):
    return (
        spark.createDataFrame(train, "user_id int, item_id int"),
        spark.createDataFrame(recs, "user_id int, item_id int, score double"),
        spark.createDataFrame(rel, "user_id int, item_id int, relevance double"),
        spark.createDataFrame(base, "user_id int, item_id int, score double"),
        spark.createDataFrame(categories, "item_id int, category string"),
    )


def top_k(recs, k, item_descending=False):
    """{user: [items]} ordered by score descending, then item (as the preset orders ties)."""
    lists = {}
    for user, item, _score in sorted(recs, key=lambda r: (r[0], -r[2], -r[1] if item_descending else r[1])):
        lists.setdefault(user, []).append(item)
    return {u: items[:k] for u, items in lists.items()}


class Collected:
    """An evaluation's per_user and summary rows, collected once (several tests read them)."""

    def __init__(self, result):
        self.rows = result.per_user.collect()
        self.summary_rows = result.summary.collect()


def per_user(result, name, k):
    rows = result.rows if isinstance(result, Collected) else result.per_user.collect()
    return {r.user_id: r[name] for r in rows if r.k == k and r[name] is not None}


def summary_at(result, k):
    rows = result.summary_rows if isinstance(result, Collected) else result.summary.collect()
    return next(r for r in rows if r.k == k)


# ----------------------------------------------------------------------------- Recommenders


@pytest.fixture(scope="module")
def recommenders_case(spark):
    train, recs, rel, base, categories = generated(7, ties=False)
    lists = top_k(recs, K)
    relevance = {(u, i): r for u, i, r in rel}
    reco_rows = [(u, i, relevance.get((u, i), 0.0)) for u, items in lists.items() for i in items]
    reco_df = spark.createDataFrame(reco_rows, "user_id int, item_id int, relevance double")
    train_df, recs_df, rel_df, _, _ = frames(spark, train, recs, rel, base, categories)
    return train_df, recs_df, rel_df, reco_df, lists


def test_recommenders_cooccurrence_figures_equal_spark_diversity_evaluation(spark, recommenders_case):
    train_df, recs_df, rel_df, reco_df, _ = recommenders_case
    theirs = recommenders.SparkDiversityEvaluation(
        train_df, reco_df, col_user="user_id", col_item="item_id", col_relevance="relevance"
    )
    ours = evaluate(
        recs_df,
        rel_df,
        convention="recommenders",
        k=[K],
        interactions=train_df,
        beyond_accuracy=["novelty", "diversity", "serendipity", "catalog_coverage", "distributional_coverage"],
    )
    row = summary_at(ours, K)
    assert row.catalog_coverage == pytest.approx(theirs.catalog_coverage(), abs=TOL)
    assert row.catalog_coverage > 1.0  # cold items recommended: Recommenders' coverage passes 1
    assert row.distributional_coverage == pytest.approx(theirs.distributional_coverage(), abs=TOL)
    assert row.mean_novelty == pytest.approx(theirs.novelty(), abs=TOL)
    diversity = {r.user_id: r.user_diversity for r in theirs.user_diversity().collect()}
    assert per_user(ours, "diversity", K) == pytest.approx(diversity, abs=TOL)
    assert row.mean_diversity == pytest.approx(theirs.diversity(), abs=TOL)
    serendipity = {r.user_id: r.user_serendipity for r in theirs.user_serendipity().collect()}
    assert per_user(ours, "serendipity", K) == pytest.approx(serendipity, abs=TOL)
    assert row.mean_serendipity == pytest.approx(theirs.serendipity(), abs=TOL)


def test_recommenders_feature_similarity_equals_spark_diversity_evaluation(spark, recommenders_case):
    from pyspark.ml.linalg import Vectors, VectorUDT
    from pyspark.sql.types import IntegerType, StructField, StructType

    train_df, recs_df, rel_df, reco_df, _ = recommenders_case
    rnd = random.Random(3)
    vectors = {i: [rnd.uniform(-1.0, 2.0) for _ in range(4)] for i in range(1, 34)}
    schema = StructType([StructField("item_id", IntegerType()), StructField("features", VectorUDT())])
    feature_df = spark.createDataFrame([(i, Vectors.dense(v)) for i, v in vectors.items()], schema)
    theirs = recommenders.SparkDiversityEvaluation(
        train_df,
        reco_df,
        item_feature_df=feature_df,
        item_sim_measure="item_feature_vector",
        col_user="user_id",
        col_item="item_id",
        col_relevance="relevance",
    )
    items = spark.createDataFrame(list(vectors.items()), "item_id int, features array<double>")
    ours = evaluate(
        recs_df,
        rel_df,
        convention="recommenders",
        k=[K],
        interactions=train_df,
        items=items,
        item_features_col="features",
        similarity="features",
        beyond_accuracy=["diversity", "serendipity"],
    )
    diversity = {r.user_id: r.user_diversity for r in theirs.user_diversity().collect()}
    assert per_user(ours, "diversity", K) == pytest.approx(diversity, abs=TOL)
    assert max(diversity.values()) > 1.0  # negative cosines: above 1, as there
    serendipity = {r.user_id: r.user_serendipity for r in theirs.user_serendipity().collect()}
    assert per_user(ours, "serendipity", K) == pytest.approx(serendipity, abs=TOL)
    row = summary_at(ours, K)
    assert (row.mean_diversity, row.mean_serendipity) == pytest.approx(
        (theirs.diversity(), theirs.serendipity()), abs=TOL
    )


# ----------------------------------------------------------------------------- RePlay


@pytest.fixture(scope="module")
def replay_case(spark):
    train, recs, rel, base, categories = generated(11, ties=True)
    rel = [(u, i, 1.0) for u, i, _ in rel]  # RePlay's ground truth is binary
    ours = evaluate(
        *frames(spark, train, recs, rel, base, categories)[1:3],
        convention="replay",
        k=[2, K],
        interactions=spark.createDataFrame(train, "user_id int, item_id int"),
        baseline_recommendations=spark.createDataFrame(base, "user_id int, item_id int, score double"),
        beyond_accuracy=["unseen_share", "surprisal", "unexpectedness", "catalog_coverage"],
    )
    tables = {
        "recs": pd.DataFrame(recs, columns=["query_id", "item_id", "rating"]),
        "train": pd.DataFrame(train, columns=["query_id", "item_id"]),
        "gt": pd.DataFrame([(u, i) for u, i, _ in rel], columns=["query_id", "item_id"]),
        "base": pd.DataFrame(base, columns=["query_id", "item_id", "rating"]),
    }
    tables["frames"] = frames(spark, train, recs, rel, base, categories)
    return Collected(ours), tables


def _theirs(metric, *tables):
    """{(user, k): value} of a RePlay metric in PerUser mode, and {k: mean} in Mean mode."""
    values = {}
    for name, by_user in metric(mode=replay_metrics.PerUser())(*tables).items():
        k = int(name.rsplit("@", 1)[1])
        values.update({(int(u), k): float(v) for u, v in by_user.items()})
    means = {int(name.rsplit("@", 1)[1]): float(v) for name, v in metric()(*tables).items()}
    return values, means


def _ours(result, name):
    values = {}
    for k in (2, K):
        values.update({(u, k): v for u, v in per_user(result, name, k).items()})
    return values


@pytest.mark.parametrize(
    ("metric", "ours_name", "inputs"),
    [
        (replay_metrics.NDCG, "ndcg", ("recs", "gt")),
        (replay_metrics.Novelty, "unseen_share", ("recs", "train")),
        (replay_metrics.Surprisal, "surprisal", ("recs", "train")),
        (replay_metrics.Unexpectedness, "unexpectedness", ("recs", "base")),
    ],
    ids=["ndcg", "novelty", "surprisal", "unexpectedness"],
)
def test_replay_per_user_and_means_equal_replay(replay_case, metric, ours_name, inputs):
    ours, tables = replay_case
    values, means = _theirs(lambda **kw: metric([2, K], **kw), *[tables[t] for t in inputs])
    got = _ours(ours, ours_name)
    if ours_name == "ndcg":
        # per_user keeps NDCG's users (the ground truth's); RePlay scores those only.
        got = {key: v for key, v in got.items() if key in values}
    assert got == pytest.approx(values, abs=TOL)
    for k in (2, K):
        column = "mean_ndcg" if ours_name == "ndcg" else f"mean_{ours_name}"
        assert summary_at(ours, k)[column] == pytest.approx(means[k], abs=TOL)


def test_replay_coverage_equals_replay(replay_case):
    ours, tables = replay_case
    theirs = replay_metrics.Coverage([2, K])(tables["recs"], tables["train"])
    assert [summary_at(ours, k).catalog_coverage for k in (2, K)] == pytest.approx(
        [theirs[f"Coverage@{k}"] for k in (2, K)], abs=TOL
    )


def test_replay_ties_go_item_descending_as_replay_sorts_them(replay_case):
    """The data has tied scores: ties broken item ascending (the preset's order before) give
    another NDCG than RePlay's for some users; the preset's item descending gives RePlay's own."""
    _, tables = replay_case
    values, _ = _theirs(lambda **kw: replay_metrics.NDCG([2, K], **kw), tables["recs"], tables["gt"])
    _, recs_df, rel_df, _, _ = tables["frames"]
    ascending = _ours(evaluate(recs_df, rel_df, convention="replay", tie_break="item_ascending", k=[2, K]), "ndcg")
    differ = [key for key, v in values.items() if abs(ascending[key] - v) > TOL]
    assert len(differ) >= 3


def test_replay_categorical_diversity_equals_replay(spark):
    """CategoricalDiversity reads a category per recommendation row; its pandas path sorts by the
    score alone, so the scores here are distinct."""
    train, recs, rel, base, categories = generated(5, ties=False)
    category = dict(categories)
    recs_df = spark.createDataFrame(recs, "user_id int, item_id int, score double")
    rel_df = spark.createDataFrame(rel, "user_id int, item_id int, relevance double")
    items = spark.createDataFrame(categories, "item_id int, category string")
    ours = evaluate(
        recs_df,
        rel_df,
        convention="replay",
        k=[2, K],
        items=items,
        item_category_col="category",
        beyond_accuracy=["category_diversity"],
    )
    table = pd.DataFrame([(u, category[i], s) for u, i, s in recs], columns=["query_id", "category_id", "rating"])
    values, means = _theirs(lambda **kw: replay_metrics.CategoricalDiversity([2, K], **kw), table)
    assert _ours(ours, "category_diversity") == pytest.approx(values, abs=TOL)
    assert [summary_at(ours, k).mean_category_diversity for k in (2, K)] == pytest.approx([means[2], means[K]], abs=TOL)
