"""Research script (not part of the product): a bounded-heap top-k on the recommendation side.

Spark 4.2 added ``min_by(x, y, k)`` / ``max_by(x, y, k)`` (``MaxMinByK``): the k values of ``x``
with the smallest ``y`` per group, kept in a heap of k per group during a sort-based
aggregation. The sort it needs is by the user alone (one integer key, so Spark radix-sorts
it), where the window path (``with_position`` + ``filter_top_k``) sorts by (user, score, item)
with a row comparator. This script times, in one Spark session on ``bench.py``'s data, the
library's (b) against the same pipeline with the recommendation lists built by a heap instead,
and against (d):

- ``heap_primitive``: ``min_by(item, -score, k)``. NOT exact: rows with equal scores are
  ordered by arrival, so the tie rule (item ascending) and determinism are lost. The cost of
  the heap with a primitive key, as a lower bound.
- ``heap_fallback``: exact. ``min_by`` of the items and of the scores (k + 1 each); a user whose
  k + 1 best scores hold a repeat is recomputed by the window path from the rows of those users
  only (broadcast semi-join), the others keep the heap's list.
- ``heap_struct``: exact. ``min_by(item, struct(-score, item), k)``: the key breaks ties itself,
  but is compared by Spark's interpreted ordering.
- ``heap_packed``: exact, integer items only. One ``min_by`` (k + 1) of a long packing the item
  (high 32 bits) and a 32-bit hash of the score (low 32 bits): equal scores give equal hashes, so
  a repeated hash among a user's candidates sends that user to the window path as in
  ``heap_fallback`` (a hash collision only sends a user there needlessly).
- ``heap_packed_shared``: ``heap_packed`` with a shuffle after the heap aggregation that both
  branches read, so the reduce-side heap merge runs once.

Usage (after ``python benchmarks/bench.py`` has written the data)::

    python benchmarks/experiments/topk_heap.py [--data DIR] [--repeat 5] [--heaps primitive,fallback,struct,packed] [--k 10]
    python benchmarks/experiments/topk_heap.py --make-tied-copy DIR   # the tie-heavy copy

Findings are in the README (Benchmarks) and the notes on issue 4.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent.parent))

import bench  # noqa: E402

DEFAULT_DATA = "/tmp/ndcg-bench/v2_u200000_l50_r20_noskew_seed20240611"


def heap_lists(recs, opts, mode: str):
    """Per-user recommendation lists as :func:`ndcg_spark.core.recommendation_lists` returns them."""
    from pyspark.sql import functions as F

    from ndcg_spark import core as C
    from ndcg_spark.functions import has_repeats, ident

    k = int(opts.largest_k)
    user = ident(opts.user_col)
    dup = f"size({C.ITEMS}) - size(array_distinct({C.ITEMS})) AS {C.DUP_RECS}"
    if mode == "primitive":
        lists = recs.groupBy(F.col(user)).agg(F.expr(f"min_by({C.ITEM}, {C.ORDER}, {k}) AS {C.ITEMS}"))
        return lists.selectExpr(user, C.ITEMS, dup)
    if mode == "struct":
        key = f"named_struct('o', {C.ORDER}, 'i', {C.ITEM})"
        lists = recs.groupBy(F.col(user)).agg(F.expr(f"min_by({C.ITEM}, {key}, {k}) AS {C.ITEMS}"))
        return lists.selectExpr(user, C.ITEMS, dup)
    if mode in ("packed", "packed_shared"):
        # + 0.0 turns -0.0 into 0.0, which compare equal and must hash equal.
        packed = f"shiftleft(CAST({C.ITEM} AS BIGINT), 32) | (CAST(hash({C.ORDER} + 0.0D) AS BIGINT) & 4294967295L)"
        candidates = recs.selectExpr(user, f"{packed} AS __packed", C.ORDER).groupBy(F.col(user)).agg(
            F.expr(f"min_by(__packed, {C.ORDER}, {k + 1}) AS __c")
        ).selectExpr(
            user,
            "transform(__c, p -> CAST(shiftright(p, 32) AS INT)) AS __c_items",
            "transform(__c, p -> p & 4294967295L) AS __c_hashes",
        ).selectExpr(user, "__c_items", f"{has_repeats('__c_hashes')} AS __tied")
    else:
        candidates = recs.groupBy(F.col(user)).agg(
            F.expr(f"min_by({C.ITEM}, {C.ORDER}, {k + 1}) AS __c_items"),
            F.expr(f"min_by({C.ORDER}, {C.ORDER}, {k + 1}) AS __c_orders"),
        ).selectExpr(user, "__c_items", f"{has_repeats('__c_orders')} AS __tied")
    if mode == "packed_shared":
        # An exchange of its own after the heap aggregation: both branches read it, so the
        # reduce-side heap merge runs once instead of once per branch (at the price of a shuffle).
        candidates = candidates.repartition(F.col(user))
    exact = candidates.filter("NOT __tied").selectExpr(user, f"slice(__c_items, 1, {k}) AS {C.ITEMS}").selectExpr(
        user, C.ITEMS, dup
    )
    # Reads __c_items as well, so both branches keep the same aggregate and share its exchange;
    # <=> infers no isnotnull filter that would make the two scans differ.
    tied = candidates.filter("__tied AND size(__c_items) > 0").selectExpr(f"{user} AS __tied_user")
    rows = recs.join(F.broadcast(tied), F.col(user).eqNullSafe(F.col("__tied_user")), "left_semi")
    slow = rows.transform(C.with_position, opts).transform(C.filter_top_k, k).transform(C.recommendation_lists, opts)
    return exact.unionByName(slow)


def evaluate_with_heap(recommendations, relevance, mode: str, **options):
    """:func:`ndcg_spark.evaluate` (default options) with the recommendation lists from a heap."""
    from ndcg_spark import core as C
    from ndcg_spark.options import EvaluationOptions
    from ndcg_spark.validation import guard_rows

    opts = EvaluationOptions.from_mapping(options)
    recs = C.select_recommendations(guard_rows(recommendations, "recommendations", opts), opts)
    rel = C.select_relevance(guard_rows(relevance, "relevance", opts), opts, item_type=recs.schema[C.ITEM].dataType)
    per_user = (
        heap_lists(recs, opts, mode)
        .join(rel.transform(C.relevance_lists, opts), on=opts.user_col, how="full")
        .transform(C.with_gains, opts)
        .transform(C.with_cutoffs, opts)
        .transform(C.with_exclusions, opts)
    )
    return C.EvaluationResult(scored=per_user, options=opts, rejected=None)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DEFAULT_DATA, help="a directory with recs/ and rel/ written by bench.py")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--heaps", default="primitive,fallback,struct,packed", help="which heap variants to time")
    p.add_argument("--k", type=int, default=10, help="the cutoff of (b) and the heap variants ((d) stays at 10)")
    p.add_argument(
        "--make-tied-copy",
        metavar="DIR",
        help="write a copy of --data with scores rounded to 2 decimals (tie-heavy) to DIR, then stop",
    )
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = bench.session(bench.parse_args([]))
    if args.make_tied_copy:
        recs = spark.read.parquet(f"{args.data}/recs")
        recs.selectExpr("user_id", "item_id", "round(score, 2) AS score").repartition(8).write.mode(
            "overwrite"
        ).parquet(f"{args.make_tied_copy}/recs")
        spark.read.parquet(f"{args.data}/rel").write.mode("overwrite").parquet(f"{args.make_tied_copy}/rel")
        spark.stop()
        return 0
    import ndcg_spark

    paths = {"recs": f"{args.data}/recs", "rel": f"{args.data}/rel"}

    def tables():
        return spark.read.parquet(paths["recs"]), spark.read.parquet(paths["rel"])

    def run(fn):
        def timed():
            row = fn(*tables(), k=[args.k]).summary.collect()[0]
            return f"ndcg@{args.k}={row.mean_ndcg:.12f} users={row.users}"

        return timed

    variants = {"b": run(ndcg_spark.evaluate)}
    for mode in args.heaps.split(","):
        variants[f"heap_{mode}"] = run(lambda r, q, mode=mode, **o: evaluate_with_heap(r, q, mode, **o))
    variants["d"] = bench.make_variants(spark, paths)["d"]
    results = bench.time_variants(spark, variants, args.repeat, lambda m: print(m, flush=True))
    d = results["d"]
    for name, r in results.items():
        print(
            f"{name:15s} wall {r['median']:6.2f} s  task CPU {r['task_cpu_median']:6.2f} s  JVM CPU {r['cpu_median']:6.2f} s"
            f"  /d wall {r['median'] / d['median']:.3f} task {r['task_cpu_median'] / d['task_cpu_median']:.3f}"
            f"  {r['check']}"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
