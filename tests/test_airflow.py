"""NdcgSparkOperator (ndcg_spark.airflow) under a real Apache Airflow 3.

Runs where Airflow is installed (``.ci/run``'s Airflow stage: ``pytest -m airflow
tests/test_airflow.py`` in an environment with the ``airflow`` extra); skipped elsewhere.

* Without a JVM: the exit codes Airflow retries, the job's output in the log as it comes, and
  ``on_kill`` as Airflow calls it (a SIGTERM handler in the task's process), against a stand-in
  job of a few lines of Python.
* ``airflow dags test`` (SQLite metadata in a folder of the test's own) runs
  tests/airflow_dags/ndcg_spark_tries.py on the bundled sample: a missing input and a failed gate
  each fail after one attempt; a night whose first try is stopped by its ``execution_timeout``
  (while it waits before publishing) ends that try with the job's own line, and its retry
  publishes the night and leaves the finished record in XCom; a try stopped from outside (the
  SIGTERM Airflow's supervisor sends) ends with the job's own line too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import runpy
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

if importlib.util.find_spec("airflow") is not None and "AIRFLOW_HOME" not in os.environ:
    # Airflow makes its home (~/airflow) on import: this process's is a folder of its own.
    os.environ["AIRFLOW_HOME"] = tempfile.mkdtemp(prefix="ndcg-spark-airflow-")
pytest.importorskip("airflow.sdk", reason="Apache Airflow 3 is not installed (pip install '.[airflow]')")

from airflow.sdk.exceptions import AirflowException, AirflowFailException  # noqa: E402

from ndcg_spark.airflow import NdcgSparkOperator, outcome  # noqa: E402
from tests.helpers import QUICK_JVM  # noqa: E402

pytestmark = [pytest.mark.airflow, pytest.mark.job]

ROOT = Path(__file__).resolve().parent.parent
DAGS = Path(__file__).resolve().parent / "airflow_dags"
#: The README's sample figures (mean NDCG@k of conf/sample.toml).
SAMPLE_NDCG = {"1": 0.0027784920013710743, "5": 0.0032702584505624552, "10": 0.003919226602903646}


# ----------------------------------------------------------------------------- without a JVM


@pytest.mark.parametrize(
    "code, retry",
    [
        (0, True),
        (1, True),
        (2, False),
        (3, False),
        (4, False),
        (5, True),
        (6, True),
        (130, True),
        (143, True),
        (-9, True),
    ],
)
def test_only_bad_config_bad_input_and_a_failed_gate_are_not_retried(code, retry):
    line = "ndcg-spark: error: the line"
    assert outcome(code, line)[0] is retry
    assert outcome(code, line)[1].endswith(": ndcg-spark: error: the line")


def test_the_modules_examples_run():
    import doctest

    import ndcg_spark.airflow

    results = doctest.testmod(ndcg_spark.airflow)
    assert results.attempted >= 5 and results.failed == 0


class Log:
    """A stand-in for the task's logger: (seconds since start, level, line)."""

    def __init__(self):
        self.start, self.lines = time.monotonic(), []

    def _add(self, level, fmt, *args):
        self.lines.append((time.monotonic() - self.start, level, fmt % args if args else fmt))

    def info(self, fmt, *args):
        self._add("info", fmt, *args)

    def warning(self, fmt, *args):
        self._add("warning", fmt, *args)

    def error(self, fmt, *args):
        self._add("error", fmt, *args)

    def text(self):
        """The lines from the operator's ``running ...`` on (before it: Airflow's own warnings)."""
        lines = [line for _, _, line in self.lines]
        return lines[next(i for i, line in enumerate(lines) if line.startswith("running ")) :] if lines else lines


class TaskInstance:
    def __init__(self):
        self.pushed = {}

    def xcom_push(self, key, value):
        self.pushed[key] = value


def stand_in(code: str, log: Log, monkeypatch, **kwargs) -> NdcgSparkOperator:
    """The operator running ``python -c code`` in place of the job, logging to ``log``."""
    monkeypatch.setattr(NdcgSparkOperator, "log", property(lambda self: log))
    return NdcgSparkOperator(task_id="ndcg", command=[sys.executable, "-c", textwrap.dedent(code)], **kwargs)


RECORD = '{"event": "ndcg_spark.finished", "status": "ok", "mean_ndcg": {"10": 0.25}}'


