"""The job's fixed cost per run (planning, small Spark jobs, commits) against the hand-written job's.

    python benchmarks/fixed.py                              # 1,000 and 100,000 users, 3 rounds
    python benchmarks/fixed.py --sizes 1000 --repeat 1 --no-warm

Whole processes (a cold JVM each, ``local[2]``), interleaved as pairs so that drift in the
machine's speed hits each alike (J, P, JD, P; the next round in reverse):

(J)   ``ndcg-spark --k 10 --report false``, a folder output (a default run);
(JD)  a dated run with report, gates and history: ``--run-date``, ``--fail-below 10:0.01``,
      ``--fail-if-drop 10:50%`` against an earlier night written once before the rounds, the
      report's trend reading it;
(P)   ``benchmarks/ranking_evaluator_job.py``, the hand-written ``RankingEvaluator`` job.

For each run, from Spark's own event log (``spark.eventLog.enabled``, through a
``spark-defaults.conf`` of the run's own, :func:`metering.event_log_conf`):

* ``jobs``: the Spark jobs of the run, one per ``SparkListenerJobStart`` event (with adaptive
  execution each query stage that runs is a job of its own; the schema reads are jobs too);
* ``before``: the driver's time between reading the schemas (the end of the last job that
  starts before any job reads rows) and the start of the first job whose tasks read input rows
  (``Input Metrics`` records > 0): analysing, optimising and planning the computation;
* ``after``: from the end of the last heavy job (a job whose tasks ran at least 20% of the
  longest job's task time) to the application's end: small jobs, commits, the driver's tail;
* ``app``: the application's time (application start to end events; a process that exits
  before Spark logs its end: to the last job's end), ``wall`` the process's;
* ``task CPU``: the CPU time of every task (``metering.spark_figures``);
* ``py4j``: the Python-to-JVM calls of the driver (py4j's ``send_command`` counted through a
  ``sitecustomize`` on the run's ``PYTHONPATH``; neither job is changed).

Then the warm session (``--no-warm`` to skip): one Spark session, the job's entry point
(``ndcg_spark.job.cli.run``, as ``jobs/evaluate_ndcg.py`` calls it) on 1,000 users against the
hand-written job's body (:func:`ranking_evaluator_job.evaluate_and_write`) in the same session,
round-robin after a warm-up of each; the medians of their wall times, their CPU times (the
JVM's threads and the Python driver's: other load on the machine moves them less), their Spark
jobs and Py4J calls. The package measured is the one the runs import: ``python -m ndcg_spark`` puts the current
directory first (so run from the checkout to measure), the warm session ``PYTHONPATH`` then the
installed one. The data comes from ``benchmarks/datagen.py`` (through ``benchmarks/job.py``'s
``generate``), the process measurements from ``benchmarks/metering.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Dict, List, Tuple

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import job as job_benchmark  # noqa: E402  (its data generation)
import metering  # noqa: E402
from metering import event_log_conf, jvm_cpu_seconds, spark_figures, timed  # noqa: E402

#: A heavy job ran at least this share of the longest job's task time.
HEAVY_SHARE = 0.2
RUNS = ("J", "P", "JD")
FIGURES = ("wall", "app", "jobs", "before", "after", "task_cpu", "py4j")
DATE, EARLIER = "2026-11-21", "2026-11-20"


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", default="1000,100000", help="users, comma-separated")
    p.add_argument("--repeat", type=int, default=3, help="rounds of whole processes")
    p.add_argument("--runs", default=",".join(RUNS), help="of J, P, JD")
    p.add_argument("--warm-repeat", type=int, default=5, help="rounds in the warm session (0: none)")
    p.add_argument("--no-warm", action="store_true", help="skip the warm session")
    job_benchmark.add_data_arguments(p, work_dir="/tmp/ndcg-bench-fixed")
    return p.parse_args(argv)


# Counting Py4J calls


def count_py4j_calls(path: str = None) -> Dict[str, int]:
    """Count every Python -> JVM call of this process (py4j's ``send_command``), in the returned
    dict's ``"calls"``; with ``path``, write the count there as the process exits."""
    import atexit

    from py4j import clientserver, java_gateway

    counter = {"calls": 0}
    for cls in (clientserver.ClientServerConnection, java_gateway.GatewayConnection):
        original = cls.send_command

        def send_command(self, command, *rest, _original=original, **kw):
            counter["calls"] += 1
            return _original(self, command, *rest, **kw)

        cls.send_command = send_command
    if path:
        atexit.register(lambda: counter["calls"] and Path(path).write_text(str(counter["calls"])))
    return counter


SITECUSTOMIZE = f"""import os, sys
if os.environ.get("NDCG_FIXED_PY4J") and "pyspark.daemon" not in " ".join(sys.argv):
    sys.path.insert(0, {str(HERE)!r})
    try:
        import fixed
        fixed.count_py4j_calls(os.environ["NDCG_FIXED_PY4J"] + "." + str(os.getpid()))
    finally:
        sys.path.remove({str(HERE)!r})
"""


def py4j_env(work: Path, name: str) -> Tuple[Dict[str, str], Path]:
    """(environment, counts prefix): a ``sitecustomize`` on the run's ``PYTHONPATH`` that counts its calls."""
    hook = work / "py4j-hook"
    hook.mkdir(parents=True, exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    prefix = work / f"py4j-{name}"
    for old in work.glob(f"py4j-{name}.*"):
        old.unlink()
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "NDCG_FIXED_PY4J": str(prefix)}, prefix


def py4j_calls(prefix: Path) -> int:
    return sum(int(p.read_text()) for p in prefix.parent.glob(prefix.name + ".*"))


# The event log's timeline


def timeline(logs: Path) -> Dict[str, float]:
    """Jobs, ``before``, ``after`` and ``app`` of one run (seconds), from its event log (see the module)."""
    jobs: Dict[int, dict] = {}
    stage_job: Dict[int, int] = {}
    app = {}
    for event in metering.events(logs):
        kind = event.get("Event", "")
        if kind == "SparkListenerApplicationStart":
            app["start"] = event["Timestamp"]
        elif kind == "SparkListenerApplicationEnd":
            app["end"] = event["Timestamp"]
        elif kind == "SparkListenerJobStart":
            jobs[event["Job ID"]] = {"start": event["Submission Time"], "rows": 0, "run": 0}
            for stage in event["Stage IDs"]:
                stage_job[stage] = event["Job ID"]
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]]["end"] = event["Completion Time"]
        elif kind == "SparkListenerTaskEnd":
            job = jobs.get(stage_job.get(event["Stage ID"]))
            metrics = event.get("Task Metrics") or {}
            if job is not None:
                job["rows"] += (metrics.get("Input Metrics") or {}).get("Records Read", 0)
                job["run"] += metrics.get("Executor Run Time", 0)
    # A process that exits without stopping its session may end before Spark logs the
    # application's end: then the last event logged (a job's end) stands for it.
    app.setdefault("end", max((j.get("end", j["start"]) for j in jobs.values()), default=app["start"]))
    ordered = sorted(jobs.values(), key=lambda j: j["start"])
    reading = [j for j in ordered if j["rows"] > 0]
    first = reading[0]["start"] if reading else app["end"]
    schemas = [j["end"] for j in ordered if j["start"] < first and "end" in j]
    longest = max((j["run"] for j in ordered), default=0)
    heavy = [j["end"] for j in ordered if j["run"] >= HEAVY_SHARE * longest and "end" in j]
    return {
        "jobs": len(jobs),
        "before": (first - max(schemas, default=app["start"])) / 1e3,
        "after": (app["end"] - max(heavy, default=app["end"])) / 1e3,
        "app": (app["end"] - app["start"]) / 1e3,
    }


