"""A nightly stage under a scheduler that retries: SIGTERM and SIGINT end a run cleanly, a killed
run's lock is broken by the retry itself, a live run's lock is never taken, paths mean one thing,
and every failure is one line with its exit code.

The signals and kills are real, sent to the job's process group as a scheduler sends them; the
rest runs in this process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from ndcg_spark.job import run
from ndcg_spark.job.commands import history
from ndcg_spark.job.config.targets import Partition
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_LOCKED, EXIT_OK
from ndcg_spark.job.outputs import contract, files, lease
from ndcg_spark.job.outputs.directory.layout import Place
from ndcg_spark.job.outputs.directory.runs import DirectoryRuns
from tests.publishing import DATE, PLACE, args, check_invariant, kill_group, marker_of, start_job, wait_for

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)


def copy_of(published, folder: Path) -> Path:
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(published, folder)
    return folder


def lock_file(out: Path) -> Path:
    return out / "_ndcg_spark" / "locks" / f"{PLACE}.lock"


#: What the JVM itself prints on stderr before Spark starts (the options the tests give it, a notice).
JVM_NOTICES = ("Picked up JAVA_TOOL_OPTIONS", "WARNING: Using incubator modules")


def one_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if not line.startswith(JVM_NOTICES)]
    assert len(lines) == 1, lines
    return lines[0]


def finished(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- real signals


@pytest.mark.process
def test_sigterm_and_sigint_end_a_run_as_the_contract_allows(spark, inputs, published, tmp_path, capsys):
    """SIGTERM while Spark writes: the jobs are cancelled, the previous result stays, the lock goes,
    exit 143 in seconds, and the scheduler's retry runs without a flag. SIGINT after the journal
    (the live lock refused to --break-lock meanwhile): the publish is finished, exit 130."""
    term_out, int_out = copy_of(published, tmp_path / "term" / "out"), copy_of(published, tmp_path / "int" / "out")
    pause = tmp_path / "paused"
    term = start_job(args(inputs, term_out, "worse", "--run-date", DATE))
    held = start_job(
        args(inputs, int_out, "worse", "--run-date", DATE),
        ("marker_removed", pause),
    )
    try:
        staging = term_out / "_ndcg_spark" / "staging" / PLACE
        wait_for(lambda: list(staging.glob("*/tables/per_user/_temporary")), term, "per_user's _temporary")
        os.killpg(term.pid, signal.SIGTERM)
        sent = time.time()
        stdout, stderr = term.communicate(timeout=60)
        took = time.time() - sent

        wait_for(pause.exists, held, "the paused run's journal")
        capsys.readouterr()
        assert run(args(inputs, int_out, "good", "--run-date", DATE, "--break-lock")) == EXIT_LOCKED
        refused = one_line(capsys.readouterr().err)
        assert "is locked by run " in refused and f"(pid {held.pid} on " in refused and "lease renewed " in refused
        assert refused.endswith("which is running; --break-lock does not take a live run's lock (--break-lock force "
                                "does, see docs/job.md)")  # fmt: skip
        os.killpg(held.pid, signal.SIGINT)
        int_stdout, int_stderr = held.communicate(timeout=60)
    finally:
        for proc in (term, held):
            if proc.poll() is None:
                kill_group(proc)

    assert term.returncode == 143, stderr
    assert took < 20, f"{took:.1f} s from SIGTERM to exit"
    assert one_line(stderr) == (
        f"ndcg-spark: error: stopped by SIGTERM before publishing {term_out} ({PLACE}): the previous result is as it was"
    )
    record = finished(stdout)
    assert record["status"] == "terminated" and record["signal"] == "SIGTERM" and record["published"] is False
    assert check_invariant(spark, term_out) == marker_of(published)
    assert not lock_file(term_out).exists() and not (term_out / "_ndcg_spark" / "staging").exists()
    # The scheduler's retry: no flag, no lock to break.
    assert run(args(inputs, term_out, "worse", "--run-date", DATE)) == EXIT_OK
    assert "breaking the lock" not in capsys.readouterr().err
    assert check_invariant(spark, term_out)["settings"]["recommendations"] == inputs["worse"]

    assert held.returncode == 130, int_stderr
    assert one_line(int_stderr) == (
        f"ndcg-spark: error: stopped by SIGINT after publishing {int_out} ({PLACE}): the new result is in place"
    )
    record = finished(int_stdout)
    assert record["status"] == "interrupted" and record["published"] is True and record["users"] == 30
    after = check_invariant(spark, int_out)
    assert after["settings"]["recommendations"] == inputs["worse"] and after["run"]["id"] != marker_of(published)
    assert not lock_file(int_out).exists()


@pytest.mark.process
def test_a_killed_runs_retry_from_another_directory_breaks_its_lock_and_recovers(
    spark, inputs, published, tmp_path, capsys, monkeypatch
):
    """SIGKILL in the middle of a publish of a relative --output; the retry, started from another
    working directory with the absolute path and no flag, breaks the dead run's lock, finishes
    nothing of another output's, and publishes. (The kill is real; the retry is an ordinary run,
    made in this process from the other directory.)"""
    first, second = tmp_path / "first", tmp_path / "second"
    out, decoy = copy_of(published, first / "out"), copy_of(published, second / "out")
    before = {p: p.stat().st_mtime_ns for p in decoy.rglob("*")}
    pause = tmp_path / "paused"
    killed = start_job(args(inputs, "out", "worse", "--run-date", DATE), ("moved:per_user", pause), cwd=first)
    wait_for(pause.exists, killed, "the publish of per_user")
    kill_group(killed)
    assert marker_of(out) is None
    # The journal and the lock name the output absolutely, with its file system.
    (journal,) = (out / "_ndcg_spark" / "staging" / PLACE).glob("*/publish.json")
    record = json.loads(journal.read_text())
    paths = [record["output"], record["folder"], record["marker"], *record["removes"]]
    paths += [p for _, source, target in record["moves"] for p in (source, target)]
    assert all(p.startswith(f"file:{out}") for p in paths), paths
    assert json.loads(lock_file(out).read_text())["output"] == f"file:{out}"

    monkeypatch.chdir(second)
    capsys.readouterr()
    code = run(args(inputs, out, "good", "--run-date", DATE))
    stderr = capsys.readouterr().err
    assert code == EXIT_OK, stderr
    broke = one_line(stderr)
    assert broke.startswith("ndcg-spark: breaking the lock of run ") and f"(pid {killed.pid} on " in broke
    assert broke.endswith(f"on output {out} ({PLACE}): its run is gone")
    after = check_invariant(spark, out)
    assert (
        after["settings"]["recommendations"] == inputs["good"] and f"pid {killed.pid} " in after["run"]["broke_lock_of"]
    )
    assert after["run"]["output"] == f"file:{out}"
    assert {p: p.stat().st_mtime_ns for p in decoy.rglob("*")} == before
    assert check_invariant(spark, decoy) == marker_of(published)


# ----------------------------------------------------------------------------- the lease


def fake_holder(out: Path, renewed_ago: float, host: str = "another-host", pid: int = 4242) -> str:
    """A lock held by a run on another machine, last renewed ``renewed_ago`` seconds ago."""
    now, run_id = time.time(), "20261121T020001Z-0badf00d"
    owner = {"run_id": run_id, "command": "evaluate", "place": PLACE, "host": host, "boot_id": "x", "pid_ns": 1,
             "pid": pid, "user": "etl", "started": "2026-11-21T02:00:01Z", "started_epoch": now - 3600,
             "lock_timeout": 300}  # fmt: skip
    lock_file(out).parent.mkdir(parents=True, exist_ok=True)
    lock_file(out).write_text(json.dumps(owner))
    lease_file = lock_file(out).parent / f"{PLACE}.{run_id}.lease"
    lease_file.write_text(json.dumps({"run_id": run_id, "renewed_epoch": now - renewed_ago}))
    return run_id


def place_of(spark, out: Path) -> Place:
    return Place(files.files_for(spark, files.qualify(spark, str(out))), "evaluate", Partition("run_date", DATE))


@pytest.mark.parametrize(
    "renewed_ago, flag, taken, words",
    [
        (10, False, False, "which is running; its lock is broken by itself once its lease is 300 s old"),
        (10, True, False, "which is running; --break-lock does not take a live run's lock"),
        (120, False, False, "whose lease is older than 3 renewals; run again with --break-lock to take it"),
        (120, True, True, ": its lease is stalled"),
        (400, False, True, ": its run is gone"),
        (10, lease.FORCE, True, ": forced"),
    ],
)
def test_a_lock_of_another_machine_is_taken_only_when_its_lease_says_so(
    spark, tmp_path, capsys, renewed_ago, flag, taken, words
):
    out = tmp_path / "out"
    holder = fake_holder(out, renewed_ago)
    held = lease.Lease(place_of(spark, out), "tonight")
    if not taken:
        with pytest.raises(lease.OutputLocked) as refused:
            held.acquire(flag)
        assert f"is locked by run {holder} (pid 4242 on another-host, user etl" in str(refused.value)
        assert str(refused.value).endswith(words) or words in str(refused.value)
        assert json.loads(lock_file(out).read_text())["run_id"] == holder
        return
    broke = held.acquire(flag)
    assert broke.startswith(f"run {holder} (pid 4242 on another-host")
    assert one_line(capsys.readouterr().err).endswith(words)
    assert json.loads(lock_file(out).read_text())["run_id"] == "tonight"
    assert not (lock_file(out).parent / f"{PLACE}.{holder}.lease").exists()
    held.release()
    assert not list(lock_file(out).parent.iterdir())


def test_a_stale_lock_is_broken_by_the_run_and_recorded(spark, inputs, published, tmp_path, capsys):
    out = copy_of(published, tmp_path / "out")
    holder = fake_holder(out, renewed_ago=400)
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_OK
    assert one_line(capsys.readouterr().err).endswith(f"on output {out} ({PLACE}): its run is gone")
    assert check_invariant(spark, out)["run"]["broke_lock_of"].startswith(f"run {holder} ")


def test_a_run_that_lost_its_lock_stops_before_its_publish(spark, inputs, published, tmp_path, capsys, monkeypatch):
    """Its lock taken (by force) while it computed: exit 5 at the publish, nothing live touched."""
    out = copy_of(published, tmp_path / "out")

    def taken(step):
        if step == "staged":
            lock_file(out).unlink()
            fake_holder(out, renewed_ago=0)

    monkeypatch.setattr(contract, "at_step", taken)
    before = {p: p.stat().st_mtime_ns for p in (out / "per_user").rglob("*")}
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_LOCKED
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"ndcg-spark: error: output {out} ({PLACE}): this run lost its lock to run 20261121T020001Z")
    assert line.endswith("and stopped, writing nothing more: the output is as that run has it")
    assert check_invariant(spark, out) == marker_of(published)
    assert {p: p.stat().st_mtime_ns for p in (out / "per_user").rglob("*")} == before
    assert json.loads(lock_file(out).read_text())["host"] == "another-host"  # the other run's lock stays


def test_a_publish_another_run_finished_is_not_written_over(spark, inputs, published, tmp_path, capsys, monkeypatch):
    """A run paused in its publish while another forced its lock and finished that publish (the
    journal gone): the paused run writes no marker over what the other run published."""
    out = copy_of(published, tmp_path / "out")

    def finished_by_another(step):
        if step == "moved:per_user":
            (journal,) = (out / "_ndcg_spark" / "staging" / PLACE).glob("*/publish.json")
            journal.unlink()
            lock_file(out).unlink()
            fake_holder(out, renewed_ago=0)

    monkeypatch.setattr(contract, "at_step", finished_by_another)
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_LOCKED
    assert "this run lost its lock to run 20261121T020001Z" in one_line(capsys.readouterr().err)
    assert marker_of(out) is None and check_invariant(spark, out) is None


# ----------------------------------------------------------------------------- paths and layout


def test_a_journal_naming_another_output_is_refused(spark, inputs, published, tmp_path, capsys):
    out, other = copy_of(published, tmp_path / "out"), copy_of(published, tmp_path / "other")
    folder = out / "_ndcg_spark" / "staging" / PLACE / "20261121T020001Z-0badf00d"
    folder.mkdir(parents=True)
    journal = {"run_id": "x", "output": f"file:{other}", "folder": f"file:{folder}", "marker": f"file:{other}/m",
               "marker_text": "{}", "moves": [], "removes": [f"file:{other}/per_user/{PLACE}"]}  # fmt: skip
    (folder / "publish.json").write_text(json.dumps(journal))
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_CONFIG
    line = one_line(capsys.readouterr().err)
    assert f"names 'file:{other}/m', which is not under the output {out}" in line
    assert check_invariant(spark, other) == marker_of(published) and (folder / "publish.json").exists()


def test_an_output_inside_an_input_or_holding_one_is_refused(inputs, tmp_path, capsys):
    inside = Path(inputs["good"]) / "out"
    assert run(args(inputs, inside)) == EXIT_CONFIG
    assert f"output {inside} is inside the recommendations input {inputs['good']}" in one_line(capsys.readouterr().err)
    assert not inside.exists()
    holding = Path(inputs["rel"]).parent
    assert run(args(inputs, holding)) == EXIT_CONFIG
    assert f"output {holding} holds the recommendations input" in one_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    "files",
    [{"per_user/README": "notes", "summary.json": "{}"}, {"summary/part-0.parquet": "x", "report.html": "<p>mine</p>"}],
)
def test_a_folder_of_files_named_like_ours_is_not_taken_for_ours(inputs, tmp_path, capsys, files):
    out = tmp_path / "out"
    for name, text in files.items():
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(text)
    assert run(args(inputs, out)) == EXIT_CONFIG
    assert f"output {out} already holds other data" in one_line(capsys.readouterr().err)
    assert {n: (out / n).read_text() for n in files} == files
    assert sorted(p.name for p in out.iterdir()) == sorted({n.split("/")[0] for n in files})


# ----------------------------------------------------------------------------- a gone baseline


def test_a_previous_run_whose_tables_were_deleted_is_skipped_and_shown_broken(
    spark, inputs, published, tmp_path, capsys
):
    out = copy_of(published, tmp_path / "out")
    assert run(args(inputs, out, "good", "--run-date", "2026-11-20")) == EXIT_OK
    shutil.rmtree(out / "per_user" / PLACE)
    capsys.readouterr()
    gate = ["--run-date", "2026-11-22", "--fail-if-drop", "3:0.5"]
    assert run(args(inputs, out, "good", *gate)) == EXIT_OK
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith("regression gate")]
    assert said[0].startswith(
        f"regression gate passed: run_date 2026-11-20 -> 2026-11-22 ({PLACE} skipped: its tables are missing), "
    )
    text = history.history_text(DirectoryRuns(files.files_for(spark, str(out))))
    assert f"broken: {PLACE}: its per_user table(s) are missing" in text
    assert json.loads(history.history_text(DirectoryRuns(files.files_for(spark, str(out))), as_json=True))[
        "broken"
    ] == {DATE: ["per_user"]}


# ----------------------------------------------------------------------------- one line, the right code


def test_an_out_of_range_k_is_refused_at_once(inputs, tmp_path, capsys):
    started = time.time()
    assert run(args(inputs, tmp_path / "out")[:-1] + ["3000000000"]) == EXIT_CONFIG
    assert time.time() - started < 5
    assert one_line(capsys.readouterr().err).endswith("k = 3000000000 is larger than 2147483647, the largest k "
                                                      "Spark can rank to; use 'all'")  # fmt: skip
    assert not (tmp_path / "out").exists()


@pytest.fixture
def small_disk(tmp_path):
    """A 2 MB tmpfs, unmounted after the test; skipped where this process cannot mount one."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    yield disk
    subprocess.run(["umount", "-l", str(disk)], check=False)


