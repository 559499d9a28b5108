"""Where the job meets its scheduler: a Spark JVM that dies under the run, refusals that come
before Spark starts, and history read by a pipe that closes early.

The kills and pipes are real, in processes of their own; the rest runs in this process.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from ndcg_spark.errors import EXIT_OK, EXIT_SPARK_GONE, SPARK_GONE
from ndcg_spark.job import run
from tests.publishing import DATE, PLACE, args, check_invariant, marker_of, start_job, wait_for
from tests.test_unattended import copy_of, lock_file, one_line

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
