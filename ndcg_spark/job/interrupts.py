"""SIGTERM and SIGINT: what a scheduler sends first (a task timeout, a pod's deletion, preemption).

On the first of them the job cancels its Spark jobs (again every half second, so none starts
after), and the run goes on to its end the way the publish contract allows: a run that has not
written its journal stops before it (the previous result stays as it was); one that has finishes
its publish. Then it releases its lock, prints one line and its finished line, and exits 143
(SIGTERM) or 130 (SIGINT). A run that has not ended :data:`GRACE` seconds after the signal, or a
second signal, ends the process at once; its lock is then left to the next run, which breaks it
(:mod:`ndcg_spark.job.outputs.lease`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Optional

from ndcg_spark.job.exits import Stopped, signal_exit
from ndcg_spark.spark_support import is_connect

#: Seconds a run has to end after the first signal.
GRACE = 30.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)

_received: Optional[int] = None
_spark: Any = None
_previous: dict = {}


def name(signum: int) -> str:
    return signal.Signals(signum).name


def install(spark: Any = None) -> None:
    """Handle SIGTERM and SIGINT from now on (again after a SparkContext, which sets its own
    SIGINT handler, is made), cancelling ``spark``'s jobs when one comes."""
    global _spark
    if spark is not None:
        _spark = spark
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        previous = signal.signal(signum, _handler)
        if previous is not _handler:
            _previous.setdefault(signum, previous)


def reset() -> None:
    """Forget a signal received (for a next run in the same process) and restore the handlers
    there were before :func:`install`."""
    global _received, _spark
    _received, _spark = None, None
    if threading.current_thread() is threading.main_thread():
        for signum, previous in _previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
    _previous.clear()


def received() -> Optional[int]:
    """The signal received, or None."""
    return _received


def check() -> None:
    """Stop here (before a publish) when a signal came."""
    if _received is not None:
        raise Stopped(_received, f"stopped by {name(_received)}")


def _handler(signum: int, frame: Any) -> None:
    global _received
    if _received is not None:
        os._exit(signal_exit(_received))
    _received = signum
    # Never a call into Spark here: the main thread may be inside one, on the same connection.
    threading.Thread(target=_cancelling, args=(signum,), name="ndcg-spark-stop", daemon=True).start()


def _cancelling(signum: int) -> None:
    deadline = time.time() + GRACE
    # The cancelling calls in a thread of their own: one that blocks (a Spark Connect server gone,
    # whose client retries for minutes) must not hold back the end of the grace period.
    threading.Thread(target=_cancel_until, args=(deadline,), name="ndcg-spark-cancel", daemon=True).start()
    time.sleep(max(0.0, deadline - time.time()))
    print(
        f"ndcg-spark: error: stopped by {name(signum)}: the run did not end within {GRACE:.0f} s; ending it "
        "(its lock is broken by the next run)",
        file=sys.stderr,
        flush=True,
    )
    os._exit(signal_exit(signum))


def _cancel_until(deadline: float) -> None:
    """Cancel the session's jobs every half second until ``deadline`` (none may start after)."""
    while time.time() < deadline:
        spark = _spark
        try:
            if spark is not None and hasattr(spark, "sparkContext") and not is_connect(spark):
                spark.sparkContext.cancelAllJobs()
            elif spark is not None:
                spark.interruptAll()
        except Exception:  # noqa: BLE001 - a session stopping: nothing left to cancel
            pass
        time.sleep(0.5)


def tasks_ended(longest: float = 10.0) -> None:
    """Wait, at most ``longest`` seconds, until no task of the cancelled jobs runs: a killed task
    goes on until it looks, and one still writing would make a folder deleted under it anew."""
    spark = _spark
    if spark is None or is_connect(spark):
        return
    deadline = time.time() + longest
    while time.time() < deadline:
        try:
            infos = spark._jsc.sc().statusTracker().getExecutorInfos()
            if sum(info.numRunningTasks() for info in infos) == 0:
                return
        except Exception:  # noqa: BLE001 - a session stopping: no task left to wait for
            return
        time.sleep(0.2)


@contextmanager
def jvm_ignoring_sigterm() -> Iterator[None]:
    """While a local Spark is started: its JVM ignores SIGTERM (as PySpark has it ignore SIGINT).

    A scheduler signals the job's whole process group; the JVM must outlive the signal so that the
    driver can cancel its jobs and release its lock through it. It ends with the driver (PySpark's
    JVM exits when the driver's end of its standard input closes).
    """
    try:
        from pyspark import java_gateway
    except ImportError:  # pragma: no cover - PySpark is a dependency
        yield
        return
    original = getattr(java_gateway, "Popen", None)
    if original is None:
        yield
        return

    def popen(*args, **kwargs):
        before = kwargs.get("preexec_fn")

        def preexec():
            if before is not None:
                before()
            signal.signal(signal.SIGTERM, signal.SIG_IGN)

        kwargs["preexec_fn"] = preexec
        return original(*args, **kwargs)

    java_gateway.Popen = popen
    try:
        yield
    finally:
        java_gateway.Popen = original
