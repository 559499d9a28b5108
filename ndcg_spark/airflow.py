"""An Apache Airflow operator that runs the job as a task (``pip install 'ndcg-spark[airflow]'``).

:class:`NdcgSparkOperator` runs ``ndcg-spark`` (or ``spark-submit ... jobs/evaluate_ndcg.py``) as
a process of its own, in a process group of its own, and copies its stdout and stderr into the
task log line by line as they come. The job's exit code decides what Airflow does next:

* 0: the task succeeds and returns the job's finished record (its last stdout line, a JSON
  object) as a dict, which Airflow keeps as the task's XCom ``return_value``;
* 2, 3, 4 (bad config, invalid input, a failed gate): the same run would give the same answer, so
  the task fails without retrying (``AirflowFailException``), naming the job's one error line;
* anything else (1, 5, 130, 143, a signal): the task fails so that Airflow retries it, as
  ``retries`` allows. A retry needs no person: a run stopped or killed left the previous result
  in place, and the retry takes over its lock.

When Airflow stops the task (its ``execution_timeout``, or a stop from outside), :meth:`on_kill`
sends SIGTERM to the job's process group and waits for the job to end, copying its output, so the
stopped try's log ends with the job's own ``stopped by SIGTERM ...`` line.

Airflow is imported only here; the rest of the package never needs it.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from datetime import timedelta
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

# How the job ended, read from its one table of exit codes.
from ndcg_spark.job.exits import EXIT_OK, MEANINGS, NO_RETRY

try:  # Airflow 3
    from airflow.sdk import BaseOperator
    from airflow.sdk.exceptions import AirflowException, AirflowFailException
except ImportError:  # pragma: no cover - Airflow 2.x
    from airflow.exceptions import AirflowException, AirflowFailException
    from airflow.models import BaseOperator

__all__ = ["NdcgSparkOperator", "NO_RETRY", "outcome"]

#: prctl's option that sends a process a signal when its parent dies (linux/prctl.h).
PR_SET_PDEATHSIG = 1
#: The start of the job's one error line on stderr.
ERROR_PREFIX = "ndcg-spark: error: "
#: The ``event`` of the job's finished record.
FINISHED = "ndcg_spark.finished"


def outcome(returncode: int, error_line: Optional[str]) -> Tuple[bool, str]:
    """(whether a retry may mend it, one line) for a job that ended with ``returncode``.

    A negative ``returncode`` is a signal that ended the process (as :mod:`subprocess` gives it).

    Examples
    --------
    >>> outcome(3, "ndcg-spark: error: invalid input: recommendations not found: /data/recs")
    (False, 'ndcg-spark exited 3 (invalid input data): ndcg-spark: error: invalid input: recommendations not found: /data/recs')
    >>> outcome(-9, None)
    (True, 'ndcg-spark was killed by SIGKILL')
    """
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        message = f"ndcg-spark was killed by {name}"
    else:
        message = f"ndcg-spark exited {returncode} ({MEANINGS.get(returncode, 'failed')})"
    if error_line:
        message += f": {error_line}"
    return returncode not in NO_RETRY, message


def finished_record(line: Optional[str]) -> Optional[Dict[str, Any]]:
    """The job's finished record when ``line`` (its last stdout line) is one, else None.

    Examples
    --------
    >>> finished_record('{"event": "ndcg_spark.finished", "status": "ok"}')
    {'event': 'ndcg_spark.finished', 'status': 'ok'}
    >>> finished_record("wrote /out") is None
    True
    """
    try:
        record = json.loads(line or "")
    except ValueError:
        return None
    return record if isinstance(record, dict) and record.get("event") == FINISHED else None


def _terminated_with_parent() -> Optional[Callable[[], None]]:
    """What the job's process runs before it starts (Linux): SIGTERM to it when the task's process dies.

    Airflow's supervisor kills the task's process 5 s after its own SIGTERM, and a worker may die
    with SIGKILL; the job, in a group of its own, then gets the SIGTERM that stops it cleanly
    rather than running on with no one reading its output. None where there is no ``prctl``.
    Looked up here, in the task's process: the forked child only calls it (no import there)."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: on_kill still stops the job
        return None
    return lambda: prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)


