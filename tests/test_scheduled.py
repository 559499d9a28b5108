"""Where the job meets its scheduler: a Spark JVM that dies under the run, refusals that come
before Spark starts, and history read by a pipe that closes early.

The kills and pipes are real, in processes of their own; the rest runs in this process.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ndcg_spark.errors import EXIT_CONFIG, EXIT_LOCKED, EXIT_OK, EXIT_SPARK_GONE, SPARK_GONE
from ndcg_spark.job import run
from tests.publishing import DATE, PLACE, ROOT, args, check_invariant, marker_of, start_job, wait_for
from tests.test_unattended import copy_of, fake_holder, lock_file, one_line

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)


def children(pid: int):
    """The processes whose parent is ``pid``, as (pid, command name)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            name, rest = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
            if int(rest[1]) == pid:
                found.append((int(entry.name), name))
    return found


@pytest.mark.process
def test_a_killed_spark_jvm_is_one_line_and_leaves_no_lock(spark, inputs, published, tmp_path, capsys):
    """SIGKILL to the driver's JVM while Spark writes (the OOM killer, a lost container): one line,
    exit 6, no Python exception's name, the lock released, the previous result as it was; the
    scheduler's retry finds no lock to break."""
    out = copy_of(published, tmp_path / "out")
    job = start_job(args(inputs, out, "worse", "--run-date", DATE))
    try:
        staging = out / "_ndcg_spark" / "staging" / PLACE
        wait_for(lambda: list(staging.glob("*/tables/per_user/_temporary")), job, "per_user's _temporary")
        (jvm,) = [pid for pid, name in children(job.pid) if name == "java"]
        os.kill(jvm, signal.SIGKILL)
        stdout, stderr = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
            job.wait(60)
    assert job.returncode == EXIT_SPARK_GONE, stderr
    assert one_line(stderr) == f"ndcg-spark: error: {SPARK_GONE}"
    assert not lock_file(out).exists()
    assert check_invariant(spark, out) == marker_of(published)
    capsys.readouterr()
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_OK
    assert "breaking the lock" not in capsys.readouterr().err
    assert check_invariant(spark, out)["settings"]["recommendations"] == inputs["worse"]


def job_process(argv, cwd):
    """The job as a scheduler starts it: ``python -m ndcg_spark``, its progress lines on."""
    env = {k: v for k, v in os.environ.items() if k != "NDCG_SPARK_QUIET"}
    return subprocess.Popen(
        [sys.executable, "-m", "ndcg_spark", *argv],
        cwd=cwd,
        env={**env, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


@pytest.mark.process
def test_a_live_lock_and_an_undated_run_are_refused_before_spark_starts(inputs, published, tmp_path):
    """Seen from the local output alone: a live run's lock (exit 5) and a --run-date into an
    undated output (exit 2), each refused in a process that never starts a JVM."""
    locked = copy_of(published, tmp_path / "locked")
    holder = fake_holder(locked, renewed_ago=5)
    undated = tmp_path / "undated"
    (undated / "_ndcg_spark").mkdir(parents=True)
    (undated / "_ndcg_spark" / "layout.json").write_text('{"command": "evaluate", "partition_key": null}')
    started = time.monotonic()
    procs = [
        job_process(args(inputs, locked, "worse", "--run-date", DATE), tmp_path),
        job_process(args(inputs, undated, "worse", "--run-date", DATE), tmp_path),
    ]
    ended = [(p.communicate(timeout=120), time.monotonic() - started) for p in procs]
    (_, lock_err), lock_took = ended[0]
    (_, undated_err), _ = ended[1]
    assert procs[0].returncode == EXIT_LOCKED and procs[1].returncode == EXIT_CONFIG
    # No JVM: neither its notice nor a progress line ("starting Spark") came.
    assert re.fullmatch(
        f"ndcg-spark: error: output {locked} \\({PLACE}\\) is locked by run {holder} \\(pid 4242 on another-host, "
        r"user etl, started 2026-11-21T02:00:01Z, lease renewed \d+ s ago\), which is running; its lock is broken "
        r"by itself once its lease is 300 s old\n",
        lock_err,
    ), lock_err
    assert undated_err.splitlines() == [
        f"ndcg-spark: error: output {undated} is not partitioned; run without --run-date/--partition, or choose another"
    ]
    assert lock_took < 10, f"{lock_took:.1f} s to refuse"
    assert marker_of(locked) == marker_of(published) and not (undated / "_manifests").exists()
