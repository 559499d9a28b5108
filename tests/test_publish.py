"""The publish contract, tried as an operator would: kill the job at each step, fail it, run two
at once, forget a flag, mix partition keys. After each, a marker is there only beside the tables
it describes, and an earlier complete result is never lost before a new one replaces it.

The kills are real: the job runs in its own process group (``start_new_session``), pauses at a
named step (started through :mod:`tests.faults`, which creates a file there) or is caught by the
appearance of Spark's ``_temporary`` folder, and the whole group, JVM included, gets SIGKILL.
"""

from __future__ import annotations

import json
import os
import shutil

import pytest

from ndcg_spark.job import run
from ndcg_spark.job.exits import EXIT_CONFIG, EXIT_FAILURE, EXIT_INPUT, EXIT_LOCKED, EXIT_OK
from ndcg_spark.job.outputs import contract
from tests.faults import failing_at
from tests.publishing import DATE, PLACE, args, check_invariant, kill_group, marker_of, start_job, wait_for

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

#: Where a kill lands, and what a reader must see after it: the previous result, no marker, or
#: the new result. (A kill with the result staged, before its publish, is in the overlap test.)
KILLS = {
    "writing per_user": "previous",
    "marker_removed": "none",
    "moved:per_user": "none",
    "moved:report.html": "none",
    "published": "new",
}


@pytest.mark.process
def test_a_kill_at_any_step_leaves_the_previous_result_or_no_marker(spark, inputs, published, tmp_path, capsys):
    """Every step of a re-run with another model, killed; then the next run finishes or clears what it left."""
    before = marker_of(published)
    procs = {}
    for i, step in enumerate(KILLS):
        out = tmp_path / f"kill{i}"
        shutil.copytree(published, out)
        pause = tmp_path / f"paused{i}"
        at = None if step == "writing per_user" else (step, pause)
        procs[step] = (out, pause, start_job(args(inputs, out, "worse", "--run-date", DATE), at))
    for step, (out, pause, proc) in procs.items():
        if step == "writing per_user":
            staging = out / "_ndcg_spark" / "staging" / PLACE
            wait_for(lambda s=staging: list(s.glob("*/tables/per_user/_temporary")), proc, "per_user's _temporary")
        else:
            wait_for(pause.exists, proc, f"step {step}")
        kill_group(proc)
    for step, (out, _, _) in procs.items():
        after = check_invariant(spark, out)
        expected = KILLS[step]
        if expected == "previous":
            assert after == before, step
        elif expected == "none":
            assert after is None, step
        else:
            assert after is not None and after["run"]["id"] != before["run"]["id"], step
            assert after["settings"]["recommendations"] == inputs["worse"]
        # The killed run's lock is left, names its owner, and is never taken over silently.
        lock = json.loads((out / "_ndcg_spark" / "locks" / f"{PLACE}.lock").read_text())
        assert {"run_id", "pid", "host", "user", "started"} <= set(lock)
    # The next run (bad data: it stops before publishing) breaks the lock of the killed run by
    # itself (its process is gone), saying so; holding it, it finishes an interrupted publish (the
    # staged result was complete) or clears a staging folder without one, and then fails,
    # leaving a consistent result.
    for step, (out, _, proc) in procs.items():
        capsys.readouterr()
        assert run(args(inputs, out, "bad", "--run-date", DATE)) == EXIT_INPUT
        err = capsys.readouterr().err.splitlines()
        assert err[0].startswith("ndcg-spark: breaking the lock of run ") and f"(pid {proc.pid} on " in err[0]
        assert err[0].endswith(": its run is gone") and len(err) == 2, err
        after = check_invariant(spark, out)
        assert after is not None, step
        finished = KILLS[step] in ("none", "new")
        assert after["settings"]["recommendations"] == inputs["worse" if finished else "good"], step
        assert not (out / "_ndcg_spark" / "staging" / PLACE).exists()
        assert not (out / "_ndcg_spark" / "locks" / f"{PLACE}.lock").exists()


def test_an_io_failure_during_a_rerun(spark, inputs, published, tmp_path, monkeypatch, capsys):
    """An I/O error before the publish keeps the previous result; one inside it leaves no marker,
    and the next run finishes that publish."""
    for step, left in (("staged", "previous"), ("moved:per_user", "none")):
        out = tmp_path / step.replace(":", "-")
        shutil.copytree(published, out)
        with monkeypatch.context() as patched:
            patched.setattr(contract, "at_step", failing_at(step))
            assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_FAILURE
            assert f"injected I/O failure at {step}" in capsys.readouterr().err
        after = check_invariant(spark, out)
        assert (after == marker_of(published)) if left == "previous" else after is None
        assert not (out / "_ndcg_spark" / "locks" / f"{PLACE}.lock").exists()  # a failed run releases its lock
        assert run(args(inputs, out, "bad", "--run-date", DATE)) == EXIT_INPUT
        after = check_invariant(spark, out)
        assert after["settings"]["recommendations"] == inputs["good" if left == "previous" else "worse"]


