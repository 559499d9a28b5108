"""The job's exit codes: one table from an error's condition to the code the process ends with,
and the errors only the job raises.

The library's errors (:mod:`ndcg_spark.errors`) carry a condition and its parameters; what a
failure means to a process is decided here, and only here (docs/job.md, "Exit codes").
"""

from __future__ import annotations

import errno
import signal
from typing import Optional, Tuple

from ndcg_spark.errors import NdcgError, as_error, java_texts, python_causes

#: Exit codes of the ``ndcg-spark`` command and ``jobs/evaluate_ndcg.py``.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_INPUT = 3
EXIT_QUALITY_GATE = 4
EXIT_LOCKED = 5
EXIT_SPARK_GONE = 6

#: The exit code of each error condition. A condition not listed is read by its first part
#: (``INVALID_INPUT.ROW_CHECK`` as ``INVALID_INPUT``); one whose first part is not listed either
#: exits :data:`EXIT_FAILURE`. A signal's stop exits 128 + its number, as a shell reports it.
EXIT_CODES = {
    "INVALID_CONFIG": EXIT_CONFIG,
    "INVALID_INPUT": EXIT_INPUT,
    "QUALITY_GATE_FAILED": EXIT_QUALITY_GATE,
    "OUTPUT_LOCKED": EXIT_LOCKED,
    "SPARK_GONE": EXIT_SPARK_GONE,
    "STOPPED.SIGINT": 128 + signal.SIGINT,
    "STOPPED.SIGTERM": 128 + signal.SIGTERM,
}

#: Exits a retry cannot mend (the same run would end the same way): bad config or flags, invalid
#: input data, a failed gate. A scheduler retries the others (``ndcg_spark.airflow`` does).
NO_RETRY = frozenset({EXIT_CONFIG, EXIT_INPUT, EXIT_QUALITY_GATE})

#: What each exit code means, in a few words (README.md, "Job").
MEANINGS = {
    EXIT_FAILURE: "failed",
    EXIT_CONFIG: "bad config, flags or output",
    EXIT_INPUT: "invalid input data",
    EXIT_QUALITY_GATE: "a gate failed (outputs written)",
    EXIT_LOCKED: "a live run holds the output",
    EXIT_SPARK_GONE: "the Spark driver's JVM died",
    EXIT_CODES["STOPPED.SIGINT"]: "stopped by SIGINT",
    EXIT_CODES["STOPPED.SIGTERM"]: "stopped by SIGTERM",
}


class QualityGateFailed(NdcgError):
    """Outputs were written, but a gate (``--fail-below``, ``--fail-if-drop``, ...) was not met:
    condition ``QUALITY_GATE_FAILED``, exit code 4."""

    CONDITION = "QUALITY_GATE_FAILED"


class OutputLocked(NdcgError):
    """Another run holds the lock of the output (or partition) this run would write, or took it
    from this run: condition ``OUTPUT_LOCKED``, exit code 5."""

    CONDITION = "OUTPUT_LOCKED"


class Stopped(NdcgError):
    """The run was stopped by a signal: condition ``STOPPED.<signal>`` (``STOPPED.SIGTERM``),
    exit code 128 + the signal's number."""

    CONDITION = "STOPPED"

    def __init__(self, signum: int, message: str):
        name = signal.Signals(signum).name
        super().__init__(message, condition=f"STOPPED.{name}", parameters={"signal": name})


def exit_code(error: NdcgError) -> int:
    """The exit code of ``error``, by its condition (:data:`EXIT_CODES`).

    Examples
    --------
    >>> from ndcg_spark.errors import ConfigError, RowCheckFailed
    >>> exit_code(ConfigError("k must hold positive integers")), exit_code(RowCheckFailed("invalid input: x"))
    (2, 3)
    >>> exit_code(Stopped(signal.SIGTERM, "stopped by SIGTERM")), exit_code(NdcgError("anything else"))
    (143, 1)
    """
    condition = error.condition
    while condition not in EXIT_CODES and "." in condition:
        condition = condition.rsplit(".", 1)[0]
    return EXIT_CODES.get(condition, EXIT_FAILURE)


def signal_exit(signum: int) -> int:
    """The exit code of a run stopped by the signal ``signum`` (SIGTERM 143, SIGINT 130)."""
    return EXIT_CODES[f"STOPPED.{signal.Signals(signum).name}"]


def classify(exc: BaseException) -> Tuple[int, str]:
    """Exit code and one-line message for any exception the job can meet (:func:`~ndcg_spark.errors.as_error`)."""
    error = as_error(exc)
    return exit_code(error), (str(error).splitlines() or [type(error).__name__])[0]


def first_line(exc: BaseException) -> str:
    """The first line of what ``exc`` says (its class's name when it says nothing)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def failure(exc: BaseException, shown: Optional[str] = None) -> Tuple[int, str]:
    """Exit code and one-line message of a failed run (:func:`classify`), a full disk named as
    such with where it happened (``shown``: the output as messages name it)."""
    code, message = classify(exc)
    full = disk_full(exc)
    if full and shown is not None:
        code, message = (
            EXIT_FAILURE,
            f"{full} writing to {shown}: free space there (or raise the quota) and run again",
        )
    return code, message


#: Words of a write that found no room, as the OS (or Hadoop, quoting it) gives them.
NO_SPACE = (("No space left on device", "no space left on device"), ("Disk quota exceeded", "disk quota exceeded"))


def disk_full(exc: BaseException) -> Optional[str]:
    """ "no space left on device" (or "disk quota exceeded") when that is why ``exc`` happened, else None.

    Read from the Python exceptions and, for a Spark failure, the messages of its Java causes."""
    texts = []
    for current in python_causes(exc):
        if isinstance(current, OSError) and current.errno in (errno.ENOSPC, errno.EDQUOT):
            return NO_SPACE[current.errno == errno.EDQUOT][1]
        texts += [str(current), *java_texts(current, read=lambda java: java.toString())]
    text = "\n".join(texts)
    for words, line in NO_SPACE:
        if words in text:
            return line
    return None
