"""(b) with each way of finding the top k, against (d), in one Spark session.

``evaluate`` finds each user's top k by the ``row_number()`` window (``top_k_method =
"window"``, the default) or, where it applies, by a bounded heap (``"heap"``; see the README's
"How the top k is found"). This script times, on ``bench.py``'s data or any directory with
``recs/`` and ``rel/``, (b) with each method and (d), round-robin after a warm-up, and prints
medians, ratios to (d) and each run's mean NDCG (the two methods must agree).

Usage (after ``python benchmarks/bench.py`` has written the data)::

    python benchmarks/top_k_methods.py [--data DIR] [--repeat 5] [--k 10]
    python benchmarks/top_k_methods.py --make-tied-copy DIR   # the same data, scores rounded to 2 decimals
    python benchmarks/top_k_methods.py --data DIR             # ... then timed: the heap's costly case
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench  # noqa: E402

DEFAULT_DATA = "/tmp/ndcg-bench/v2_u200000_l50_r20_noskew_seed20240611"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", default=DEFAULT_DATA, help="a directory with recs/ and rel/ written by bench.py")
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--k", type=int, default=10, help="the cutoff of (b) ((d) stays at 10)")
    p.add_argument(
        "--make-tied-copy",
        metavar="DIR",
        help="write a copy of --data with scores rounded to 2 decimals (tie-heavy) to DIR, then stop",
    )
    p.add_argument("--warmup", type=int, default=1, help="untimed runs of each variant first")
    p.add_argument("--driver-memory", default="4g", help="as bench.py's (its heap is fixed at that size)")
    args = p.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = bench.session(bench.parse_args(["--driver-memory", args.driver_memory]))
    if args.make_tied_copy:
        recs = spark.read.parquet(f"{args.data}/recs")
        # repartition: each user's rows spread over several files, as after an upstream shuffle.
        recs.selectExpr("user_id", "item_id", "round(score, 2) AS score").repartition(8).write.mode(
            "overwrite"
        ).parquet(f"{args.make_tied_copy}/recs")
        spark.read.parquet(f"{args.data}/rel").write.mode("overwrite").parquet(f"{args.make_tied_copy}/rel")
        spark.stop()
        return 0
    import ndcg_spark

    paths = {"recs": f"{args.data}/recs", "rel": f"{args.data}/rel"}

    def run(method: str):
        def timed():
            recs, rel = spark.read.parquet(paths["recs"]), spark.read.parquet(paths["rel"])
            row = ndcg_spark.evaluate(recs, rel, k=[args.k], top_k_method=method).summary.collect()[0]
            return f"ndcg@{args.k}={row.mean_ndcg:.12f} users={row.users}"

        return timed

    from ndcg_spark import core
    from ndcg_spark.options import EvaluationOptions

    opts = EvaluationOptions.from_mapping({"k": [args.k], "top_k_method": "heap"})
    selected = core.select_recommendations(spark.read.parquet(paths["recs"]), opts)
    candidates = core.heap_candidates(selected, opts)
    keys = core.user_keys(selected, opts)
    bitmap = core.unsure_bitmap(candidates, keys)
    counts = candidates.join(bitmap, core.in_bitmap(keys), "left").selectExpr(
        "count(1) AS users",
        f"count_if({core.HEAP_UNSURE}) AS unsure",
        f"count({core.HEAP_BITMAP_MASK}) AS handed",
    ).first()
    print(
        f"users with a tie at the cut (recomputed by the window): {counts.unsure:,} of {counts.users:,}; "
        f"users whose rows the window reads (those and any sharing their bitmap bucket): {counts.handed:,}",
        flush=True,
    )

    variants = {"b_heap": run("heap"), "b_window": run("window"), "d": bench.make_variants(spark, paths)["d"]}
    results = bench.time_variants(spark, variants, args.repeat, lambda m: print(m, flush=True), warmup=args.warmup)
    d = results["d"]
    for name, r in results.items():
        print(
            f"{name:9s} wall {r['median']:6.2f} s  task CPU {r['task_cpu_median']:6.2f} s"
            f"  /d wall {r['median'] / d['median']:.3f} task {r['task_cpu_median'] / d['task_cpu_median']:.3f}"
            f"  {r['check']}"
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
