"""Whole-process cost of the scheduled job against the job a competent engineer writes with
Spark ML's RankingEvaluator, on the same Parquet tables.

    python benchmarks/job.py                          # 200,000 users x 50 recommendations, 5 rounds
    python benchmarks/job.py --users 20000 --repeat 1 # quick check

Timed, each as a whole process (a cold JVM included), in rounds whose order alternates
(J, P, J6 then J6, P, J) so that drift in the machine's speed hits each alike:

(J)   ``ndcg-spark`` with k = 10, writing all its outputs (per_user/, summary/, report.html,
      summary.json);
(J6)  the same with k = 1, 5, 10, 20, 50, 100 and the companion metrics;
(P)   ``benchmarks/ranking_evaluator_job.py``: top-10 window, arrays per user, join,
      ``RankingEvaluator(metricName="ndcgAtK", k=10)``, the mean written as JSON.

Prints the median wall time and peak memory (the largest sum of the resident set sizes of the
process and its children, the JVM included, sampled every 50 ms) of each, and the ratios J/P
and J6/P of the medians. The data comes from ``benchmarks/bench.py``'s generator (reused when
present under ``--data-dir``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
TARGETS = {"J/P": 1.10, "J6/P": 1.25}


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--users", type=int, default=200_000)
    p.add_argument("--list-length", type=int, default=50, help="recommendations per user")
    p.add_argument("--relevant", type=int, default=20, help="relevance rows per user (grades 0..4)")
    p.add_argument("--repeat", type=int, default=5, help="rounds; each runs J, J6 and P once")
    p.add_argument("--master", default="local[2]")
    p.add_argument("--data-dir", default="/tmp/ndcg-bench")
    p.add_argument("--work-dir", default="/tmp/ndcg-bench-job", help="the runs' outputs (replaced)")
    p.add_argument("--json", default=None, help="also write every figure as JSON to this path")
    p.add_argument("--generate-only", action="store_true", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def generate(args) -> Dict[str, str]:
    """The bench data's paths, generated in a Spark of its own (this process stays JVM-free)."""
    sys.path.insert(0, str(HERE))
    import bench

    spec = bench.DataSpec(args.users, args.list_length, args.relevant)
    root = Path(args.data_dir) / spec.name
    if not ((root / "recs" / "_SUCCESS").exists() and (root / "rel" / "_SUCCESS").exists()):
        cmd = [sys.executable, __file__, "--generate-only", *sys.argv[1:]]
        subprocess.run(cmd, check=True, env={**os.environ, "PYSPARK_PYTHON": sys.executable})
    return {"recs": str(root / "recs"), "rel": str(root / "rel")}


def generate_here(args) -> None:
    sys.path.insert(0, str(HERE))
    import bench
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.master(args.master).config("spark.ui.enabled", "false").getOrCreate()
    try:
        spec = bench.DataSpec(args.users, args.list_length, args.relevant)
        bench.generate(spark, spec, Path(args.data_dir), lambda m: print(m, file=sys.stderr))
    finally:
        spark.stop()


def process_tree(root: int) -> Dict[int, Tuple[int, float]]:
    """``{pid: (resident bytes, CPU seconds so far)}`` of ``root`` and every process below it, from /proc."""
    parents: Dict[int, int] = {}
    rss: Dict[int, int] = {}
    cpu: Dict[int, float] = {}
    ticks = os.sysconf("SC_CLK_TCK")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        cpu[int(entry)] = (int(fields[11]) + int(fields[12])) / ticks
    tree, stack = {}, [root]
    while stack:
        pid = stack.pop()
        if pid in rss:
            tree[pid] = (rss[pid], cpu[pid])
        stack.extend(child for child, parent in parents.items() if parent == pid)
    return tree