# Whole processes


def commands(args, paths: Dict[str, str], work: Path, label: str) -> Dict[str, Tuple[List[str], Path]]:
    job = [sys.executable, "-m", "ndcg_spark", "--recommendations", paths["recs"], "--relevance", paths["rel"]]
    job += ["--master", args.master, "--k", "10", "--quiet"]
    dated = [*job, "--output", str(work / f"JD-{label}"), "--fail-below", "10:0.01", "--fail-if-drop", "10:50%"]
    p_out = work / f"P-{label}.json"
    return {
        "J": ([*job, "--report", "false", "--output", str(work / f"J-{label}")], work / f"J-{label}"),
        "JD": ([*dated, "--run-date", DATE], None),
        "JD0": ([*dated, "--run-date", EARLIER], None),
        "P": ([sys.executable, str(HERE / "ranking_evaluator_job.py"), paths["recs"], paths["rel"], str(p_out)], p_out),
    }


def one_process(cmd: List[str], work: Path, name: str) -> Dict[str, float]:
    env, logs = event_log_conf(work, name)
    hook, prefix = py4j_env(work, name)
    elapsed, _, _ = timed(cmd, work / f"{name}.log", {**env, **hook})
    return {
        "wall": elapsed,
        **timeline(logs),
        "task_cpu": spark_figures(logs)["task_cpu_seconds"],
        "py4j": py4j_calls(prefix),
    }


