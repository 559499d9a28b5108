"""Where each variant's wall time goes: driver build, planning, data stages, the tail.

``bench.py`` reports the wall time of each variant; this script splits it, for (b) and (d) by
default, on the same data and in one Spark session, into

* ``read``: ``spark.read.parquet`` of both tables (schema jobs included),
* ``build``: building the DataFrame on the driver (``evaluate(...).summary`` for (b);
  ``bench.ranking_evaluator_input`` for (d)); in classic PySpark each DataFrame step is
  analysed by the JVM as it is made,
* ``plan``: from the built DataFrame to the first stage submitted (optimisation, physical
  planning, adaptive execution's first stages, code generation),
* ``data``: from that submission to the end of the last stage with the most tasks (the
  stages that read, shuffle and join the tables),
* ``tail``: the rest (for (b) the one-task summary stage and the collect; (d) averages on
  the driver from its last data stage),

as medians over round-robin rounds after a warm-up, each after a full GC. Stage times come
from Spark's status store; ``--stages`` also prints every round's stages.

Usage (the same data options as ``bench.py``; its data are generated if missing)::

    python benchmarks/timeline.py                       # (b) and (d), 200k users
    python benchmarks/timeline.py --variants a,b,b100,c,d --repeat 5 --users 400000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Callable, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench  # noqa: E402  (its command line and its queries (a) and (d))
from datagen import DataSpec, generate  # noqa: E402
from metering import machine, session  # noqa: E402

PHASES = ("read", "build", "plan", "data", "tail", "total")


def builders(spark, paths: Dict[str, str], k: int = 10) -> Dict[str, Callable[[], Tuple[Callable, Callable]]]:
    """Per variant: a function that reads the tables and returns (build, run) for them."""
    from pyspark.ml.evaluation import RankingEvaluator

    import ndcg_spark

    def tables():
        return spark.read.parquet(paths["recs"]), spark.read.parquet(paths["rel"])

    def ndcg(ks):
        def read():
            recs, rel = tables()
            return (lambda: ndcg_spark.evaluate(recs, rel, k=ks).summary), (lambda df: df.collect())

        return read

    def floor():
        recs, rel = tables()
        return (lambda: bench.floor_query(recs, rel, k=k)), (lambda df: df.collect())

    def ranking_evaluator():
        recs, rel = tables()
        evaluator = RankingEvaluator(metricName="ndcgAtK", k=k, predictionCol="prediction", labelCol="label")
        return (lambda: bench.ranking_evaluator_input(recs, rel, k=k)), evaluator.evaluate

    return {"a": floor, "b": ndcg([k]), "b100": ndcg([100]), "c": ndcg([1, 5, 10, 20, 50, 100]), "d": ranking_evaluator}


class Stages:
    """The stages Spark's status store has seen since the last call, with their times (ms)."""

    def __init__(self, spark):
        self._sc = spark.sparkContext._jsc.sc()
        gateway = spark.sparkContext._gateway
        self._no_quantiles = gateway.new_array(gateway.jvm.double, 0)
        self._seen = set()
        self.new()

    def new(self) -> List[dict]:
        self._sc.listenerBus().waitUntilEmpty()
        listed = self._sc.statusStore().stageList(None, False, False, self._no_quantiles, None)
        found = []
        for i in range(listed.size()):
            stage = listed.apply(i)
            key = (stage.stageId(), stage.attemptId())
            if key in self._seen:
                continue
            self._seen.add(key)
            if stage.submissionTime().isDefined() and stage.completionTime().isDefined():
                found.append(
                    {
                        "stage": stage.stageId(),
                        "tasks": stage.numTasks(),
                        "submitted": stage.submissionTime().get().getTime(),
                        "completed": stage.completionTime().get().getTime(),
                        "task_cpu": stage.executorCpuTime() / 1e9,
                    }
                )
        return sorted(found, key=lambda s: (s["submitted"], s["stage"]))


def one_run(spark, make: Callable, stages: Stages) -> dict:
    """Time one run of a variant and split it into the phases of the module docstring."""
    spark._jvm.System.gc()
    stages.new()
    start = time.time() * 1000
    build, run = make()
    read = time.time() * 1000
    df = build()
    built = time.time() * 1000
    run(df)
    end = time.time() * 1000
    mine = [s for s in stages.new() if s["submitted"] >= built]
    widest = max((s["tasks"] for s in mine), default=0)
    first = min((s["submitted"] for s in mine), default=end)
    data_end = max((s["completed"] for s in mine if s["tasks"] == widest), default=first)
    return {
        "read": read - start,
        "build": built - read,
        "plan": first - built,
        "data": data_end - first,
        "tail": end - data_end,
        "total": end - start,
        "stages": [{**s, "submitted": s["submitted"] - start, "completed": s["completed"] - start} for s in mine],
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default="b,d", help="comma-separated, of a, b, b100, c, d")
    p.add_argument("--stages", action="store_true", help="print every round's stages")
    own, rest = p.parse_known_args(argv)
    args = bench.parse_args(rest)
    names = [n.strip() for n in own.variants.split(",") if n.strip()]
    spark = session(args)
    spec = DataSpec(args.users, args.list_length, args.relevant, seed=args.seed)
    paths = generate(spark, spec, Path(args.data_dir), lambda m: print(m, flush=True))
    makers = builders(spark, paths)
    unknown = [n for n in names if n not in makers]
    if unknown:
        p.error(f"unknown variants {unknown}; choose from {', '.join(makers)}")
    stages = Stages(spark)
    for _ in range(args.warmup):
        for name in names:
            one_run(spark, makers[name], stages)
    runs: Dict[str, List[dict]] = {name: [] for name in names}
    for round_ in range(args.repeat):
        for name in names:
            result = one_run(spark, makers[name], stages)
            runs[name].append(result)
            if own.stages:
                shown = " ".join(f"{s['tasks']}:{s['submitted']:.0f}-{s['completed']:.0f}" for s in result["stages"])
                print(
                    f"round {round_ + 1} {name}: {result['total']:.0f} ms; stages (tasks:from-to ms) {shown}",
                    flush=True,
                )
    medians = {name: {ph: statistics.median(r[ph] for r in rs) for ph in PHASES} for name, rs in runs.items()}
    print()
    print(
        f"== {spec.users} users, {spec.recs_layout.total:,} recommendation rows, {spec.rel_layout.total:,} "
        f"relevance rows; medians of {args.repeat} rounds, milliseconds =="
    )
    print(f"{'':5}" + "".join(f"{ph:>8}" for ph in PHASES))
    for name, med in medians.items():
        print(f"{name:5}" + "".join(f"{med[ph]:8.0f}" for ph in PHASES))
    if "b" in medians and "d" in medians:
        print("b - d" + "".join(f"{medians['b'][ph] - medians['d'][ph]:8.0f}" for ph in PHASES))
    if args.json:
        Path(args.json).write_text(
            json.dumps({"data": spec.name, "machine": machine(), "medians_ms": medians, "runs": runs}, indent=1)
        )
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