def test_exit_0_returns_the_finished_record_and_each_line_reaches_the_log_as_it_comes(monkeypatch):
    log = Log()
    task = stand_in(
        f"""
        import sys, time
        print("reading")
        print("progress on stderr", file=sys.stderr)
        time.sleep(1.5)
        print({RECORD!r})
        """,
        log,
        monkeypatch,
    )
    assert task.execute({"ti": TaskInstance()}) == json.loads(RECORD)
    when = {line: t for t, _, line in log.lines}
    assert log.text()[1:] == ["reading", "progress on stderr", RECORD]
    assert when["reading"] < when[RECORD] - 1.0 and when["progress on stderr"] < when[RECORD] - 1.0


def test_a_failed_gate_fails_without_retry_naming_its_line_and_keeps_the_record(monkeypatch):
    record = RECORD.replace('"ok"', '"quality_gate_failed"')
    task = stand_in(
        f"""
        import sys
        print({record!r})
        print("ndcg-spark: error: quality gate failed: mean NDCG@10 = 0.25 is below 0.5", file=sys.stderr)
        sys.exit(4)
        """,
        Log(),
        monkeypatch,
    )
    ti = TaskInstance()
    with pytest.raises(AirflowFailException) as failed:
        task.execute({"ti": ti})
    assert str(failed.value) == (
        "ndcg-spark exited 4 (a gate failed (outputs written)): "
        "ndcg-spark: error: quality gate failed: mean NDCG@10 = 0.25 is below 0.5"
    )
    assert ti.pushed == {"finished": json.loads(record)}


def test_a_locked_output_fails_so_that_airflow_retries(monkeypatch):
    task = stand_in(
        # Its last line without a newline, and not ASCII: logged whole at the end.
        "import sys; sys.stderr.write('ndcg-spark: error: a live run holds /out/\u00e9t\u00e9'); sys.exit(5)",
        Log(),
        monkeypatch,
    )
    with pytest.raises(AirflowException) as failed:
        task.execute({"ti": TaskInstance()})
    assert not isinstance(failed.value, AirflowFailException)
    assert (
        str(failed.value)
        == "ndcg-spark exited 5 (a live run holds the output): ndcg-spark: error: a live run holds /out/été"
    )


#: A stand-in job that, on SIGTERM, takes a moment to stop and says so as the job does.
STOPPING = """
    import signal, sys, time
    def stop(signum, frame):
        time.sleep(0.5)
        print('{"event": "ndcg_spark.finished", "status": "terminated"}', flush=True)
        print("ndcg-spark: error: stopped by SIGTERM before publishing /out", file=sys.stderr, flush=True)
        sys.exit(143)
    signal.signal(signal.SIGTERM, stop)
    print("working", flush=True)
    time.sleep(60)
"""


def stop_like_airflow(task: NdcgSparkOperator, log: Log, after: str, signals: int = 1) -> None:
    """As Airflow's task runner does on a stop from outside: a SIGTERM to the task's process, whose
    handler calls ``on_kill`` (the supervisor signals the task's process group; the job has its own)."""
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: task.on_kill())

    def send():
        while not any(line.startswith(after) for _, _, line in log.lines[1:]):
            time.sleep(0.05)
        for _ in range(signals):
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(0.1)

    threading.Thread(target=send, daemon=True).start()
    try:
        task.execute({"ti": TaskInstance()})
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_on_kill_stops_the_job_and_its_log_ends_with_the_jobs_own_line(monkeypatch):
    log = Log()
    task = stand_in(STOPPING, log, monkeypatch)
    with pytest.raises(AirflowException) as failed:
        stop_like_airflow(task, log, "working")
    assert not isinstance(failed.value, AirflowFailException)
    assert log.text()[-3:] == [
        '{"event": "ndcg_spark.finished", "status": "terminated"}',
        "ndcg-spark: error: stopped by SIGTERM before publishing /out",
        "ndcg-spark ended with exit code 143",
    ]


def test_on_kill_called_again_while_it_waits_leaves_the_job_to_its_clean_stop(monkeypatch):
    """A second SIGTERM would end the job at once: a stop from outside during a timeout's on_kill
    sends none."""
    log = Log()
    task = stand_in(STOPPING, log, monkeypatch)
    with pytest.raises(AirflowException):
        stop_like_airflow(task, log, "working", signals=2)
    assert [line for line in log.text() if line.startswith("stopping ")] == [
        f"stopping ndcg-spark: SIGTERM to its process group ({task._process.pid})"
    ]
    assert log.text().count('{"event": "ndcg_spark.finished", "status": "terminated"}') == 1
    assert log.text()[-1] == "ndcg-spark ended with exit code 143"