def processes(args, paths, work: Path, labels: List[str], runs: List[str]) -> Dict[Tuple[str, str], Dict[str, list]]:
    figures: Dict[Tuple[str, str], Dict[str, list]] = {}
    if "JD" in runs:
        for label in labels:  # the earlier night the drop gate and the trend read
            shutil.rmtree(work / f"JD-{label}", ignore_errors=True)
            one_process(commands(args, paths[label], work, label)["JD0"][0], work, f"JD0-{label}")
    # Pairs: each run of the job next to a run of the hand-written job.
    pairs = [r for r in runs if r != "P"]
    order = [x for r in pairs for x in (r, "P")] if "P" in runs else pairs
    order = order or ["P"]
    for round_ in range(args.repeat):
        for label in labels if round_ % 2 == 0 else list(reversed(labels)):
            for run in order if round_ % 2 == 0 else list(reversed(order)):
                cmd, output = commands(args, paths[label], work, label)[run]
                if output is not None:
                    shutil.rmtree(output, ignore_errors=True) if output.is_dir() else output.unlink(missing_ok=True)
                got = one_process(cmd, work, f"{run}-{label}")
                got["load"] = os.getloadavg()[0]
                f = figures.setdefault((label, run), {})
                for name, value in got.items():
                    f.setdefault(name, []).append(value)
                print(
                    f"round {round_ + 1}/{args.repeat} {label:>7} {run:>2}: wall {got['wall']:6.2f} s, app "
                    f"{got['app']:6.2f} s, {got['jobs']:2d} jobs, before {got['before']:5.2f} s, after "
                    f"{got['after']:5.2f} s, task CPU {got['task_cpu']:6.2f} s, {got['py4j']:5d} Py4J calls, "
                    f"load {got['load']:.1f}",
                    flush=True,
                )
    return figures


# The warm session


def warm(args, paths: Dict[str, str], work: Path) -> Dict[str, dict]:
    """The job's entry point against the hand-written job's body, in one session, on ``paths``."""
    import ranking_evaluator_job
    from metering import session

    from ndcg_spark.job import cli

    counter = count_py4j_calls()
    settings = argparse.Namespace(
        master=args.master, driver_memory="2g", no_fixed_heap=True, shuffle_partitions=200
    )  # Spark's default partitions, as the job's own session has
    spark = session(settings)
    tracker = spark.sparkContext.statusTracker()
    out = work / "warm"
    argv = ["--recommendations", paths["recs"], "--relevance", paths["rel"], "--k", "10", "--report", "false"]
    argv += ["--quiet", "--output"]

    def job() -> None:
        shutil.rmtree(out, ignore_errors=True)
        with contextlib.redirect_stdout(io.StringIO()):
            code = cli.run([*argv, str(out)])
        if code != 0:
            raise SystemExit("the job failed in the warm session")

    def hand() -> None:
        ranking_evaluator_job.evaluate_and_write(spark, paths["recs"], paths["rel"], str(work / "warm-P.json"))

    variants = {"J": job, "P": hand}
    results = {name: {"wall": [], "cpu": [], "jobs": [], "py4j": []} for name in variants}
    jvm = spark._jvm.ProcessHandle.current().pid()
    for fn in variants.values():
        fn()
    for round_ in range(args.warm_repeat):
        for name, fn in variants.items() if round_ % 2 == 0 else reversed(list(variants.items())):
            spark._jvm.System.gc()
            jobs0, calls0 = len(tracker.getJobIdsForGroup(None)), counter["calls"]
            cpu0, started = jvm_cpu_seconds(jvm) + time.process_time(), time.perf_counter()
            fn()
            elapsed = time.perf_counter() - started
            cpu = jvm_cpu_seconds(jvm) + time.process_time() - cpu0
            jobs = len(tracker.getJobIdsForGroup(None)) - jobs0
            calls = counter["calls"] - calls0 - 2  # less this measuring's own two calls
            for key, value in (("wall", elapsed), ("cpu", cpu), ("jobs", jobs), ("py4j", calls)):
                results[name][key].append(value)
            print(
                f"warm round {round_ + 1}/{args.warm_repeat} {name}: {elapsed:5.2f} s, CPU {cpu:5.2f} s "
                f"(JVM and Python), {jobs} jobs, {calls} Py4J calls"
            )
    spark.stop()
    return results


