"""Properties on random graded data: bounds, the ideal list, invariance to row order and partitioning."""

from __future__ import annotations

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from ndcg_spark import evaluate
from ndcg_spark._stages import column_contract as _columns
from ndcg_spark._stages import judged as _judged
from ndcg_spark._stages import ranking as _ranking
from ndcg_spark.options import EvaluationOptions
from tests.helpers import frames, random_graded, reference_ndcg

CUTOFFS = [1, 3, 10, 100, None]


@pytest.fixture(scope="module")
def random_tables(spark):
    recs, rels = random_graded(seed=3, users=60, ties=True)
    return recs, rels, frames(spark, recs, rels)


@pytest.mark.parametrize("gain", ["linear", "exponential"])
def test_ndcg_between_zero_and_one_and_equals_reference(spark, random_tables, gain):
    recs, rels, (rec_df, rel_df) = random_tables
    rows = evaluate(rec_df, rel_df, k=CUTOFFS, gain=gain).per_user.collect()
    assert len(rows) == len(recs) * len(CUTOFFS)
    for row in rows:
        assert 0.0 <= row.ndcg <= 1.0
        # Reference ranking: score descending, then item ascending (the documented tie-break).
        ranked = sorted(recs[row.user_id], key=lambda i: (-recs[row.user_id][i], i))
        expected = reference_ndcg(ranked, rels[row.user_id], row.k, exponential=gain == "exponential")
        assert row.ndcg == pytest.approx(expected, abs=1e-12)


def test_ideal_list_scores_one(spark, random_tables):
    _, rels, (_, rel_df) = random_tables
    ideal = [
        (u, item, float(-pos)) for u, m in rels.items() for pos, item in enumerate(sorted(m, key=lambda i: (-m[i], i)))
    ]
    rec_df = spark.createDataFrame(ideal, "user_id int, item_id string, score double")
    for row in evaluate(rec_df, rel_df, k=CUTOFFS, gain="exponential").per_user.collect():
        assert row.ndcg == pytest.approx(0.0 if row.idcg == 0 else 1.0, abs=1e-12)


def test_invariant_to_row_order_and_partitions(spark, random_tables):
    _, _, (rec_df, rel_df) = random_tables
    baseline = evaluate(rec_df, rel_df, k=CUTOFFS).per_user.orderBy("user_id", "k")
    shuffled_recs = rec_df.orderBy(F.rand(5)).repartition(7)
    shuffled_rel = rel_df.repartition(3).orderBy("relevance", "item_id")
    previous = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        spark.conf.set("spark.sql.shuffle.partitions", "11")
        other = evaluate(shuffled_recs, shuffled_rel, k=CUTOFFS).per_user.orderBy("user_id", "k")
        assert_df_equality(other, baseline)  # exact: per-user sums run in a fixed order
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", previous)


def test_lists_that_arrive_out_of_position_order_are_sorted(spark):
    """collect_list order is not trusted: rows fed out of order come back sorted by position.

    After the ranking window the rows reach the aggregation in position order, so the sorting
    branch never runs in the other tests; here one partition holds them shuffled on purpose.
    """
    ranked = spark.createDataFrame(
        [(1, 30, 3), (1, 10, 1), (1, 20, 2), (2, 7, 2), (2, 7, 1), (3, 5, 1)],
        f"user_id int, {_columns.ITEM} int, {_ranking.POSITION} int",
    ).coalesce(1)
    lists = _ranking.collect_lists(ranked, EvaluationOptions(k=3))
    expected = spark.createDataFrame(
        [(1, [10, 20, 30], 0), (2, [7, 7], 1), (3, [5], 0)],
        f"user_id int, {_columns.ITEMS} array<int>, {_columns.RANKED_REPEATS} int",
    )
    assert_df_equality(lists, expected, ignore_row_order=True, ignore_nullable=True)


@pytest.mark.parametrize(
    "k, ideal_1",
    [([10], [3.0, 2.0, 2.0]), ([2], [3.0, 2.0]), ([None], [3.0, 2.0, 2.0])],
)
def test_relevance_lists_ideal_holds_the_grades_above_zero_largest_first(spark, k, ideal_1):
    """The building block alone: the ideal list is cut at the largest k and has no 0 grades
    (a 0 adds nothing to IDCG); the judged lists keep every row, 0 grades included."""
    rel = spark.createDataFrame(
        [(1, "a", 2.0), (1, "b", 0.0), (1, "c", 3.0), (1, "d", 2.0), (2, "e", 0.0), (2, "f", 0.0), (3, "g", 1.0)],
        f"user_id int, {_columns.ITEM} string, {_columns.REL} double",
    )
    lists = _judged.judged_lists(rel, EvaluationOptions(k=k))
    # collect_list order is not defined after the shuffle: the judged pairs are compared sorted.
    actual = lists.select(
        "user_id",
        F.array_sort(F.arrays_zip(_columns.JUDGED_ITEMS, _columns.JUDGED_RELEVANCE)).alias("judged"),
        F.col(_columns.IDEAL).alias("ideal"),
        "n_relevant",
        F.col(_columns.JUDGED_REPEATS).alias("repeats"),
        F.col(_columns.JUDGED_ROWS).alias("rows"),
    )
    judged = {
        1: [("a", 2.0), ("b", 0.0), ("c", 3.0), ("d", 2.0)],
        2: [("e", 0.0), ("f", 0.0)],
        3: [("g", 1.0)],
    }
    ideal = {1: ideal_1, 2: [], 3: [1.0]}
    n_relevant = {1: 3, 2: 0, 3: 1}
    pairs = f"array<struct<{_columns.JUDGED_ITEMS}: string, {_columns.JUDGED_RELEVANCE}: double>>"
    expected = spark.createDataFrame(
        [(u, judged[u], ideal[u], n_relevant[u], 0, len(judged[u])) for u in (1, 2, 3)],
        f"user_id int, judged {pairs}, ideal array<double>, n_relevant int, repeats int, rows int",
    )
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