def fill(disk: Path, leave: int) -> None:
    """Fill ``disk`` until ``leave`` bytes are free."""
    free = shutil.disk_usage(disk).free - leave
    with open(disk / "filler", "wb") as fh:
        fh.write(b"\0" * max(free, 0))


def test_a_full_disk_is_one_line_naming_the_output(spark, inputs, published, small_disk, capsys):
    out = copy_of(published, small_disk / "out")
    fill(small_disk, leave=24 * 1024)
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_FAILURE
    line = one_line(capsys.readouterr().err)
    assert line == (
        f"ndcg-spark: error: no space left on device writing to {out}: free space there (or raise the quota) "
        "and run again"
    )
    assert check_invariant(spark, out) == marker_of(published)
    assert not lock_file(out).exists()
    (small_disk / "filler").unlink()
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_OK


def test_mlflow_logging_is_bounded_in_time(spark, inputs, tmp_path, capsys, monkeypatch):
    """A tracking server that accepts and never answers: the result is published, the job gives up
    on MLflow within its budget, exit 1 with one line."""
    pytest.importorskip("mlflow")
    from ndcg_spark.job.commands import tracking

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    accepted = []
    threading.Thread(target=lambda: accepted.append(server.accept()), daemon=True).start()
    monkeypatch.setattr(tracking, "BUDGET", 3.0)
    out = tmp_path / "out"
    uri = f"http://127.0.0.1:{server.getsockname()[1]}"
    try:
        started = time.time()
        code = run(args(inputs, out, "good", "--mlflow-experiment", "nightly", "--mlflow-tracking-uri", uri))
        took = time.time() - started
    finally:
        server.close()
    assert code == EXIT_FAILURE and accepted
    assert one_line(capsys.readouterr().err) == (
        "ndcg-spark: error: MLflow logging did not finish within 3 s; gave up (outputs were written)"
    )
    assert took < 45
    assert check_invariant(spark, out, place="")["settings"]["mlflow_experiment"] == "nightly"


@pytest.mark.parametrize(
    "flags, value",
    [([], False), (["--break-lock"], True), (["--break-lock", "force"], "force"), (["--break-lock", "maybe"], None)],
)
def test_break_lock_spellings(flags, value):
    from ndcg_spark.errors import ConfigError
    from ndcg_spark.job import parse_config

    argv = ["--recommendations", "r/", "--relevance", "g/", "--output", "o/", *flags]
    if value is None:
        with pytest.raises(ConfigError, match="break_lock must be true or false, got 'maybe'"):
            parse_config(argv)
        return
    assert parse_config(argv)[0].output.break_lock == value
