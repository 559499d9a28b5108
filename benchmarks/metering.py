"""The benchmarks' measuring: wall, CPU, task CPU, shuffle, spill and plan nodes.

Two ways, one per script:

* in one warm Spark session (``benchmarks/bench.py``): :func:`session` (a driver heap fixed at
  its size), :func:`time_variants` (round-robin rounds of callables, each run after a full GC,
  with the JVM's CPU time from /proc and Spark's task figures from its status store,
  :class:`StageMeter`);
* as whole processes (``benchmarks/job.py``): :func:`timed` (wall time, CPU time and peak
  memory of a process tree, sampled from /proc), and Spark's own event log of the run
  (:func:`event_log_conf`, then :func:`spark_figures`: task CPU, shuffle bytes, spill, the
  shuffles that ran, and the executed plans' ``Exchange``, ``Sort`` and ``Generate`` nodes).

Task CPU (the CPU time of Spark's task threads) moves little with other load on the machine,
unlike wall time; shuffle bytes, spill and plan nodes do not move with it at all.
"""

from __future__ import annotations

import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

# In one warm session


def session(args):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    import ndcg_spark

    log4j = Path(ndcg_spark.__file__).with_name("log4j2.properties")
    java_options = jvm_options(args)
    if log4j.exists():
        java_options.append(f"-Dlog4j2.configurationFile=file:{log4j}")
    builder = (
        SparkSession.builder.master(args.master)
        .appName("ndcg-spark-bench")
        .config("spark.driver.memory", args.driver_memory)
        .config("spark.driver.extraJavaOptions", " ".join(java_options))
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(args.shuffle_partitions))
        .config("spark.default.parallelism", str(args.shuffle_partitions))
    )
    return builder.getOrCreate()


def session_machine(spark, args) -> dict:
    """The machine and the session's settings as run (printed, and returned for the JSON record)."""
    m = {
        **machine(),
        "spark": spark.version,
        "master": args.master,
        "driver_memory": args.driver_memory,
        "shuffle_partitions": args.shuffle_partitions,
        "jvm_heap_arguments": jvm_heap_arguments(spark),
        "java": spark._jvm.System.getProperty("java.version"),
    }
    print(
        f"machine: {m.get('cpus')} cpus ({m.get('cpu', '?')}), {m.get('memory_gb', '?')} GB RAM, Java {m['java']},"
        f" Spark {m['spark']} {args.master}, driver memory {args.driver_memory}"
        f" (JVM {' '.join(m['jvm_heap_arguments'])}), shuffle partitions {args.shuffle_partitions}"
    )
    return m


def jvm_options(args) -> List[str]:
    """JVM flags of the benchmark's Spark driver (the heap size itself is ``spark.driver.memory``).

    The heap is fixed at the driver memory (``-Xms`` = ``-Xmx``). Every timed run starts with a
    full GC (so one variant's garbage is not collected on the next one's time), and G1 shrinks
    the heap after a full GC: measured on the main table, it fell to about 290 MB, and every
    64 MB page Spark's sorts and aggregations then allocate (a G1 humongous object) started a
    concurrent mark cycle, about 20 per run, which kept a GC thread busy for 4 of the run's
    ~20 CPU seconds and added 0.5-0.8 s of pauses. With the heap fixed, none ran. ``--no-fixed-heap``
    measures the other way.
    """
    return [] if args.no_fixed_heap else [f"-Xms{args.driver_memory}"]


def jvm_heap_arguments(spark) -> List[str]:
    """The heap flags the driver JVM was actually started with (``-Xms``/``-Xmx``), as it reports them."""
    arguments = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments()
    return [str(a) for a in arguments if str(a).startswith(("-Xms", "-Xmx"))]