class NdcgSparkOperator(BaseOperator):
    """Run the ndcg-spark job as an Airflow task.

    Parameters
    ----------
    arguments : list of str
        The job's flags, e.g. ``["--config", "conf/nightly.toml", "--run-date", "{{ ds }}"]``
        (templated). ``compare`` and its flags run a comparison.
    command : list of str, optional
        What runs the job (templated): by default the ``ndcg-spark`` of this operator's Python
        environment (``python -m ndcg_spark``); on a cluster, say,
        ``["spark-submit", "--master", "yarn", "jobs/evaluate_ndcg.py"]``.
    env : dict, optional
        Variables set for the job on top of the worker's environment (templated).
    cwd : str, optional
        The job's working directory (templated).
    grace_period : float or timedelta
        How long :meth:`on_kill` waits for the job to end after its SIGTERM before it sends
        SIGKILL (45 s: the job ends itself 30 s after a SIGTERM at the latest).
    **kwargs
        Any keyword of ``BaseOperator`` (``retries``, ``retry_delay``, ``execution_timeout``, ...).

    Examples
    --------
    >>> from datetime import timedelta
    >>> task = NdcgSparkOperator(
    ...     task_id="ndcg",
    ...     arguments=["--config", "conf/sample.toml", "--run-date", "{{ ds }}"],
    ...     retries=2,
    ...     execution_timeout=timedelta(hours=2),
    ... )
    >>> task.arguments[-1]
    '{{ ds }}'
    """

    template_fields: Sequence[str] = ("arguments", "command", "env", "cwd")
    ui_color = "#e8f4ea"

    def __init__(
        self,
        *,
        arguments: Sequence[str] = (),
        command: Optional[Sequence[str]] = None,
        env: Optional[Dict[str, str]] = None,
        cwd: Optional[str] = None,
        grace_period: Union[float, timedelta] = 45.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.arguments = list(arguments)
        self.command = list(command) if command is not None else None
        self.env = env
        self.cwd = cwd
        self.grace_period = grace_period.total_seconds() if isinstance(grace_period, timedelta) else float(grace_period)
        self._process: Optional[subprocess.Popen] = None
        self._done, self._stopping = True, False
        self._last_stdout: Optional[str] = None
        self._error_line: Optional[str] = None

    # ------------------------------------------------------------------ the run

    def argv(self) -> List[str]:
        """The job's command line: :attr:`command` (or ``python -m ndcg_spark``) and :attr:`arguments`."""
        command = self.command if self.command else [sys.executable, "-m", "ndcg_spark"]
        return [str(a) for a in (*command, *self.arguments)]

    def execute(self, context: Any) -> Optional[Dict[str, Any]]:
        argv = self.argv()
        self.log.info("running %s", " ".join(argv))
        # The job's prints reach the log as they come, not when a buffer fills.
        env = {**os.environ, **(self.env or {}), "PYTHONUNBUFFERED": "1"}
        self._last_stdout, self._error_line = None, None
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=self.cwd,
            # A group of its own: Airflow's signals to the task reach the job only through
            # on_kill, which waits for the job's own ending.
            start_new_session=True,
            preexec_fn=_terminated_with_parent(),
        )
        self._done, self._stopping = False, False
        copier = threading.Thread(target=self._copy, args=(self._process,), daemon=True)
        copier.start()
        threading.Thread(target=self._reap, args=(self._process, copier), daemon=True).start()
        # Short sleeps, no lock held: Airflow's timeout (SIGALRM) and stop (SIGTERM) handlers run
        # in this thread, and on_kill waits the same way.
        while not self._done:
            time.sleep(0.2)
        return self._result(self._process.returncode, context)

    def _copy(self, process: subprocess.Popen) -> None:
        """Log each line of the job's stdout and stderr as it comes, in the order they come (one
        reader for both: the job's finished record, then its error line, stay in that order)."""
        streams = {process.stdout.fileno(): True, process.stderr.fileno(): False}
        pending = {fd: b"" for fd in streams}
        with selectors.DefaultSelector() as selector:
            for fd in streams:  # stdout first: of two lines ready at once, the record was printed first
                selector.register(fd, selectors.EVENT_READ)
            while selector.get_map():
                for key, _ in sorted(selector.select(), key=lambda ready: not streams[ready[0].fd]):
                    chunk = os.read(key.fd, 65536)
                    if not chunk:
                        selector.unregister(key.fd)
                        lines, pending[key.fd] = [pending[key.fd]] if pending[key.fd] else [], b""
                    else:
                        *lines, pending[key.fd] = (pending[key.fd] + chunk).split(b"\n")
                    for raw in lines:
                        self._log_line(raw.decode("utf-8", "replace").rstrip("\r"), streams[key.fd])
        process.stdout.close()
        process.stderr.close()

    def _log_line(self, line: str, stdout: bool) -> None:
        """One line of the job's in the task log; remembers the last stdout line and the error line."""
        if stdout:
            if line.strip():
                self._last_stdout = line
            self.log.info("%s", line)
        elif line.startswith(ERROR_PREFIX):
            self._error_line = line
            self.log.error("%s", line)
        else:
            self.log.info("%s", line)

    def _reap(self, process: subprocess.Popen, copier: threading.Thread) -> None:
        """Wait for the job, then for the last of its output; the only waiter on the process."""
        process.wait()
        copier.join()
        self._done = True

    def _ended(self, timeout: float) -> bool:
        """Whether the job has ended with all its output in the log, waiting up to ``timeout`` s."""
        deadline = time.monotonic() + timeout
        while not self._done and time.monotonic() < deadline:
            time.sleep(0.1)
        return self._done

    def _result(self, returncode: int, context: Any) -> Optional[Dict[str, Any]]:
        record = finished_record(self._last_stdout)
        if returncode == EXIT_OK:
            if record is None:
                self.log.warning("ndcg-spark ended 0 without its finished record as its last line")
            return record
        if record is not None:
            # A failed gate (or a stop after publishing) wrote its outputs: their figures stay at hand.
            context["ti"].xcom_push(key="finished", value=record)
        retry, message = outcome(returncode, self._error_line)
        if retry:
            raise AirflowException(message)
        raise AirflowFailException(message)

    # ------------------------------------------------------------------ stopping

    def on_kill(self) -> None:
        """SIGTERM to the job's process group; wait for the job to end (up to :attr:`grace_period`),
        copying its output; then SIGKILL to what is left."""
        process = self._process
        if process is None or self._done or self._stopping:
            # Called again while it waits (a stop from outside during a timeout's on_kill): a
            # second SIGTERM would end the job at once, without its clean stop.
            return
        self._stopping = True
        self.log.info("stopping ndcg-spark: SIGTERM to its process group (%d)", process.pid)
        self._signal(process, signal.SIGTERM)
        if self._ended(self.grace_period):
            self.log.info("ndcg-spark ended with exit code %s", process.returncode)
            return
        self.log.warning("ndcg-spark did not end within %.0f s of its SIGTERM: SIGKILL", self.grace_period)
        self._signal(process, signal.SIGKILL)
        self._ended(10.0)

    @staticmethod
    def _signal(process: subprocess.Popen, signum: int) -> None:
        try:
            os.killpg(process.pid, signum)
        except ProcessLookupError:
            pass