def timed(cmd: List[str], log_path: Path) -> Tuple[float, int, float]:
    """Run ``cmd`` to the end: (wall seconds, peak resident bytes of its process tree, its CPU
    seconds as last sampled; less sensitive than wall time to other load on the machine)."""
    peak = [0]
    cpu: Dict[int, float] = {}
    with open(log_path, "w") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYSPARK_PYTHON": sys.executable}
        )
        done = threading.Event()

        def sample() -> None:
            while not done.wait(0.05):
                tree = process_tree(proc.pid)
                peak[0] = max(peak[0], sum(rss for rss, _ in tree.values()))
                cpu.update({pid: seconds for pid, (_, seconds) in tree.items()})

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        code = proc.wait()
        elapsed = time.perf_counter() - started
        done.set()
        sampler.join()
    if code != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {code}; see {log_path}")
    return elapsed, peak[0], sum(cpu.values())


def commands(args, paths: Dict[str, str], work: Path) -> Dict[str, Tuple[List[str], Path]]:
    job = [sys.executable, "-m", "ndcg_spark", "--recommendations", paths["recs"], "--relevance", paths["rel"]]
    job += ["--master", args.master]
    return {
        "J": ([*job, "--k", "10", "--output", str(work / "J")], work / "J"),
        "J6": (
            [*job, "--k", "1,5,10,20,50,100", "--companion-metrics", "true", "--output", str(work / "J6")],
            work / "J6",
        ),
        "P": (
            [
                sys.executable,
                str(HERE / "ranking_evaluator_job.py"),
                paths["recs"],
                paths["rel"],
                str(work / "P.json"),
                "--master",
                args.master,
            ],
            work / "P.json",
        ),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.generate_only:
        generate_here(args)
        return 0
    paths = generate(args)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    runs = commands(args, paths, work)
    times: Dict[str, List[float]] = {name: [] for name in runs}
    peaks: Dict[str, List[int]] = {name: [] for name in runs}
    cpus: Dict[str, List[float]] = {name: [] for name in runs}
    print(
        f"machine: {os.cpu_count()} cpus, {args.master}; data {args.users} users x {args.list_length} "
        f"recommendations, {args.relevant} relevance rows per user; {args.repeat} rounds",
        flush=True,
    )
    for round_ in range(args.repeat):
        order = ["J", "P", "J6"] if round_ % 2 == 0 else ["J6", "P", "J"]
        for name in order:
            cmd, output = runs[name]
            shutil.rmtree(output, ignore_errors=True) if output.is_dir() else output.unlink(missing_ok=True)
            elapsed, peak, cpu = timed(cmd, work / f"{name}.log")
            times[name].append(elapsed)
            peaks[name].append(peak)
            cpus[name].append(cpu)
            print(
                f"round {round_ + 1}/{args.repeat} {name:>2}: {elapsed:6.2f} s, CPU {cpu:6.2f} s, peak {peak / 2**20:6.0f} MB",
                flush=True,
            )
    medians = {name: statistics.median(t) for name, t in times.items()}
    for name in runs:
        print(
            f"{name:>2}: median {medians[name]:6.2f} s (min {min(times[name]):.2f}, max {max(times[name]):.2f}), "
            f"CPU median {statistics.median(cpus[name]):.2f} s, peak memory median {statistics.median(peaks[name]) / 2**20:.0f} MB"
        )
    cpu_medians = {name: statistics.median(c) for name, c in cpus.items()}
    ratios = {"J/P": medians["J"] / medians["P"], "J6/P": medians["J6"] / medians["P"]}
    for name, value in ratios.items():
        verdict = "MET" if value <= TARGETS[name] else "NOT MET"
        cpu_ratio = cpu_medians[name.split("/")[0]] / cpu_medians["P"]
        print(f"ratio {name:<5} = {value:.3f} (target <= {TARGETS[name]:.2f}) {verdict} (CPU ratio {cpu_ratio:.3f})")
    if args.json:
        record = {
            "args": vars(args),
            "times": times,
            "cpu_seconds": cpus,
            "peak_bytes": peaks,
            "medians": medians,
            "ratios": ratios,
        }
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
