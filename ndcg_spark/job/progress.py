"""Progress on stderr while the job works: plain lines a scheduler's task log can hold.

Each phase (starting Spark, reading, evaluating and writing ``per_user``, the summary, the
report, publishing, MLflow) prints one line with the seconds since the job started; while a
phase lasts, a line every :data:`EVERY` seconds gives Spark's completed and total tasks of the
stages running (from the status tracker), or, where there is none (Spark Connect) or no stage
runs, that the phase is still working (every :data:`QUIET_FOR` seconds). Lines, never a
carriage-return bar: a task log keeps each one, with the time it came. ``--quiet`` (or the
environment variable ``NDCG_SPARK_QUIET=1``) prints none.

::

    ndcg-spark: [   0.0 s] starting Spark
    ndcg-spark: [   6.1 s] reading the inputs
    ndcg-spark: [   7.9 s] evaluating and writing per_user
    ndcg-spark: [  12.9 s] evaluating and writing per_user: 9/16 tasks done (stage 4)
"""

from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, Optional, TextIO

from ndcg_spark.spark_support import is_connect

#: Seconds between two lines of Spark's task counts within a phase.
EVERY = 5.0
#: Seconds a phase may go without a line before it prints that it is still working.
QUIET_FOR = 30.0
#: The environment variable that quiets the lines, as ``--quiet`` does.
QUIET_ENV = "NDCG_SPARK_QUIET"


class Progress:
    """The lines of one run: its start, its current phase and the thread that reports on it."""

    def __init__(self, stream: Optional[TextIO] = None, every: float = EVERY, quiet_for: float = QUIET_FOR):
        self.stream, self.every, self.quiet_for = stream, every, quiet_for
        self.started = time.monotonic()
        self.phase: Optional[str] = None
        self.last_line = self.started
        self.tracker: Any = None
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None

    def line(self, text: str) -> None:
        stream = self.stream or sys.stderr
        with self._lock:
            now = time.monotonic()
            self.last_line = now
            try:
                # One write, newline included: the JVM writes to the same stderr.
                stream.write(f"ndcg-spark: [{now - self.started:7.1f} s] {text}\n")
                stream.flush()
            except (OSError, ValueError):  # a closed stderr: nothing to tell
                pass

    def enter(self, phase: str) -> None:
        self.phase = phase
        self.line(phase)

    def watch(self, spark: Any) -> None:
        """Report Spark's tasks from now on (classic Spark; over Spark Connect the phases only)."""
        try:
            self.tracker = None if is_connect(spark) else spark.sparkContext.statusTracker()
        except Exception:  # noqa: BLE001 - no status tracker: the phases and the heartbeat only
            self.tracker = None
        if self._thread is None:
            self._thread = threading.Thread(target=self._reporting, name="ndcg-spark-progress", daemon=True)
            self._thread.start()

    def close(self) -> None:
        self._stop.set()

    def tasks(self) -> Optional[str]:
        """``done/total tasks done (stage N, ...)`` of the stages running, or None."""
        if self.tracker is None:
            return None
        try:
            infos = [self.tracker.getStageInfo(s) for s in sorted(self.tracker.getActiveStageIds())]
        except Exception:  # noqa: BLE001 - the session stopping (or its JVM gone): nothing to count
            return None
        infos = [i for i in infos if i is not None]
        if not infos:
            return None
        done, total = sum(i.numCompletedTasks for i in infos), sum(i.numTasks for i in infos)
        stages = ", ".join(str(i.stageId) for i in infos)
        return f"{done}/{total} tasks done (stage{'s' if len(infos) > 1 else ''} {stages})"

    def _reporting(self) -> None:
        last_tasks = time.monotonic()
        while not self._stop.wait(min(1.0, self.every)):
            phase, now = self.phase, time.monotonic()
            if phase is None:
                continue
            if now - last_tasks >= self.every:
                counts = self.tasks()
                if counts is not None:
                    self.line(f"{phase}: {counts}")
                    last_tasks = now
                    continue
            if now - self.last_line >= self.quiet_for:
                self.line(f"{phase}: still working")


_current: Optional[Progress] = None


def start(quiet: bool = False, stream: Optional[TextIO] = None, every: float = EVERY) -> None:
    """Begin a run's lines (none when ``quiet`` or :data:`QUIET_ENV` says so); the clock starts here."""
    global _current
    stop()
    if quiet or os.environ.get(QUIET_ENV, "").strip().lower() in ("1", "true", "yes", "on"):
        return
    _current = Progress(stream, every)


def watch(spark: Any) -> None:
    """Count ``spark``'s tasks in the lines of the current run."""
    if _current is not None:
        _current.watch(spark)


def phase(name: str) -> None:
    """The run enters phase ``name``: one line."""
    if _current is not None:
        _current.enter(name)


def stop() -> None:
    """End the current run's lines (the reporting thread stops within a second)."""
    global _current
    if _current is not None:
        _current.close()
    _current = None
