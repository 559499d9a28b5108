"""Where the job meets its scheduler: a Spark JVM that dies under the run, refusals that come
before Spark starts, and history read by a pipe that closes early.

The kills and pipes are real, in processes of their own; the rest runs in this process.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ndcg_spark.errors import SPARK_GONE
from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_INPUT, EXIT_LOCKED, EXIT_OK, EXIT_SPARK_GONE, exit_code
from ndcg_spark.job.outputs import contract
from ndcg_spark.job.outputs.directory import unfinished
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
    """Seen without Spark: a live run's lock on a local output (exit 5), a --run-date into an
    undated output and a relative output over Spark Connect (exit 2), each refused in a process
    that never starts a JVM (nor connects)."""
    locked = copy_of(published, tmp_path / "locked")
    holder = fake_holder(locked, renewed_ago=5)
    undated = tmp_path / "undated"
    (undated / "_ndcg_spark").mkdir(parents=True)
    (undated / "_ndcg_spark" / "layout.json").write_text('{"command": "evaluate", "partition_key": null}')
    started = time.monotonic()
    procs = [
        job_process(args(inputs, locked, "worse", "--run-date", DATE), tmp_path),
        job_process(args(inputs, undated, "worse", "--run-date", DATE), tmp_path),
        job_process(args(inputs, "out", "worse", "--remote", "sc://localhost:1"), tmp_path),
    ]
    ended = [(p.communicate(timeout=120), time.monotonic() - started) for p in procs]
    (_, lock_err), lock_took = ended[0]
    (_, undated_err), _ = ended[1]
    (_, connect_err), _ = ended[2]
    assert [p.returncode for p in procs] == [EXIT_LOCKED, EXIT_CONFIG, EXIT_CONFIG]
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
    assert connect_err.splitlines() == [
        "ndcg-spark: error: output 'out' is a relative path: over Spark Connect it would resolve on the server; "
        "give an absolute path or a URI"
    ]
    assert lock_took < 10, f"{lock_took:.1f} s to refuse"
    assert marker_of(locked) == marker_of(published) and not (undated / "_manifests").exists()


def test_history_names_an_interrupted_publish_and_a_failed_night_until_a_run_completes_them(
    spark, inputs, published, tmp_path, capsys, monkeypatch
):
    """A publish cut short after its journal (as a SIGKILL leaves it: the tables and the report
    moved, the manifest not written) is listed with its staged figures; a night
    whose run failed on bad input is listed with its exit code and line, until a complete run of
    the night. (That the next run completes an interrupted publish: tests/test_unattended.py.)"""
    out = copy_of(published, tmp_path / "out")
    cut, bad = "2026-11-22", "2026-11-23"

    def killed(step):
        if step == "moved:report.html":
            raise KeyboardInterrupt  # the run ends here, as if killed: its journal stays

    monkeypatch.setattr(contract, "at_step", killed)
    with pytest.raises(KeyboardInterrupt):
        run(args(inputs, out, "worse", "--run-date", cut))
    monkeypatch.setattr(contract, "at_step", lambda step: None)
    assert run(args(inputs, out, "bad", "--run-date", bad)) == EXIT_INPUT
    assert (
        marker_of(out, f"run_date={cut}") is None and (out / "_manifests" / f"run_date={cut}" / "report.html").exists()
    )
    capsys.readouterr()

    assert run(["history", "--output", str(out)]) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in lines[1:5]] == [DATE, DATE, cut, cut]  # k=3 and k=5 of each night
    error = nights_note(out, bad)["error"]
    assert error.startswith("recommendations column 'score' is NaN")
    assert lines[-2:] == [
        f"run_date={cut} interrupted: the next run completes it (the figures above are its staged result)",
        f"run_date={bad} failed: exit 3 at {nights_note(out, bad)['failed']}: {error}",
    ]
    assert run(["history", "--output", str(out), "--json"]) == EXIT_OK
    record = json.loads(capsys.readouterr().out)
    assert record["runs"] == [DATE, cut] and record["unfinished"] == {
        cut: {"status": "interrupted", "detail": unfinished.INTERRUPTED},
        bad: {"status": "failed", "detail": f"exit 3 at {nights_note(out, bad)['failed']}: {error}"},
    }

    time.sleep(0.01)  # the complete run comes after the note (by the file system's clock)
    assert run(args(inputs, out, "good", "--run-date", bad)) == EXIT_OK
    capsys.readouterr()
    assert run(["history", "--output", str(out), "--json"]) == EXIT_OK
    record = json.loads(capsys.readouterr().out)
    assert record["runs"] == [DATE, cut, bad] and list(record["unfinished"]) == [cut]


def nights_note(out: Path, night: str) -> dict:
    return json.loads((out / "_ndcg_spark" / "failed" / f"run_date={night}.json").read_text())


@pytest.mark.process
def test_history_into_a_closed_pipe_ends_quietly(published, tmp_path):
    """``ndcg-spark history | head -2``: the reader gone, the job ends with exit 0 and says nothing."""
    reader = subprocess.Popen(
        [sys.executable, "-m", "ndcg_spark", "history", "--output", str(published)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    reader.stdout.close()  # before it writes a line: every write meets a closed pipe
    stderr = reader.stderr.read()
    assert reader.wait(60) == EXIT_OK and stderr == ""


def test_a_jvm_that_does_not_start_is_one_line_without_an_exception_name():
    from pyspark.errors import PySparkRuntimeError

    from ndcg_spark.errors import JVM_DID_NOT_START, as_error

    try:
        exited = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})
    except TypeError:  # PySpark 3.5 spells them error_class and message_parameters
        exited = PySparkRuntimeError(error_class="JAVA_GATEWAY_EXITED", message_parameters={})
    error = as_error(exited)
    assert (exit_code(error), str(error)) == (EXIT_FAILURE, JVM_DID_NOT_START)


def test_a_spark_connect_server_gone_is_the_same_exit_code():
    """Over Spark Connect the driver is the server: its client gives up with gRPC's UNAVAILABLE."""
    connect = pytest.importorskip("pyspark.errors.exceptions.connect")
    grpc = pytest.importorskip("grpc")

    from ndcg_spark.errors import CONNECT_GONE, as_error

    try:
        gone = connect.SparkConnectGrpcException("no server", grpc_status_code=grpc.StatusCode.UNAVAILABLE)
        other = connect.SparkConnectGrpcException("bad plan", grpc_status_code=grpc.StatusCode.INTERNAL)
    except TypeError:
        pytest.skip("PySpark 3.5's Spark Connect errors carry no gRPC status")
    assert (exit_code(as_error(gone)), str(as_error(gone))) == (EXIT_SPARK_GONE, CONNECT_GONE)
    assert exit_code(as_error(other)) == EXIT_FAILURE
