"""What the publish and unattended tests share: the job's arguments, the invariant a reader relies
on, and the job started in a process group of its own (to be killed or signalled).

The inputs and the published result they start from are the fixtures ``inputs`` and
``published`` of ``tests/conftest.py`` (one of each per pytest worker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from chispa import assert_df_equality

ROOT = Path(__file__).resolve().parents[1]
DATE = "2026-11-21"
PLACE = f"run_date={DATE}"
#: Seconds a subprocess job may take to reach its step on a loaded 2-core machine.
WAIT = 600


def args(inputs, out, model="good", *extra):
    return [
        "--recommendations",
        inputs[model],
        "--relevance",
        inputs["rel"],
        "--output",
        str(out),
        "--k",
        "3,5",
        *extra,
    ]


def marker_of(out: Path, place: str = PLACE):
    path = out / "_manifests" / place / "summary.json" if place else out / "summary.json"
    # Strict JSON: NaN or Infinity would raise here.
    return (
        json.loads(path.read_text(), parse_constant=lambda c: pytest.fail(f"{c} in {path}")) if path.exists() else None
    )


def data_files(folder: Path):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file() and p.name[0] not in "._")


def check_invariant(spark, out: Path, place: str = PLACE):
    """A marker is there only beside the tables and files it describes, with the figures they hold."""
    marker = marker_of(out, place)
    if marker is None:
        return None
    for name, table in marker["run"]["tables"].items():
        folder = out / table["path"]
        assert data_files(folder) == table["files"], f"{name}: the files the marker vouches for are not the table's"
    for name in ("per_user", "summary", "rejected/recommendations", "rejected/relevance"):
        live = out / name / place if place else out / name
        assert live.exists() == (name in marker["run"]["tables"]), f"{name}: there, but not in the marker, or gone"
    report = (out / "_manifests" / place if place else out) / "report.html"
    assert report.exists() == ("report.html" in marker["run"]["files"])
    # The figures of the tables are the marker's.
    per_user = spark.read.parquet(str(out / "per_user" / place if place else out / "per_user"))
    means = {r["k"]: (r["users"], r["mean"]) for r in per_user.groupBy("k").agg({"ndcg": "avg", "*": "count"})
             .withColumnsRenamed({"avg(ndcg)": "mean", "count(1)": "users"}).collect()}  # fmt: skip
    assert {m["k"]: m["users"] for m in marker["metrics"]} == {k: u for k, (u, _) in means.items()}
    for m in marker["metrics"]:
        assert m["mean_ndcg"] == pytest.approx(means[m["k"]][1], abs=1e-12)
    summary = spark.read.parquet(str(out / "summary" / place if place else out / "summary"))
    expected = spark.createDataFrame([{c: m[c] for c in summary.columns} for m in marker["metrics"]], summary.schema)
    assert_df_equality(summary, expected, ignore_row_order=True, ignore_nullable=True)
    return marker


def start_job(argv, pause=None, cwd=None):
    """The job in a process group of its own; ``pause``: (step, file) where it stops, creating the file."""
    # Its JVM takes the suite's quick flags through SPARK_SUBMIT_OPTS (tests/conftest.py).
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    launcher = ["ndcg_spark"] if pause is None else ["tests.faults", pause[0], str(pause[1]), "--"]
    return subprocess.Popen(
        [sys.executable, "-m", *launcher, "--master", "local[1]", *argv],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def kill_group(proc):
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(60)


def wait_for(condition, proc, what):
    deadline = time.time() + WAIT
    while time.time() < deadline:
        if condition():
            return
        if proc.poll() is not None:
            pytest.fail(f"the job ended ({proc.returncode}) before {what}: {proc.stderr.read()[-2000:]}")
        time.sleep(0.05)
    kill_group(proc)
    pytest.fail(f"timed out waiting for {what}")
