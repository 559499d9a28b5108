"""The benchmark script runs end to end at a tiny size (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench.py"


def test_benchmark_script_runs_and_prints_ratios(tmp_path):
    out_json = tmp_path / "bench.json"
    cmd = [
        sys.executable, str(BENCH),
        "--users", "200", "--list-length", "10", "--relevant", "5",
        "--repeat", "1", "--warmup", "0", "--shuffle-partitions", "2", "--driver-memory", "1g",
        "--data-dir", str(tmp_path / "data"), "--json", str(out_json),
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr[-4000:]}"

    ratio_lines = [line for line in proc.stdout.splitlines() if line.startswith("ratio ")]
    for name in ("b/d", "c/b100", "b/a"):
        assert any(line.split()[1] == name for line in ratio_lines), proc.stdout
    for line in ratio_lines:
        assert "target <=" in line and ("MET" in line)

    report = json.loads(out_json.read_text())
    # The driver JVM really started with its heap fixed at the driver memory (see bench.jvm_options).
    assert sorted(report["machine"]["jvm_heap_arguments"]) == ["-Xms1g", "-Xmx1g"]
    results = report["main"]
    assert set(results["results"]) == {"a", "b", "b100", "c", "d"}
    assert results["recommendation_rows"] == 2000 and results["relevance_rows"] == 1000
    # The floor saw every generated row and user; the metric is non-trivial on this data.
    assert "users=200 recommended=2000 judged=1000" in results["results"]["a"]["check"]
    assert "ndcg@10=0.0000" not in results["results"]["b"]["check"]
