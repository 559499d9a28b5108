"""Whole-process cost of the scheduled job against the job a competent engineer writes with
Spark ML's RankingEvaluator, on the same Parquet tables, at several sizes and on skewed data.

    python benchmarks/job.py                                # 100k, 400k, 1.6M users, 3 rounds
    python benchmarks/job.py --sizes 20000 --repeat 1       # quick check

Timed, each as a whole process (a cold JVM included):

(J)   ``ndcg-spark`` with k = 10, writing all its outputs (per_user/, summary/, report.html,
      summary.json);
(P)   ``benchmarks/ranking_evaluator_job.py``: top-10 window, arrays per user, join,
      ``RankingEvaluator(metricName="ndcgAtK", k=10)``, the mean written as JSON;
(J6)  (``--runs J,P,J6``) J with k = 1, 5, 10, 20, 50, 100 and the companion metrics;
(JS)  J on skewed tables of the same total rows as the ``--skew-at`` size: 1% of the users hold
      half the rows, one of them a million recommendations and 100,000 relevance rows.

Every size's list runs once a round; the rounds alternate the order (sizes ascending then
descending, J before P then after), so that drift in the machine's speed hits each alike. For
each run: the median wall time, CPU time and peak memory (the largest sum of the resident sets
of the process and its children, the JVM included, sampled every 50 ms); per size the ratio J/P
and rows per second per core; across sizes the fixed part and the per-row part of each run's
time (a least-squares line of the medians against the rows) and the growth per doubling of the
rows; JS against J at equal rows. The data comes from ``benchmarks/datagen.py`` (reused when
present under ``--data-dir``), the figures from ``benchmarks/metering.py``.

Beside the times, figures that other load on the machine does not move, read from Spark's own
event log of each run (``spark.eventLog.enabled``, set through a ``spark-defaults.conf`` of the
run's own, so neither job is changed): the shuffle bytes written, the bytes spilled (memory and
disk) and the task CPU time, summed over every task of the run; and the executed plans' nodes,
counted over the final (adaptive) plan of every SQL execution: ``Exchange`` (a shuffle; a
``ReusedExchange`` is not counted, it shuffles nothing again), ``Sort`` and ``Generate``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Dict, List, Sequence, Tuple

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from datagen import DataSpec, generated, paths_of  # noqa: E402
from metering import event_log_conf, growth_per_doubling, line_fit, spark_figures, timed  # noqa: E402

#: Targets: J/P at the largest size and at sizes up to 100,000 users, the growth of J per doubling
#: of the rows, and the skewed tables against the unskewed at equal rows.
TARGETS = {"J/P largest": 1.10, "J/P <=100k": 1.20, "growth per 2x": 2.1, "JS/J": 1.5}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="100000,400000,1600000", help="users, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="rounds; each runs every run of every size once")
    p.add_argument("--runs", default="J,P", help="of J, P, J6, comma-separated")
    p.add_argument("--skew-at", type=int, default=400_000, help="users of the skewed tables (0: no JS)")
    p.add_argument("--giant", default="1000000,100000", help="the largest user's recommendations,relevance rows")
    add_data_arguments(p, work_dir="/tmp/ndcg-bench-job")
    return p.parse_args(argv)


def add_data_arguments(p: argparse.ArgumentParser, work_dir: str) -> None:
    """The generated tables' shape, where they and the runs' outputs go, the master and ``--json``."""
    p.add_argument("--list-length", type=int, default=50, help="recommendations per user")
    p.add_argument("--relevant", type=int, default=20, help="relevance rows per user (grades 0..4)")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--data-dir", default="/tmp/ndcg-bench")
    p.add_argument("--work-dir", default=work_dir, help="the runs' outputs (replaced)")
    p.add_argument("--json", default=None, help="also write every figure as JSON to this path")


def specs(args) -> Dict[str, DataSpec]:
    """The data of each size (``"100000"``) and of the skewed tables (``"skewed"``)."""
    out = {str(n): DataSpec(n, args.list_length, args.relevant) for n in sizes(args)}
    if args.skew_at:
        giant_recs, giant_rel = (int(x) for x in args.giant.split(","))
        out["skewed"] = DataSpec(
            args.skew_at, args.list_length, args.relevant, heavy_share=0.5,
            giant_recommendations=giant_recs, giant_relevance=giant_rel,
        )  # fmt: skip
        out.setdefault(str(args.skew_at), DataSpec(args.skew_at, args.list_length, args.relevant))
    return out


def sizes(args) -> List[int]:
    return sorted(int(n) for n in args.sizes.split(","))


def generate(args) -> Dict[str, Dict[str, str]]:
    """Each data set's paths, generated in a Spark of its own (this process stays JVM-free)."""
    wanted = specs(args)
    missing = [json.dumps(asdict(s)) for s in wanted.values() if not generated(s, Path(args.data_dir))]
    if missing:
        cmd = [sys.executable, str(HERE / "datagen.py"), "--master", args.master, args.data_dir, *missing]
        subprocess.run(cmd, check=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    return {label: paths_of(spec, Path(args.data_dir)) for label, spec in wanted.items()}


def commands(args, paths: Dict[str, str], work: Path, label: str) -> Dict[str, Tuple[List[str], Path]]:
    """The runs on one data set, each with the output it writes (replaced before each run)."""
    job = [sys.executable, "-m", "ndcg_spark", "--recommendations", paths["recs"], "--relevance", paths["rel"]]
    job += ["--master", args.master]
    p_out = work / f"P-{label}.json"
    return {
        "J": ([*job, "--k", "10", "--output", str(work / f"J-{label}")], work / f"J-{label}"),
        "J6": (
            [*job, "--k", "1,5,10,20,50,100", "--companion-metrics", "true", "--output", str(work / f"J6-{label}")],
            work / f"J6-{label}",
        ),
        "P": (
            [sys.executable, str(HERE / "ranking_evaluator_job.py"), paths["recs"], paths["rel"], str(p_out)],
            p_out,
        ),
    }


def schedule(labels: Sequence[str], runs: Sequence[str], round_: int, skewed: str = None) -> List[Tuple[str, str]]:
    """The (data set, run) pairs of one round: sizes ascending in even rounds, descending in odd
    ones, and within a size the runs in order then reversed; J of the skewed tables (data set
    ``"skewed"``) next to J of the size ``skewed``.

    >>> schedule(["100", "200"], ["J", "P"], 1, skewed="200")
    [('200', 'P'), ('skewed', 'J'), ('200', 'J'), ('100', 'P'), ('100', 'J')]
    """
    order = list(labels) if round_ % 2 == 0 else list(reversed(labels))
    names = list(runs) if round_ % 2 == 0 else list(reversed(runs))
    pairs = []
    for label in order:
        for name in names:
            pair = [(label, name)]
            if name == "J" and label == skewed:
                pair = [(label, name), ("skewed", name)] if round_ % 2 == 0 else [("skewed", name), (label, name)]
            pairs += pair
    return pairs


def shown(label: str, run: str) -> str:
    """The run's name in the table: JS for J on the skewed tables."""
    return "JS" if label == "skewed" else run


def main(argv=None) -> int:
    args = parse_args(argv)
    paths = generate(args)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    data = specs(args)
    runs = [r for r in args.runs.split(",") if r]
    labels = [str(n) for n in sizes(args)]
    if args.skew_at and str(args.skew_at) not in labels:
        labels.append(str(args.skew_at))
        labels.sort(key=int)
    rows = {label: spec.recs_layout.total + spec.rel_layout.total for label, spec in data.items()}
    cores = int(args.master[len("local[") : -1]) if args.master.startswith("local[") else os.cpu_count()
    figures: Dict[Tuple[str, str], Dict[str, List[float]]] = {}
    print(
        f"machine: {os.cpu_count()} cpus, {args.master}; sizes {', '.join(labels)} users x {args.list_length} "
        f"recommendations, {args.relevant} relevance rows per user; {args.repeat} rounds",
        flush=True,
    )
    for round_ in range(args.repeat):
        for label, run in schedule(labels, runs, round_, skewed=str(args.skew_at) if args.skew_at else None):
            cmd, output = commands(args, paths[label], work, label)[run]
            shutil.rmtree(output, ignore_errors=True) if output.is_dir() else output.unlink(missing_ok=True)
            env, logs = event_log_conf(work, f"{run}-{label}")
            elapsed, peak, cpu = timed(cmd, work / f"{run}-{label}.log", env)
            spark = spark_figures(logs)
            f = figures.setdefault((label, run), {"wall": [], "cpu": [], "peak": []})
            f["wall"].append(elapsed)
            f["cpu"].append(cpu)
            f["peak"].append(peak)
            for name, value in spark.items():
                f.setdefault(name, []).append(value)
            print(
                f"round {round_ + 1}/{args.repeat} {label:>8} {shown(label, run):>2}: {elapsed:7.2f} s, "
                f"CPU {cpu:7.2f} s, peak {peak / 2**20:6.0f} MB; shuffle {spark['shuffle_bytes'] / 2**20:8.1f} MB, "
                f"spill {spark['spill_bytes'] / 2**20:6.1f} MB, task CPU {spark['task_cpu_seconds']:7.2f} s, "
                f"{spark['shuffle_stages']} shuffle stages; plans: {spark['exchange_nodes']} exchanges, "
                f"{spark['sort_nodes']} sorts, {spark['generate_nodes']} generates",
                flush=True,
            )
    med = {key: {m: statistics.median(v) for m, v in f.items()} for key, f in figures.items()}
    report = report_lines(med, figures, rows, labels, runs, cores, args)
    print()
    print("\n".join(report["lines"]))
    if args.json:
        record = {
            "args": vars(args),
            "rows": rows,
            "runs": {f"{run}@{label}": f for (label, run), f in figures.items()},
            "medians": {f"{run}@{label}": m for (label, run), m in med.items()},
            "ratios": report["ratios"],
            "fits": report["fits"],
        }
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


def report_lines(med, figures, rows, labels, runs, cores, args) -> Dict[str, object]:
    """The table of medians per data set, the line fits, the ratios and their verdicts."""
    lines = [
        f"{'users':>9} {'rows':>11} {'run':>3} {'wall':>8} {'min-max':>13} {'CPU':>8} {'peak MB':>8} {'rows/s/core':>12}"
    ]
    for (label, run), m in sorted(med.items(), key=lambda kv: (kv[0][0] == "skewed", int(rows[kv[0][0]]), kv[0][1])):
        wall = figures[(label, run)]["wall"]
        lines.append(
            f"{label:>9} {rows[label]:11,d} {shown(label, run):>3} {m['wall']:8.2f} "
            f"{f'{min(wall):.1f}-{max(wall):.1f}':>13} {m['cpu']:8.2f} {m['peak'] / 2**20:8.0f} "
            f"{rows[label] / m['wall'] / cores:12,.0f}"
        )
    if any("shuffle_bytes" in m for m in med.values()):
        lines.append("")
        lines.append(
            f"{'users':>9} {'run':>3} {'shuffle MB':>11} {'spill MB':>9} {'task CPU':>9} "
            f"{'shuffles':>8} {'exchanges':>9} {'sorts':>6} {'generates':>9}  (from Spark's event log; medians)"
        )
        for (label, run), m in sorted(
            med.items(), key=lambda kv: (kv[0][0] == "skewed", int(rows[kv[0][0]]), kv[0][1])
        ):
            if "shuffle_bytes" in m:
                lines.append(
                    f"{label:>9} {shown(label, run):>3} {m['shuffle_bytes'] / 2**20:11.1f} {m['spill_bytes'] / 2**20:9.1f} "
                    f"{m['task_cpu_seconds']:9.2f} {m['shuffle_stages']:8.0f} {m['exchange_nodes']:9.0f} {m['sort_nodes']:6.0f} "
                    f"{m['generate_nodes']:9.0f}"
                )
    ratios: Dict[str, float] = {}
    verdicts = []
    for label in labels:
        if (label, "J") in med and (label, "P") in med and "shuffle_bytes" in med[(label, "J")]:
            ratios[f"J/P shuffle@{label}"] = med[(label, "J")]["shuffle_bytes"] / max(
                med[(label, "P")]["shuffle_bytes"], 1
            )
            ratios[f"J/P task CPU@{label}"] = med[(label, "J")]["task_cpu_seconds"] / max(
                med[(label, "P")]["task_cpu_seconds"], 1e-9
            )
            lines.append(
                f"J/P at {label} users: shuffle bytes {ratios[f'J/P shuffle@{label}']:.3f}, "
                f"task CPU {ratios[f'J/P task CPU@{label}']:.3f}"
            )
    for label in labels:
        if (label, "J") in med and (label, "P") in med:
            ratios[f"J/P@{label}"] = med[(label, "J")]["wall"] / med[(label, "P")]["wall"]
            ratios[f"J/P CPU@{label}"] = med[(label, "J")]["cpu"] / med[(label, "P")]["cpu"]
            lines.append(f"J/P at {label} users = {ratios[f'J/P@{label}']:.3f} (CPU {ratios[f'J/P CPU@{label}']:.3f})")
            if int(label) <= 100_000:
                verdicts.append(("J/P <=100k", f"J/P at {label} users", ratios[f"J/P@{label}"]))
    if f"J/P@{labels[-1]}" in ratios:
        verdicts.append(("J/P largest", f"J/P at {labels[-1]} users", ratios[f"J/P@{labels[-1]}"]))
    fits: Dict[str, Dict[str, float]] = {}
    sized = [str(n) for n in sizes(args)]
    for run in runs if len(sized) >= 2 else ():
        xs = [rows[label] for label in sized]
        ys = [med[(label, run)]["wall"] for label in sized]
        fixed, per_row = line_fit(xs, ys)
        fits[run] = {"fixed_seconds": fixed, "seconds_per_million_rows": per_row * 1e6, "growth_per_2x": None}
        fits[run]["growth_per_2x"] = growth = growth_per_doubling(xs, ys)
        lines.append(
            f"{run:>2}: fixed {fixed:6.2f} s + {per_row * 1e6:6.3f} s per million rows; time(2N)/time(N) = {growth:.2f}"
        )
        if run == "J":
            verdicts.append(("growth per 2x", "J's time per doubling of the rows", growth))
    if "J" in fits and "P" in fits:
        ratios["per-row J/P"] = fits["J"]["seconds_per_million_rows"] / fits["P"]["seconds_per_million_rows"]
        lines.append(f"per-row part J/P = {ratios['per-row J/P']:.3f}")
    if ("skewed", "J") in med:
        ratios["JS/J"] = med[("skewed", "J")]["wall"] / med[(str(args.skew_at), "J")]["wall"]
        verdicts.append(("JS/J", f"J on skewed / unskewed tables at {args.skew_at} users", ratios["JS/J"]))
    for target, what, value in verdicts:
        verdict = "MET" if value <= TARGETS[target] else "NOT MET"
        lines.append(f"ratio {target} = {value:.3f} (target <= {TARGETS[target]:.2f}) {verdict}: {what}")
    return {"lines": lines, "ratios": ratios, "fits": fits}


if __name__ == "__main__":
    sys.exit(main())
