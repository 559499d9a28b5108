"""Progress lines on stderr: each phase with the seconds since the start, Spark's task counts
while a phase lasts, a heartbeat where there is no status tracker (Spark Connect), none with
``--quiet``. (A real run's lines, as they arrive: tests/test_job.py's README sample.)"""

from __future__ import annotations

import io
import time
from collections import namedtuple

import pytest

from ndcg_spark.job import progress
from ndcg_spark.job.config.parsing import parse_config

pytestmark = pytest.mark.job  # the job's tests: left out of the library's loop (CONTRIBUTING.md)

StageInfo = namedtuple("StageInfo", "stageId numTasks numCompletedTasks")


class Tracker:
    """Spark's status tracker, as PySpark gives it, with two stages running."""

    def getActiveStageIds(self):
        return [4, 3]

    def getStageInfo(self, stage):
        return {3: StageInfo(3, 8, 5), 4: StageInfo(4, 2, 0)}[stage]


class Classic:
    class sparkContext:  # noqa: N801 - the attribute's name in PySpark
        @staticmethod
        def statusTracker():
            return Tracker()


def lines_of(stream: io.StringIO):
    return [line.split("] ", 1)[1] for line in stream.getvalue().splitlines()]


def wait_until(condition, longest=5.0):
    deadline = time.monotonic() + longest
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_long_phase_reports_sparks_tasks_every_few_seconds():
    stream = io.StringIO()
    run = progress.Progress(stream, every=0.05)
    run.enter("evaluating and writing per_user")
    run.watch(Classic())
    wait_until(lambda: len(lines_of(stream)) >= 3)
    run.close()
    lines = lines_of(stream)
    assert lines[0] == "evaluating and writing per_user"
    assert lines[1] == "evaluating and writing per_user: 5/10 tasks done (stages 3, 4)"
    assert stream.getvalue().startswith("ndcg-spark: [    0.0 s] evaluating") and "\r" not in stream.getvalue()


def test_without_a_status_tracker_a_quiet_phase_says_it_is_still_working():
    """Over Spark Connect there is no status tracker: the phases, and a line when one lasts."""
    connect = type("SparkSession", (), {"__module__": "pyspark.sql.connect.session"})()
    stream = io.StringIO()
    run = progress.Progress(stream, every=0.05, quiet_for=0.1)
    run.watch(connect)
    run.enter("reading the inputs")
    wait_until(lambda: len(lines_of(stream)) >= 2)
    run.close()
    assert run.tracker is None and lines_of(stream)[:2] == ["reading the inputs", "reading the inputs: still working"]


@pytest.mark.parametrize("quiet, env, shown", [(False, None, True), (True, None, False), (False, "1", False)])
def test_quiet_flag_and_environment(monkeypatch, capsys, quiet, env, shown):
    monkeypatch.delenv(progress.QUIET_ENV, raising=False)
    if env is not None:
        monkeypatch.setenv(progress.QUIET_ENV, env)
    progress.start(quiet=quiet)
    progress.phase("starting Spark")
    progress.stop()
    assert (capsys.readouterr().err != "") == shown


def test_quiet_is_a_flag_of_the_job_not_a_setting(tmp_path):
    config, _ = parse_config(["--recommendations", "r", "--relevance", "l", "--output", str(tmp_path), "--quiet"])
    assert "quiet" not in config.to_dict()