def test_on_kill_ends_a_job_that_does_not_stop_and_its_children_with_sigkill(monkeypatch):
    log = Log()
    task = stand_in(
        """
        import signal, subprocess, time
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        child = subprocess.Popen(["sleep", "300"])
        print("child", child.pid, flush=True)
        time.sleep(300)
        """,
        log,
        monkeypatch,
        grace_period=1.0,
    )
    started = time.monotonic()
    with pytest.raises(AirflowException, match="ndcg-spark was killed by SIGKILL") as failed:
        stop_like_airflow(task, log, "child")
    assert not isinstance(failed.value, AirflowFailException)
    assert time.monotonic() - started < 20
    child = int(next(line for line in log.text() if line.startswith("child ")).split()[1])
    time.sleep(0.2)
    assert not running(child)


def running(pid: int) -> bool:
    """Whether ``pid`` runs (neither gone nor a zombie left for an init that may never reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_the_example_dag_runs_the_job_nightly_and_reads_its_record():
    dag = runpy.run_path(str(ROOT / "examples" / "airflow" / "ndcg_nightly.py"))["dag"]
    evaluate = dag.get_task("evaluate")
    assert isinstance(evaluate, NdcgSparkOperator)
    assert evaluate.argv()[:3] == [sys.executable, "-m", "ndcg_spark"]
    assert evaluate.arguments == ["--config", str(ROOT / "conf" / "sample.toml"), "--run-date", "{{ ds }}"]
    assert (evaluate.retries, evaluate.execution_timeout) == (2, timedelta(hours=2))
    assert list(evaluate.downstream_task_ids) == ["report"]


# ----------------------------------------------------------------------------- a real Airflow


@pytest.fixture(scope="module")
def dag_run(tmp_path_factory):
    """``airflow dags test ndcg_spark_tries`` in an Airflow home of its own: (its output, the metadata DB)."""
    home, out = tmp_path_factory.mktemp("airflow_home"), tmp_path_factory.mktemp("airflow_out")
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "NDCG_SPARK_ROOT": str(ROOT),
        "NDCG_SPARK_OUT": str(out),
        "SPARK_SUBMIT_OPTS": f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {QUICK_JVM}".strip(),
    }
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], env=env, cwd=home, check=True, capture_output=True, timeout=300)
    ran = subprocess.Popen(
        [airflow, "dags", "test", "ndcg_spark_tries", "2026-11-25"],
        env=env,
        cwd=home,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    # A stop from outside: once stopped_from_outside waits before its publish, a SIGTERM to the
    # process the task runs in (``dags test`` runs the tasks in its own process), whose handler
    # Airflow's task runner installs to call on_kill.
    stop = threading.Thread(target=stop_when, args=(out / "stopped_from_outside.paused", ran), daemon=True)
    stop.start()
    try:
        output, _ = ran.communicate(timeout=600)
    finally:
        ran.kill()
    db = sqlite3.connect(home / "airflow.db")
    yield output, db, out
    db.close()


def stop_when(paused: Path, process: subprocess.Popen) -> None:
    while not paused.exists() and process.poll() is None:
        time.sleep(0.2)
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)


def tries(db, task_id):
    """(state, try number) of each try of ``task_id``, the earlier ones from the history."""
    earlier = db.execute("select state, try_number from task_instance_history where task_id = ?", (task_id,))
    last = db.execute("select state, try_number from task_instance where task_id = ?", (task_id,))
    return sorted([*earlier, *last], key=lambda row: row[1])


def xcom(db, task_id, key="return_value"):
    rows = db.execute("select value from xcom where task_id = ? and key = ?", (task_id, key)).fetchall()
    return json.loads(rows[0][0]) if rows else None


def task_logs(output: str, task_id: str) -> list:
    """Each try's log of ``task_id`` in ``airflow dags test``'s output (the message of each line)."""
    sections = re.split(r"^.*\[DAG TEST\] starting task_id=(\S+) .*$", output, flags=re.MULTILINE)
    found = [sections[i + 1] for i in range(1, len(sections), 2) if sections[i] == task_id]
    pattern = re.compile(
        r"^\S+Z \[\w+\s*\] (.*?)\s+\[airflow\.task\.operators\.ndcg_spark\.airflow\.NdcgSparkOperator\]"
    )
    return [[m.group(1) for m in map(pattern.match, text.splitlines()) if m] for text in found]


def test_a_missing_input_fails_after_one_attempt(dag_run):
    output, db, out = dag_run
    assert tries(db, "missing_input") == [("failed", 1)], output[-3000:]
    assert (
        f"AirflowFailException: ndcg-spark exited 3 (invalid input data): ndcg-spark: error: cannot read recommendations '{out}/nowhere.csv'"
        in output
    )


def test_a_failed_gate_fails_after_one_attempt_with_its_record_in_xcom(dag_run):
    output, db, out = dag_run
    assert tries(db, "failed_gate") == [("failed", 1)], output[-3000:]
    assert (
        "AirflowFailException: ndcg-spark exited 4 (a gate failed (outputs written)): ndcg-spark: error: quality gate failed: mean NDCG@10 = 0.003919 is below 0.5"
        in output
    )
    record = xcom(db, "failed_gate", "finished")
    assert record["status"] == "quality_gate_failed" and record["gates"].startswith("failed")
    assert xcom(db, "failed_gate") is None


def test_a_try_stopped_by_its_timeout_ends_with_the_jobs_line_and_the_retry_publishes(dag_run):
    output, db, out = dag_run
    assert tries(db, "night") == [("failed", 1), ("success", 2)], output[-3000:]
    first, second = task_logs(output, "night")
    # The first try: Airflow's timeout, on_kill's SIGTERM, then the job's own ending in the log.
    assert any(line.startswith("stopping ndcg-spark: SIGTERM to its process group") for line in first[:-3])
    # The job's own last lines: its finished record on stdout, then its one line on stderr.
    stopped = json.loads(first[-3])
    assert (stopped["status"], stopped["signal"], stopped["published"]) == ("terminated", "SIGTERM", False)
    assert first[-2] == (
        f"ndcg-spark: error: stopped by SIGTERM before publishing {out}/night (run_date=2026-11-25): "
        "the previous result is as it was"
    )
    assert first[-1] == "ndcg-spark ended with exit code 143"
    assert "AirflowTaskTimeout" in output
    # The retry: the night published, its finished record in XCom.
    record = xcom(db, "night")
    assert json.loads(next(line for line in reversed(second) if line.startswith('{"event"'))) == record
    assert (record["status"], record["partition"], record["users"]) == ("ok", {"run_date": "2026-11-25"}, 611)
    assert {k: record["mean_ndcg"][k] for k in SAMPLE_NDCG} == pytest.approx(SAMPLE_NDCG, rel=1e-12)
    assert (out / "night" / "_manifests" / "run_date=2026-11-25" / "summary.json").exists()
    assert list((out / "night").rglob("*.lock")) == []


def test_a_try_stopped_from_outside_ends_with_the_jobs_line_and_leaves_the_previous_result(dag_run):
    output, db, out = dag_run
    assert tries(db, "stopped_from_outside") == [("failed", 1)], output[-3000:]
    (log,) = task_logs(output, "stopped_from_outside")
    assert any(line.startswith("stopping ndcg-spark: SIGTERM to its process group") for line in log[:-3])
    assert (
        f"ndcg-spark: error: stopped by SIGTERM before publishing {out}/outside (run_date=2026-11-25): "
        "the previous result is as it was"
    ) == log[-2]
    assert json.loads(log[-3])["status"] == "terminated"
    assert log[-1] == "ndcg-spark ended with exit code 143"
    assert (
        "AirflowException: ndcg-spark exited 143 (stopped by SIGTERM): ndcg-spark: error: stopped by SIGTERM" in output
    )
    assert not (out / "outside" / "_manifests").exists() and list((out / "outside").rglob("*.lock")) == []


def test_a_job_whose_task_process_is_killed_gets_sigterm(tmp_path):
    """Airflow's supervisor kills the task's process 5 s after its SIGTERM (and a worker may die):
    the job, in a group of its own, gets SIGTERM then, and stops as it does on one."""
    stopped = tmp_path / "stopped"
    job = f"import pathlib, signal, time; signal.signal(signal.SIGTERM, lambda *a: pathlib.Path({str(stopped)!r}).touch()); print('ready', flush=True); time.sleep(30)"
    task = textwrap.dedent(
        f"""
        import sys
        from ndcg_spark.airflow import NdcgSparkOperator
        NdcgSparkOperator(task_id="ndcg", command=[sys.executable, "-c", {job!r}]).execute({{}})
        """
    )
    runner = subprocess.Popen([sys.executable, "-c", task], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in runner.stdout:
        if line.rstrip().endswith("ready") or " ready " in line:
            break
    runner.kill()
    runner.wait(10)
    deadline = time.monotonic() + 10
    while not stopped.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert stopped.exists()
