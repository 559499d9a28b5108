"""The benchmark scripts run end to end at a tiny size (no timing assertions).

Each script starts whole Spark processes, so its time is mostly JVM start-up: a few tens of
seconds alone, several minutes on a loaded machine. The scripts share one generated data set
(the generator reuses a directory holding the same parameters), and the timeout only guards
against a hang, never against a slow machine.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"
TIMELINE = BENCH.parent / "timeline.py"
#: The tiny data set every script below reads (and the first one generates).
DATA = ["--users", "100", "--list-length", "8", "--relevant", "4"]
#: The session settings of the scripts that take them.
TINY = ["--repeat", "1", "--warmup", "0", "--shuffle-partitions", "2", "--driver-memory", "1g"]
#: Seconds before a script is taken to hang: far beyond any run, so a loaded machine cannot fail it.
HANG = 3600


@pytest.fixture(scope="module")
def bench_data(tmp_path_factory) -> Path:
    """One data directory for the module: generated once, reused by every script."""
    return tmp_path_factory.mktemp("bench-data")


def run_script(script: Path, *args: str) -> subprocess.CompletedProcess:
    """Run a benchmark script in its own Python and Spark; it must exit 0."""
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=HANG, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"
    return proc


@pytest.mark.bench
def test_benchmark_script_runs_and_prints_ratios(tmp_path, bench_data):
    out_json = tmp_path / "bench.json"
    proc = run_script(BENCH, *DATA, *TINY, "--data-dir", str(bench_data), "--json", str(out_json))

    ratio_lines = [line for line in proc.stdout.splitlines() if line.startswith("ratio ")]
    for name in ("b/d", "c/b100", "b/a"):
        assert any(line.split()[1] == name for line in ratio_lines), proc.stdout
    for line in ratio_lines:
        # Whatever the ratios are at this size, each verdict must agree with its value and target.
        found = re.match(r"ratio (\S+)\s+=\s+([\d.]+|nan)\s+\(target <= ([\d.]+)\)\s+(MET|NOT MET)\b", line)
        assert found, line
        value, target, verdict = float(found.group(2)), float(found.group(3)), found.group(4)
        # The value is printed to 3 decimals: one printed equal to its target may be either side of it.
        assert verdict == ("MET" if value <= target else "NOT MET") or abs(value - target) < 5e-4, line

    report = json.loads(out_json.read_text())
    # The driver JVM really started with its heap fixed at the driver memory (see bench.jvm_options).
    assert sorted(report["machine"]["jvm_heap_arguments"]) == ["-Xms1g", "-Xmx1g"]
    results = report["main"]
    assert set(results["results"]) == {"a", "b", "b100", "c", "d"}
    assert results["recommendation_rows"] == 800 and results["relevance_rows"] == 400
    # The floor saw every generated row and user; the metric is non-trivial on this data.
    assert "users=100 recommended=800 judged=400" in results["results"]["a"]["check"]
    assert "ndcg@10=0.0000" not in results["results"]["b"]["check"]


@pytest.mark.bench
def test_timeline_script_splits_each_run_into_phases_within_the_run(tmp_path, bench_data):
    out_json = tmp_path / "timeline.json"
    proc = run_script(
        TIMELINE, "--variants", "b,d", *DATA, *TINY, "--data-dir", str(bench_data), "--json", str(out_json)
    )

    header = next(line for line in proc.stdout.splitlines() if line.split()[:1] == ["read"])
    assert header.split() == ["read", "build", "plan", "data", "tail", "total"]
    assert {line.split()[0] for line in proc.stdout.splitlines() if line[:5].strip() in ("b", "d", "b - d")} >= {
        "b",
        "d",
    }
    report = json.loads(out_json.read_text())
    assert set(report["runs"]) == {"b", "d"}
    for runs in report["runs"].values():
        (run,) = runs
        phases = [run[name] for name in ("read", "build", "plan", "data", "tail")]
        # Non-negative phases: the stages' clock (the JVM's) and the script's agree, and the
        # data phase ends at a stage that ran (the phases add up to the run by construction).
        assert all(value >= 0 for value in phases), run
        # Every stage counted for the run started after its DataFrame was built and ended before the run did.
        assert run["stages"] and min(s["submitted"] for s in run["stages"]) >= run["read"] + run["build"] - 1e-6
        assert max(s["completed"] for s in run["stages"]) <= run["total"] + 1e-6
        data_end = run["read"] + run["build"] + run["plan"] + run["data"]
        assert any(abs(s["completed"] - data_end) < 1e-6 for s in run["stages"]), run


@pytest.mark.bench
def test_job_benchmark_times_each_whole_process_and_prints_the_ratios(tmp_path, bench_data):
    out_json = tmp_path / "job.json"
    work = ["--work-dir", str(tmp_path / "work"), "--json", str(out_json)]
    # One size, J and P once each (the skewed tables' JS is the same J command on other data:
    # their rows are checked below without a third process).
    sizes = ["--sizes", "100", "--skew-at", "0", "--list-length", "8", "--relevant", "4"]
    proc = run_script(BENCH.parent / "job.py", *sizes, "--repeat", "1", "--data-dir", str(bench_data), *work)

    ratio_lines = [line for line in proc.stdout.splitlines() if line.startswith("ratio ")]
    assert [line.split()[1] for line in ratio_lines] == ["J/P", "J/P"], proc.stdout
    report = json.loads(out_json.read_text())
    assert set(report["runs"]) == {"J@100", "P@100"}
    for figures in report["runs"].values():
        # One run each; a whole process with a JVM holds well over 100 MB and uses CPU.
        assert len(figures["wall"]) == 1 and figures["peak"][0] > 100 * 2**20 and figures["cpu"][0] > 0
    assert report["ratios"]["J/P@100"] == report["medians"]["J@100"]["wall"] / report["medians"]["P@100"]["wall"]
    assert report["rows"]["100"] == 100 * (8 + 4)
    summary = json.loads((tmp_path / "work" / "J-100" / "summary.json").read_text())
    assert summary["rows"]["recommendations"]["read"] == 800 and summary["input_rows"]["relevance"] == 400
    assert 0.0 <= json.loads((tmp_path / "work" / "P-100.json").read_text())["mean_ndcg"] <= 1.0
    for figures in report["runs"].values():
        # Spark's own figures, from each run's event log: both jobs shuffle both tables, planned as exchanges.
        assert figures["shuffle_bytes"][0] > 0 and figures["shuffle_stages"][0] >= 2, figures
        assert figures["exchange_nodes"][0] >= 2 and figures["task_cpu_seconds"][0] > 0, figures


def test_job_benchmark_skewed_tables_hold_the_rows_of_their_size_mostly_with_a_few_users():
    job = load("job")
    args = job.parse_args(["--sizes", "100", "--skew-at", "100", "--giant", "100,20", "--list-length", "8",
                           "--relevant", "4"])  # fmt: skip
    data = job.specs(args)
    assert set(data) == {"100", "skewed"}
    rows = {label: spec.recs_layout.total + spec.rel_layout.total for label, spec in data.items()}
    assert rows["skewed"] == rows["100"] == 100 * (8 + 4)
    assert data["skewed"].heavy_share == 0.5 and data["skewed"].giant_recommendations == 100
    assert job.schedule(["100"], ["J", "P"], 0, skewed="100") == [("100", "J"), ("skewed", "J"), ("100", "P")]
    # JS/J is J's median on the skewed tables over J's on the unskewed ones of the same size.
    runs = {("100", "J"): 2.0, ("100", "P"): 1.0, ("skewed", "J"): 3.2}
    med = {key: {"wall": wall, "cpu": wall, "peak": 2**30} for key, wall in runs.items()}
    figures = {key: {"wall": [wall]} for key, wall in runs.items()}
    report = job.report_lines(med, figures, rows, ["100"], ["J", "P"], 2, args)
    assert report["ratios"]["JS/J"] == 1.6 and report["ratios"]["J/P@100"] == 2.0
    assert "ratio JS/J = 1.600 (target <= 1.50) NOT MET: J on skewed / unskewed tables at 100 users" in report["lines"]


def load(name: str):
    """A module of benchmarks/ (loaded from its file, as the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(f"benchmarks_{name}", BENCH.parent / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_job_benchmark_reads_spark_figures_from_an_event_log(tmp_path):
    metering = load("metering")

    def node(name, ids, *children):
        return {"nodeName": name, "metrics": [{"accumulatorId": i} for i in ids], "children": list(children)}

    cached = node("Exchange", [7], node("Sort", [8]))
    events = [
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart", "executionId": 0,
         "sparkPlanInfo": node("Exchange", [1])},
        # The last adaptive update is the plan that ran; a cached plan shown twice is one exchange.
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLAdaptiveExecutionUpdate", "executionId": 0,
         "sparkPlanInfo": node("Generate", [2], cached)},
        {"Event": "org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionStart", "executionId": 1,
         "sparkPlanInfo": node("ReusedExchange", [3], cached)},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 4, "Task Metrics": {
            "Executor CPU Time": 2_000_000_000, "Memory Bytes Spilled": 5, "Disk Bytes Spilled": 6,
            "Shuffle Write Metrics": {"Shuffle Bytes Written": 100}}},
        {"Event": "SparkListenerTaskEnd", "Stage ID": 5, "Task Metrics": {"Executor CPU Time": 500_000_000}},
    ]  # fmt: skip
    rolled = tmp_path / "eventlog_v2_local-1"
    rolled.mkdir()
    (rolled / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    (rolled / "appstatus_local-1").write_text("")
    figures = metering.spark_figures(tmp_path)
    assert figures == {
        "shuffle_bytes": 100, "spill_bytes": 11, "task_cpu_seconds": 2.5, "sql_executions": 2,
        "shuffle_stages": 1, "exchange_nodes": 1, "sort_nodes": 1, "generate_nodes": 1,
    }  # fmt: skip


def test_job_benchmark_fits_a_line_and_orders_each_round_both_ways():
    metering, job = load("metering"), load("job")

    # 2 s fixed and 3 s per million rows, read back from three sizes.
    fixed, per_row = metering.line_fit([1e6, 2e6, 4e6], [5.0, 8.0, 14.0])
    assert fixed == pytest.approx(2.0) and per_row * 1e6 == pytest.approx(3.0)
    assert metering.growth_per_doubling([1e6, 4e6], [5.0, 20.0]) == pytest.approx(2.0)
    assert job.schedule(["1", "2"], ["J", "P"], 0, skewed="2") == [
        ("1", "J"), ("1", "P"), ("2", "J"), ("skewed", "J"), ("2", "P")
    ]  # fmt: skip


def test_fixed_benchmark_counts_jobs_and_splits_the_driver_time_from_an_event_log(tmp_path):
    fixed = load("fixed")

    def job(n, start, end, stages):
        return [
            {"Event": "SparkListenerJobStart", "Job ID": n, "Submission Time": start, "Stage IDs": stages},
            {"Event": "SparkListenerJobEnd", "Job ID": n, "Completion Time": end},
        ]

    def task(stage, rows, run):
        return {"Event": "SparkListenerTaskEnd", "Stage ID": stage,
                "Task Metrics": {"Input Metrics": {"Records Read": rows}, "Executor Run Time": run}}  # fmt: skip

    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 1_000},
        # A schema read (no rows), the heavy job that reads rows, a small job after it.
        *job(0, 1_100, 1_200, [0]), task(0, 0, 50),
        *job(1, 2_200, 4_000, [1, 2]), task(1, 500, 900), task(2, 0, 600),
        *job(2, 4_100, 4_200, [3]), task(3, 0, 20),
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 5_000},
    ]  # fmt: skip
    rolled = tmp_path / "eventlog_v2_local-1"
    rolled.mkdir()
    (rolled / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in events) + "\n")
    # Jobs are counted by their start events; "before" runs from the schema job's end to the first
    # job that reads rows, "after" from the end of the last heavy job to the application's end.
    assert fixed.timeline(tmp_path) == {"jobs": 3, "before": 1.0, "after": 1.0, "app": 4.0}