def time_variants(
    spark, variants: Dict[str, Callable[[], object]], repeat: int, log, warmup: int = 1
) -> Dict[str, dict]:
    """``warmup`` untimed runs each, then ``repeat`` round-robin rounds; per-variant samples and median."""
    results: Dict[str, dict] = {name: {"samples": [], "check": None, "warmup": None} for name in variants}
    for name, fn in variants.items() if warmup else ():
        started = time.perf_counter()
        results[name]["check"] = fn()
        results[name]["warmup"] = time.perf_counter() - started
        log(f"warm-up {name}: {results[name]['warmup']:.2f}s  {results[name]['check']}")
    for _ in range(warmup - 1):
        for fn in variants.values():
            fn()
    jvm_pid = spark._jvm.ProcessHandle.current().pid()
    meter = StageMeter(spark)
    for res in results.values():
        res["cpu_samples"], res["loadavg_1m"], res["task_samples"] = [], [], []
    for round_ in range(repeat):
        for name, fn in variants.items():
            spark._jvm.System.gc()
            meter.since_last()
            cpu0, started = jvm_cpu_seconds(jvm_pid), time.perf_counter()
            check = fn()
            elapsed, cpu = time.perf_counter() - started, jvm_cpu_seconds(jvm_pid) - cpu0
            tasks = meter.since_last()
            load = os.getloadavg()[0]
            results[name]["samples"].append(elapsed)
            results[name]["cpu_samples"].append(cpu)
            results[name]["task_samples"].append(tasks)
            results[name]["loadavg_1m"].append(load)
            results[name]["check"] = results[name]["check"] or check
            log(
                f"round {round_ + 1}/{repeat} {name}: {elapsed:.2f}s wall, {cpu:.2f}s JVM CPU, "
                f"{tasks['task_cpu']:.2f}s task CPU ({tasks['stages']} stages), shuffle "
                f"{tasks['shuffle_write_mb']:.1f} MB in {tasks['shuffle_stages']} stages, spill {tasks['spill_mb']:.1f} MB, "
                f"load {load:.2f}"
            )
    for res in results.values():
        res["median"] = statistics.median(res["samples"])
        res["min"] = min(res["samples"])
        res["max"] = max(res["samples"])
        res["cpu_median"] = statistics.median(res["cpu_samples"])
        res["task_cpu_median"] = statistics.median(t["task_cpu"] for t in res["task_samples"])
    return results


class StageMeter:
    """Spark's own task metrics of the stages that ran since the last call (from the status store).

    ``task_cpu`` is the CPU time of the task threads (executorCpuTime), which other processes
    competing for the cores hardly inflate, unlike wall time; ``task_run`` is their run time.
    The shuffle bytes written, the bytes spilled and the stages that wrote a shuffle do not move
    with the machine's load at all.
    """

    def __init__(self, spark):
        self._sc = spark.sparkContext._jsc.sc()
        gateway = spark.sparkContext._gateway
        self._no_quantiles = gateway.new_array(gateway.jvm.double, 0)
        self._seen = set(self._stages())

    def _stages(self) -> Dict[int, object]:
        try:
            self._sc.listenerBus().waitUntilEmpty()
        except Exception:  # noqa: BLE001 - best effort; the figures may then miss the last stage
            pass
        stages = self._sc.statusStore().stageList(None, False, False, self._no_quantiles, None)
        found = {}
        for i in range(stages.size()):
            stage = stages.apply(i)
            found[(stage.stageId(), stage.attemptId())] = stage
        return found

    def since_last(self) -> dict:
        stages = self._stages()
        new = [st for key, st in stages.items() if key not in self._seen]
        self._seen.update(stages)
        return {
            "stages": sum(1 for st in new if st.status().toString() == "COMPLETE"),
            "tasks": sum(st.numCompleteTasks() for st in new),
            "task_cpu": sum(st.executorCpuTime() for st in new) / 1e9,
            "task_run": sum(st.executorRunTime() for st in new) / 1e3,
            "gc": sum(st.jvmGcTime() for st in new) / 1e3,
            "shuffle_write_mb": sum(st.shuffleWriteBytes() for st in new) / 2**20,
            "spill_mb": sum(st.memoryBytesSpilled() + st.diskBytesSpilled() for st in new) / 2**20,
            "shuffle_stages": sum(1 for st in new if st.shuffleWriteBytes() > 0),
        }