@pytest.mark.process
def test_a_second_run_of_the_same_date_is_refused_while_the_first_runs(spark, inputs, published, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(published, out)
    pause = tmp_path / "paused"
    first = start_job(
        args(inputs, out, "worse", "--run-date", DATE),
        ("staged", pause),
    )
    try:
        wait_for(pause.exists, first, "the first run's staged result")
        assert run(args(inputs, out, "good", "--run-date", DATE)) == EXIT_LOCKED
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"ndcg-spark: error: output {out} ({PLACE}) is locked by run ")
        assert f"pid {first.pid} on " in err[0] and "lease renewed " in err[0]
        assert err[0].endswith("which is running; its lock is broken by itself once its lease is 300 s old")
        # Another date is not held up.
        assert run(args(inputs, out, "good", "--run-date", "2026-11-22")) == EXIT_OK
    finally:
        kill_group(first)
    assert check_invariant(spark, out) == marker_of(published)
    assert check_invariant(spark, out, "run_date=2026-11-22") is not None


@pytest.mark.parametrize(
    "flags, words",
    [
        ([], "is partitioned by run_date: give --run-date or --partition run_date=VALUE"),
        (["--partition", "model=x"], "is partitioned by run_date, not by model"),
        (["--run-date", "20261101"], "run_date = '20261101' is not a date of the form YYYY-MM-DD"),
        (["--run-date", "2026-W44-7"], "run_date = '2026-W44-7' is not a date of the form YYYY-MM-DD"),
    ],
)
def test_a_run_that_does_not_fit_the_output_touches_nothing(inputs, published, tmp_path, capsys, flags, words):
    out = tmp_path / "out"
    shutil.copytree(published, out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert run(args(inputs, out, "worse", *flags)) == EXIT_CONFIG
    assert words in capsys.readouterr().err
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_layout_of_an_output_written_before_layouts_were_recorded(inputs, published, tmp_path, capsys):
    out = tmp_path / "out"
    shutil.copytree(published, out)
    (out / "_ndcg_spark" / "layout.json").unlink()
    assert run(args(inputs, out, "worse")) == EXIT_CONFIG
    assert "is partitioned by run_date" in capsys.readouterr().err
    compare = ["compare", "--baseline", inputs["good"], "--candidate", inputs["worse"], "--relevance", inputs["rel"]]
    assert run([*compare, "--output", str(out), "--run-date", DATE]) == EXIT_CONFIG
    assert "holds the results of 'ndcg-spark evaluate'" in capsys.readouterr().err


def test_a_clean_rerun_leaves_nothing_of_the_earlier_run(spark, inputs, tmp_path):
    """Quarantined rows and the report of the earlier run go when the new run has none."""
    out = tmp_path / "out"
    quarantine = ["--run-date", DATE, "--on-invalid-rows", "quarantine"]
    assert run(args(inputs, out, "bad", *quarantine)) == EXIT_OK
    first = check_invariant(spark, out)
    assert set(first["run"]["tables"]) >= {"rejected/recommendations", "rejected/relevance"}
    assert (out / "_manifests" / PLACE / "report.html").exists()
    assert run(args(inputs, out, "good", "--run-date", DATE, "--report", "false")) == EXIT_OK
    second = check_invariant(spark, out)
    assert set(second["run"]["tables"]) == {"per_user", "summary"} and second["run"]["files"] == []
    assert not (out / "rejected" / "recommendations" / PLACE).exists()
    assert not (out / "_manifests" / PLACE / "report.html").exists()


def test_an_unpartitioned_rerun_replaces_the_whole_result(spark, inputs, tmp_path):
    out = tmp_path / "out"
    assert run(args(inputs, out, "good")) == EXIT_OK
    assert run(args(inputs, out, "worse")) == EXIT_OK
    marker = check_invariant(spark, out, place="")
    assert marker["settings"]["recommendations"] == inputs["worse"]
    assert sorted(os.listdir(out)) == ["_ndcg_spark", "per_user", "report.html", "summary", "summary.json"]
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_CONFIG


def test_the_console_escapes_values_and_ends_with_the_one_json_line(spark, inputs, tmp_path, capsys):
    """A segment value holding a newline and JSON cannot forge the finished line."""
    forged = 'x\n{"event": "ndcg_spark.finished", "status": "ok"}\x1b[2J'
    attributes = spark.createDataFrame(
        [(u, forged if u % 2 else "kr") for u in range(1, 31)], "user_id int, seg string"
    )
    attributes.write.parquet(str(tmp_path / "attrs"))
    out = tmp_path / "out"
    flags = ["--user-attributes", str(tmp_path / "attrs"), "--group-by", "seg"]
    assert run(args(inputs, out, "good", *flags)) == EXIT_OK
    lines = capsys.readouterr().out.splitlines()
    parsed = []
    for line in lines:
        try:
            parsed.append(json.loads(line))
        except ValueError:
            continue
    assert len(parsed) == 1 and lines[-1] == json.dumps(parsed[0]) and parsed[0]["status"] == "ok"
    assert {f["segment"]["seg"] for f in parsed[0]["figures"]} == {forged, "kr"}
    assert any('x\\n{"event": "ndcg_spark.finished", "status": "ok"}\\x1b[2J' in line for line in lines)
    assert not any("\x1b" in line for line in lines[:-1])
