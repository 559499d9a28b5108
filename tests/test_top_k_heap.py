"""The bounded-heap top-k gives the window's lists, element for element, and knows when it cannot."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from ndcg_spark import evaluate
from ndcg_spark import core
from ndcg_spark.options import EvaluationOptions


def tie_heavy_recs(spark, item_type: str = "int", users: int = 60, seed: int = 7):
    """Scores from a handful of values (ties everywhere, -0.0 next to 0.0), repeated items,
    users shorter than k, and a segment column with a null."""
    rng = random.Random(seed)
    values = [1.0, 0.5, 0.5, 0.0, -0.0, -2.0, 3.25]
    rows = []
    for user in range(users):
        length = rng.choice([1, 2, 5, 11, 12, 30])
        for _ in range(length):
            rows.append((user, rng.choice(["a", "b", None]), rng.randrange(0, 40), rng.choice(values)))
    rows += [(users, "a", 5, 1.0), (users, "a", 5, 1.0), (users, "a", 5, 2.0)]  # the same item thrice
    return spark.createDataFrame(rows, f"user_id int, model string, item_id {item_type}, score double")


def lists_both_ways(recs, **options):
    opts = EvaluationOptions.from_mapping({"top_k_method": "heap", **options})
    selected = core.select_recommendations(recs, opts)
    heap = core.top_k_lists(selected, opts)
    window = core.top_k_lists(selected, replace(opts, top_k_method="window"))
    return selected, opts, heap, window


@pytest.mark.parametrize(
    "k, tie_break",
    [(1, "item_descending"), (3, "item_ascending"), (10, "item_descending"), (25, "item_ascending")],
)
def test_heap_lists_equal_the_window_lists(spark, k, tie_break):
    recs = tie_heavy_recs(spark)
    for partitions in (1, 5):
        selected, opts, heap, window = lists_both_ways(recs.repartition(partitions), k=[k], tie_break=tie_break)
        assert core.can_use_heap(selected, opts)
        assert "min_by" in heap._jdf.queryExecution().executedPlan().toString()
        expected = window.orderBy("user_id")
        assert expected.count() == 61
        assert_df_equality(heap.orderBy("user_id"), expected, ignore_nullable=True)


def test_heap_lists_keep_segments_apart(spark):
    recs = tie_heavy_recs(spark, users=30)
    _, _, heap, window = lists_both_ways(recs, k=[4], group_by=["model"])
    expected = window.orderBy("model", "user_id")
    assert expected.filter("model IS NULL").count() > 0
    assert_df_equality(heap.orderBy("model", "user_id"), expected, ignore_nullable=True)


@pytest.mark.parametrize("item_type", ["smallint", "tinyint", "bigint", "string"])
def test_heap_serves_any_item_type(spark, item_type):
    recs = tie_heavy_recs(spark, item_type=item_type, users=20)
    selected, opts, heap, window = lists_both_ways(recs, k=[5])
    assert core.can_use_heap(selected, opts)
    assert heap.schema[core.ITEMS].dataType.simpleString() == f"array<{item_type}>"
    assert_df_equality(heap.orderBy("user_id"), window.orderBy("user_id"), ignore_nullable=True)


def test_evaluation_is_the_same_bit_for_bit_with_heap_or_window(spark):
    recs = tie_heavy_recs(spark).drop("model")
    rng = random.Random(3)
    rel = spark.createDataFrame(
        [(u, i, float(rng.choice([0, 1, 2, 3]))) for u in range(0, 64, 2) for i in rng.sample(range(40), 6)],
        "user_id int, item_id int, relevance double",
    )
    options = dict(k=[1, 3, 10, 25], companion_metrics=True, gain="exponential")
    heap = evaluate(recs, rel, top_k_method="heap", **options)
    window = evaluate(recs, rel, **options)
    assert_df_equality(heap.per_user.orderBy("user_id", "k"), window.per_user.orderBy("user_id", "k"))
    assert_df_equality(heap.summary.orderBy("k"), window.summary.orderBy("k"))


def at_cut(spark, lists, k):
    """tie_at_cut over hand-made lists of ordering keys (ascending)."""
    df = spark.createDataFrame(list(enumerate(lists)), "n int, o array<double>")
    return [row.t for row in df.selectExpr("n", f"{core.tie_at_cut('o', k)} AS t").orderBy("n").collect()]


def test_tie_at_cut_rule(spark):
    lists = [
        [1.0, 2.0, 3.0, 4.0],  # distinct keys
        [1.0, 2.0, 3.0, 3.0],  # the k-th and (k+1)-th tie: a row left out may tie too
        [1.0, 1.0, 3.0, 4.0],  # a tie inside the top k only: every tied row is kept
        [1.0, 2.0, 3.0],  # no (k+1)-th row: every row is in
        [5.0],
        [],
        [-0.0, 0.0, 0.0, 0.0],  # -0.0 ties with 0.0
        [1.0, 2.0, float("nan"), float("nan")],  # NaN ties with NaN in Spark's ordering
        None,  # a user with no list
    ]
    assert at_cut(spark, lists, 3) == [False, True, False, False, False, False, True, True, False]


def ordered(spark, pairs, k, tie_break):
    """heap_items_in_order over hand-made (key, item) lists in key order, ties in any order."""
    rows = [(n, [o for o, _ in p], [i for _, i in p]) for n, p in enumerate(pairs)]
    df = spark.createDataFrame(rows, "n int, o array<double>, i array<int>")
    sql = core.heap_items_in_order("i", "o", k, tie_break)
    return [row.top for row in df.selectExpr("n", f"{sql} AS top").orderBy("n").collect()]


@pytest.mark.parametrize("tie_break", ["item_ascending", "item_descending"])
def test_heap_items_in_order_sorts_ties_by_item(spark, tie_break):
    pairs = [
        [(1.0, 5), (2.0, 3), (3.0, 9), (4.0, 1)],  # no tie: the first k as they are
        [(1.0, 5), (1.0, 3), (1.0, 9), (4.0, 1)],  # a three-way tie inside the top k
        [(1.0, 5), (2.0, 3), (2.0, 9)],  # a tie among the last two, no (k+1)-th row
        [(1.0, 7)],
        [],
    ]
    got = ordered(spark, pairs, 3, tie_break)
    if tie_break == "item_ascending":
        assert got == [[5, 3, 9], [3, 5, 9], [5, 3, 9], [7], []]
    else:
        assert got == [[5, 3, 9], [9, 5, 3], [5, 9, 3], [7], []]


def test_heap_lists_do_not_depend_on_the_order_ties_arrive_in(spark):
    """Rows with equal keys reach the heap in any order (and two merges of the partial heaps may
    see two orders): the same rows, shuffled over different partitionings, give the same lists."""
    rng = random.Random(11)
    rows = [(u, i, float(rng.choice([1, 2, 3]))) for u in range(40) for i in rng.sample(range(30), rng.randrange(1, 9))]
    recs = spark.createDataFrame(rows, "user_id int, item_id int, score double")
    selected, opts, _, _ = lists_both_ways(recs, k=[4])
    candidates_df = core.heap_candidates(selected, opts)
    flagged = candidates_df.filter(core.HEAP_UNSURE).count()
    # Users of both kinds: a tie at the cut (window), and a tie inside the top k only (heap, re-sorted).
    tie_inside = candidates_df.filter(
        f"NOT {core.HEAP_UNSURE} AND size(array_distinct(slice({core.HEAP_ORDERS}, 1, 4))) < least(size({core.HEAP_ORDERS}), 4)"
    ).count()
    assert 0 < flagged < 40 and tie_inside > 0
    lists = []
    for partitions, seed in ((1, 1), (4, 2), (7, 3)):
        shuffled = recs.orderBy(F.rand(seed)).repartition(partitions)
        selected, opts, heap, window = lists_both_ways(shuffled, k=[4])
        lists.append(heap.orderBy("user_id"))
        assert_df_equality(heap.orderBy("user_id"), window.orderBy("user_id"), ignore_nullable=True)
    assert_df_equality(lists[0], lists[1])
    assert_df_equality(lists[0], lists[2])


def test_users_sharing_a_bucket_with_a_flagged_user_take_the_window(spark, monkeypatch):
    """The flagged users travel as a bitmap of hashed keys; with 64 buckets, users of the flagged
    user's bucket are recomputed by the window too, and every list is still the window's."""
    monkeypatch.setattr(core, "HEAP_BITMAP_BITS", 6)
    rng = random.Random(5)
    rows = [(u, i, rng.random()) for u in range(300) for i in rng.sample(range(100), 8)]
    rows += [(300, i, 0.5) for i in (9, 3, 7, 1)]  # one user with a four-way tie
    recs = spark.createDataFrame(rows, "user_id int, item_id int, score double")
    selected, opts, heap, window = lists_both_ways(recs.repartition(3), k=[3])
    keys = core.user_keys(selected, opts)
    candidates_df = core.heap_candidates(selected, opts)
    assert candidates_df.filter(core.HEAP_UNSURE).count() == 1
    bitmap = core.unsure_bitmap(candidates_df, keys)
    handed = candidates_df.join(bitmap, core.in_bitmap(keys), "left_semi").count()
    assert handed > 1
    assert "bit_or" in heap._jdf.queryExecution().executedPlan().toString()
    expected = window.orderBy("user_id")
    assert expected.filter("user_id = 300").first()[core.ITEMS] == [1, 3, 7]
    assert_df_equality(heap.orderBy("user_id"), expected, ignore_nullable=True)


def test_negative_zero_ties_with_zero(spark):
    recs = spark.createDataFrame(
        [(1, 9, -0.0), (1, 3, 0.0), (1, 5, 1.0), (1, 4, 0.0), (1, 2, -1.0)],
        "user_id int, item_id int, score double",
    )
    _, _, heap, window = lists_both_ways(recs.coalesce(1), k=[2])
    expected = spark.createDataFrame([(1, [5, 3], 0)], "user_id int, __ndcg_items array<int>, __ndcg_duplicate_recommendations int")
    assert_df_equality(window, expected, ignore_nullable=True)
    assert_df_equality(heap, expected, ignore_nullable=True)


@pytest.mark.parametrize(
    "options, item_type, version",
    [
        ({"k": [10]}, "int", (4, 2)),
        ({"k": [10], "top_k_method": "window"}, "int", (4, 3)),
        ({"k": [10], "top_k_method": None}, "int", (4, 3)),
        ({"k": [10]}, "string", (4, 3)),
        ({"k": [10]}, "bigint", (4, 3)),
        ({"k": [10, None]}, "int", (4, 3)),
        ({"k": [99_999]}, "int", (4, 3)),
        ({"k": [100_000]}, "int", (4, 3)),
        ({"k": [10], "rank_col": "score"}, "int", (4, 3)),
        ({"k": [10], "ties": "average"}, "int", (4, 3)),
        ({"k": [10]}, "int", (4, 1)),
    ],
)
def test_when_the_heap_is_used(spark, monkeypatch, options, item_type, version):
    recs = spark.createDataFrame([(1, 1, 1.0)], "user_id int, item_id int, score double").selectExpr(
        "user_id", f"CAST(item_id AS {item_type}) AS item_id", "score"
    )
    options = {"top_k_method": "heap", **options}
    if options["top_k_method"] is None:
        del options["top_k_method"]  # the default
    opts = EvaluationOptions.from_mapping(options)
    selected = core.select_recommendations(recs, opts)
    monkeypatch.setattr(core, "spark_version", lambda df: version)
    expected = (
        version >= (4, 2)
        and options.get("top_k_method") == "heap"
        and None not in options["k"]
        and max(options["k"]) < 100_000
        and "rank_col" not in options
        and "ties" not in options
    )
    assert core.can_use_heap(selected, opts) is expected