def jvm_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the Spark JVM so far (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def library_version() -> dict:
    """Where ``ndcg_spark`` was imported from and a hash of its sources (it may be edited between runs)."""
    import hashlib

    import ndcg_spark

    root = Path(ndcg_spark.__file__).parent
    digest = hashlib.sha256()
    for source in sorted(root.glob("*.py")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    return {"path": str(root), "sources_sha256": digest.hexdigest()[:12], "version": ndcg_spark.__version__}


def machine() -> dict:
    info = {"python": sys.version.split()[0], "platform": platform.platform(), "cpus": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                info["memory_gb"] = round(int(line.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    return info


# Whole processes and their event logs


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


def timed(cmd: List[str], log_path: Path, env: Optional[Dict[str, str]] = None) -> Tuple[float, int, float]:
    """Run ``cmd`` to the end: (wall seconds, peak resident bytes of its process tree, its CPU
    seconds as last sampled; less sensitive than wall time to other load on the machine).
    ``env``: variables set for the run, over this process's."""
    peak = [0]
    cpu: Dict[int, float] = {}
    with open(log_path, "w") as log:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYSPARK_PYTHON": sys.executable, **(env or {})},
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


#: The plan nodes counted in the executed plans.
NODES = ("Exchange", "Sort", "Generate")


def event_log_conf(work: Path, name: str) -> Tuple[Dict[str, str], Path]:
    """(environment, event log folder) for one run: a ``spark-defaults.conf`` of its own that
    writes Spark's event log, uncompressed, to a fresh folder (``SPARK_CONF_DIR``)."""
    conf, logs = work / f"conf-{name}", work / f"events-{name}"
    shutil.rmtree(conf, ignore_errors=True)
    shutil.rmtree(logs, ignore_errors=True)
    conf.mkdir(parents=True)
    logs.mkdir(parents=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.eventLog.enabled true\nspark.eventLog.dir file://{logs}\nspark.eventLog.compress false\n"
    )
    return {"SPARK_CONF_DIR": str(conf)}, logs


def plan_nodes(info: dict, seen: Dict[str, set]) -> None:
    """Add the nodes of a plan (``sparkPlanInfo`` of the event log) named in ``NODES`` to ``seen``.

    A node is known by its metrics' accumulators, which are the physical node's own: a cached
    table's plan, shown again under every query that reads the cache, is counted once.
    """
    name = info.get("nodeName", "")
    if name in seen:
        ids = tuple(sorted(m["accumulatorId"] for m in info.get("metrics", ())))
        seen[name].add(ids or id(info))
    for child in info.get("children", ()):
        plan_nodes(child, seen)


def events(logs: Path) -> Iterator[dict]:
    """Every event of a run's event log in ``logs``, in order."""
    # Spark 4 writes a folder of rolled files (``eventlog_v2_*/events_*``), Spark 3.5 one file.
    files = [p for p in logs.rglob("*") if p.is_file() and p.name.startswith(("events_", "local-", "app-"))]
    for path in sorted(files, key=lambda p: int(p.name.split("_")[1]) if p.name.startswith("events_") else 0):
        with open(path) as lines:
            for line in lines:
                yield json.loads(line)


def spark_figures(logs: Path) -> Dict[str, float]:
    """The deterministic figures of one run, from its event log (see the module).

    Task figures are summed over every task that ended (``SparkListenerTaskEnd``), and the
    stages that wrote shuffle data are counted (``shuffle_stages``: the shuffles that ran). A SQL
    execution's plan is its last adaptive update, else its plan at the start; each physical
    node is counted once however many executions show it (:func:`plan_nodes`).
    """
    figures = {"shuffle_bytes": 0, "spill_bytes": 0, "task_cpu_seconds": 0.0, "sql_executions": 0}
    plans: Dict[int, dict] = {}
    writing = set()
    for event in events(logs):
        kind = event.get("Event", "")
        if kind == "SparkListenerTaskEnd":
            metrics = event.get("Task Metrics") or {}
            figures["shuffle_bytes"] += (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
            figures["spill_bytes"] += metrics.get("Memory Bytes Spilled", 0) + metrics.get("Disk Bytes Spilled", 0)
            figures["task_cpu_seconds"] += metrics.get("Executor CPU Time", 0) / 1e9
            if (metrics.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0):
                writing.add(event["Stage ID"])
        elif kind.endswith("SparkListenerSQLExecutionStart") or kind.endswith(
            "SparkListenerSQLAdaptiveExecutionUpdate"
        ):
            plans[event["executionId"]] = event["sparkPlanInfo"]
    seen: Dict[str, set] = {name: set() for name in NODES}
    for info in plans.values():
        plan_nodes(info, seen)
    counts = {name: len(nodes) for name, nodes in seen.items()}
    figures["sql_executions"] = len(plans)
    # The shuffles that ran, however they were planned (RankingEvaluator's own run on an RDD
    # has no SQL plan): the stages whose tasks wrote shuffle data.
    figures["shuffle_stages"] = len(writing)
    figures.update({name.lower() + "_nodes": n for name, n in counts.items()})
    return figures


# Ratios


def line_fit(xs: Sequence[float], ys: Sequence[float]) -> Tuple[float, float]:
    """Least-squares ``y = a + b x``: (a, b). Two points or more, not all at one x.

    >>> line_fit([1, 2, 3], [3, 5, 7])
    (1.0, 2.0)
    """
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    return my - b * mx, b


def growth_per_doubling(rows: Sequence[float], seconds: Sequence[float]) -> float:
    """Time(2N)/time(N) from the smallest and the largest size: 2 when time grows as the rows.

    >>> growth_per_doubling([100, 400], [10, 40])
    2.0
    """
    return (seconds[-1] / seconds[0]) ** (1 / math.log2(rows[-1] / rows[0]))


def ratio_line(name: str, value: float, target: float) -> str:
    verdict = "MET" if value <= target else "NOT MET"
    return f"ratio {name:<14} = {value:6.3f}   (target <= {target})   {verdict}"