def main(argv=None) -> int:
    args = parse_args(argv)
    args.sizes_list = sorted(int(n) for n in args.sizes.split(","))
    gen = argparse.Namespace(
        sizes=args.sizes, list_length=args.list_length, relevant=args.relevant, skew_at=0,
        master=args.master, data_dir=args.data_dir,
    )  # fmt: skip
    paths = job_benchmark.generate(gen)
    work = Path(args.work_dir)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    labels = [str(n) for n in args.sizes_list]
    runs = [r for r in args.runs.split(",") if r]
    print(f"machine: {os.cpu_count()} cpus, {args.master}; {args.repeat} rounds; load {os.getloadavg()[0]:.1f}")
    figures = processes(args, paths, work, labels, runs) if args.repeat else {}
    lines = report(figures, labels)
    warm_results = None
    if not args.no_warm and args.warm_repeat:
        warm_results = warm(args, paths[labels[0]], work)
        med = {n: {k: statistics.median(v) for k, v in r.items()} for n, r in warm_results.items()}
        lines.append(
            f"warm session at {labels[0]} users: J {med['J']['wall']:.2f} s ({med['J']['jobs']:.0f} jobs, "
            f"{med['J']['py4j']:.0f} Py4J calls), P {med['P']['wall']:.2f} s ({med['P']['jobs']:.0f} jobs, "
            f"{med['P']['py4j']:.0f} Py4J calls); J/P = {med['J']['wall'] / med['P']['wall']:.2f}, "
            f"in CPU (the JVM's and Python's) {med['J']['cpu'] / med['P']['cpu']:.2f}"
        )
    print()
    print("\n".join(lines))
    if args.json:
        record = {
            "args": {k: v for k, v in vars(args).items()},
            "runs": {f"{run}@{label}": f for (label, run), f in figures.items()},
            "warm": warm_results,
        }
        Path(args.json).write_text(json.dumps(record, indent=2))
    return 0


def report(figures, labels: List[str]) -> List[str]:
    """Medians per size and run, and the job's runs against P's (differences and ratios)."""
    lines = [
        f"{'users':>7} {'run':>3} {'wall s':>7} {'app s':>6} {'jobs':>5} {'before s':>8} {'after s':>7} "
        f"{'task CPU s':>10} {'Py4J':>6} {'load':>5}  (medians)"
    ]
    med = {key: {m: statistics.median(v) for m, v in f.items()} for key, f in figures.items()}
    for label in labels:
        for run in RUNS:
            m = med.get((label, run))
            if m:
                lines.append(
                    f"{label:>7} {run:>3} {m['wall']:7.2f} {m['app']:6.2f} {m['jobs']:5.0f} {m['before']:8.2f} "
                    f"{m['after']:7.2f} {m['task_cpu']:10.2f} {m['py4j']:6.0f} {m['load']:5.1f}"
                )
    for label in labels:
        p = figures.get((label, "P"))
        for run in ("J", "JD"):
            j = figures.get((label, run))
            if not (p and j):
                continue
            pairs = [a / b for a, b in zip(j["wall"], p["wall"])]
            m, mp = med[(label, run)], med[(label, "P")]
            lines.append(
                f"{run}/P at {label} users: wall {statistics.median(pairs):.2f} (median of {len(pairs)} pairs), "
                f"task CPU {m['task_cpu'] / mp['task_cpu']:.2f}; jobs {m['jobs']:.0f} vs {mp['jobs']:.0f}, "
                f"before {m['before'] - mp['before']:+.2f} s, after {m['after'] - mp['after']:+.2f} s"
            )
    return lines


if __name__ == "__main__":
    sys.exit(main())
