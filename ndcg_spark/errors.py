"""Errors with the exit codes the job maps them to, at both ends of Spark.

* Into Spark: :func:`input_check` is the SQL filter that stops a computation on a bad row with
  an input error (``raise_error``, whose exception carries Spark's ``USER_RAISED_EXCEPTION``
  condition and the message as its ``errorMessage`` parameter on Spark 4, and is a plain
  ``RuntimeException`` with the message on Spark 3.5).
* Out of Spark: :func:`as_error` turns any exception (classic ``pyspark.errors``, Spark
  Connect's, a raw Py4J error) into one of these errors, by the error conditions and message
  parameters Spark attaches, and :func:`first_line` gives any exception as one line.

The job prints ``str(error)`` as one line on stderr and exits with ``error.exit_code``.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Dict, Iterator, List, Optional, Tuple

from ndcg_spark._compat import error_condition

#: Exit codes of the ``ndcg-spark`` command and ``jobs/evaluate_ndcg.py``.
EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_CONFIG = 2
EXIT_INPUT = 3
EXIT_QUALITY_GATE = 4
EXIT_LOCKED = 5
EXIT_SPARK_GONE = 6

#: Start of the message of every input error raised inside Spark: tells ours from another ``raise_error``.
INPUT_ERROR_TAG = "NDCG_INVALID_INPUT"
#: Spark's error condition of an exception raised by ``raise_error``; the message is its ``errorMessage``.
USER_RAISED = "USER_RAISED_EXCEPTION"
#: Longest value of a file quoted in an error message.
QUOTED = 60


class NdcgError(Exception):
    """Base class of the errors this package raises on purpose."""

    exit_code = EXIT_FAILURE


class ConfigError(NdcgError, ValueError):
    """A bad option, flag or config file (exit code 2)."""

    exit_code = EXIT_CONFIG


class InputDataError(NdcgError, ValueError):
    """Input tables that cannot be evaluated as they are (exit code 3)."""

    exit_code = EXIT_INPUT


class RowCheckFailed(InputDataError):
    """A row that failed one of the evaluation's checks inside Spark (:func:`input_check`), exit code 3.

    Its message is the check's, after ``invalid input:``; :func:`ndcg_spark.validate` counts every
    such problem of the tables.
    """


class QualityGateFailed(NdcgError):
    """Outputs were written, but a ``--fail-below`` threshold was not met (exit code 4)."""

    exit_code = EXIT_QUALITY_GATE


class OutputLocked(NdcgError):
    """Another run holds the lock of the output (or partition) this run would write (exit code 5)."""

    exit_code = EXIT_LOCKED


class SparkGone(NdcgError):
    """The Spark driver's JVM ended under the run (killed, out of memory): exit code 6."""

    exit_code = EXIT_SPARK_GONE


#: The one line of :class:`SparkGone`.
SPARK_GONE = (
    "the Spark driver's JVM ended unexpectedly (killed? out of memory?): the run stopped; the previous "
    "result stands and the next run completes or clears what this one left"
)


#: The one line of a driver JVM that PySpark could not start (exit code 1).
JVM_DID_NOT_START = (
    "the Spark driver's JVM did not start (the lines above are its own): Java 17 must be on the PATH or in JAVA_HOME"
)


def _condition(exc: BaseException) -> Optional[str]:
    try:
        return error_condition(exc)
    except Exception:  # noqa: BLE001 - not a Spark exception
        return None


#: The one line of a Spark Connect server that ended under the run (its client gave up retrying).
CONNECT_GONE = (
    "the Spark Connect server ended or cannot be reached (killed? out of memory?): the run stopped; the "
    "previous result stands and the next run completes or clears what this one left"
)


def connect_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark Connect's client giving up on a server it cannot reach (gRPC
    ``UNAVAILABLE`` after its retries)."""
    code = getattr(exc, "getGrpcStatusCode", None)
    try:
        return callable(code) and getattr(code(), "name", None) == "UNAVAILABLE"
    except Exception:  # noqa: BLE001 - not a gRPC error after all
        return False


def spark_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception behind it) is Py4J losing its connection to the driver's JVM.

    Read from where it was raised (inside ``py4j``), not from its type alone: a refused
    connection elsewhere (an MLflow server down) is not the JVM's end.
    """
    current, seen = exc, 0
    while current is not None and seen < 10:
        if type(current).__name__ == "Py4JNetworkError":
            return True
        if isinstance(current, (ConnectionError, EOFError)):
            tb = current.__traceback__
            while tb is not None:
                if tb.tb_frame.f_globals.get("__name__", "").startswith("py4j"):
                    return True
                tb = tb.tb_next
        current, seen = current.__cause__ or current.__context__, seen + 1
    return False


# ----------------------------------------------------------------------------- into Spark


def input_check(condition: str, message: str) -> str:
    """SQL filter condition that keeps every row and stops the run with an input error on a row where
    ``condition`` holds.

    ``message`` is SQL text of a string (e.g. ``concat('...', CAST(user_id AS STRING))``): the error's
    words, which :func:`as_error` gives back as a :class:`RowCheckFailed`. As a filter the check
    cannot be pruned with an unread column: a filter runs whatever the action reads.

    Examples
    --------
    >>> input_check("x < 0", "'x is negative'")
    "(CASE WHEN x < 0 THEN raise_error(concat('NDCG_INVALID_INPUT: ', 'x is negative')) END) IS NULL"
    """
    return f"(CASE WHEN {condition} THEN raise_error(concat('{INPUT_ERROR_TAG}: ', {message})) END) IS NULL"


# ----------------------------------------------------------------------------- out of Spark


def as_error(exc: BaseException) -> NdcgError:
    """Our error for any exception, with its exit code.

    An :class:`NdcgError` is itself; a row that failed one of our checks inside Spark is a
    :class:`RowCheckFailed`; a file Spark refused while computing (:func:`refused_file`) an
    :class:`InputDataError`; anything else an :class:`NdcgError` (exit code 1) naming the
    exception's type and its first line.
    """
    if isinstance(exc, NdcgError):
        return exc
    if spark_gone(exc):
        return SparkGone(SPARK_GONE)
    if connect_gone(exc):
        return SparkGone(CONNECT_GONE)
    if _condition(exc) == "JAVA_GATEWAY_EXITED":  # PySpark could not start the driver's JVM
        return NdcgError(JVM_DID_NOT_START)
    failures = list(_spark_failures(exc))
    for condition, parameters in failures:
        text = parameters.get("errorMessage", "") if condition == USER_RAISED else ""
        if text.startswith(f"{INPUT_ERROR_TAG}: "):
            return RowCheckFailed("invalid input: " + _one_line(text[len(INPUT_ERROR_TAG) + 2 :]))
    text = _text(exc)
    # Spark 3.5's raise_error has no condition: its RuntimeException's message is the text itself.
    raised = re.search(rf"(?m)(?:^|java\.lang\.RuntimeException: ){INPUT_ERROR_TAG}: (.*)$", text)
    if raised:
        return RowCheckFailed("invalid input: " + raised.group(1).strip())
    refused = refused_file(failures, text)
    if refused:
        return InputDataError("invalid input: " + refused)
    return NdcgError(f"{type(exc).__name__}: {first_line(exc)}")


@contextmanager
def input_errors() -> Iterator[None]:
    """Inside: bad input that Spark meets while computing (a row that fails a check, a file it
    cannot read) is raised as :class:`RowCheckFailed` or :class:`InputDataError`, with the job's
    one line and Spark's exception as its cause; any other exception as it was.

    The library's own actions run inside it (``validate``, ``compare``'s report, the row
    accounting, ``NdcgEvaluator``); wrap your own actions on its results the same way.

    Examples
    --------
    >>> from ndcg_spark import evaluate
    >>> recs = spark.createDataFrame([(1, "a", 0.9)], "user_id int, item_id string, score double")
    >>> rel = spark.createDataFrame([(1, "a", -1.0)], "user_id int, item_id string, relevance double")
    >>> with input_errors():
    ...     evaluate(recs, rel).summary.collect()
    Traceback (most recent call last):
    ...
    ndcg_spark.errors.RowCheckFailed: invalid input: relevance column 'relevance' is negative ...
    """
    try:
        yield
    except NdcgError:
        raise
    except Exception as exc:  # noqa: BLE001 - read back by its condition, re-raised when not input
        error = as_error(exc)
        if isinstance(error, InputDataError):
            raise error from exc
        raise


def refused_file(failures: List[Tuple[str, Dict[str, str]]], text: str = "") -> Optional[str]:
    """A one-line message for an input file Spark refused while computing, or None.

    ``failures``: (error condition, message parameters) of an exception and its causes. A CSV row
    whose fields do not match the header and a Parquet file that stores a column with another type
    than the table's are told by their conditions; a CSV file whose header is not the table's only
    by Spark's words, read by :func:`malformed_row` in ``text`` (the messages Spark gave).
    """
    found = {condition: parameters for condition, parameters in failures if condition}
    # FAILED_READ_FILE.* on Spark 4; Spark 3.5 names the file in a legacy condition's parameters.
    paths = [
        p["path"]
        for c, p in sorted(found.items(), key=lambda f: not f[0].startswith("FAILED_READ_FILE"))
        if "path" in p
    ]
    record = found.get("MALFORMED_CSV_RECORD", {}).get("badRecord")
    if record is not None:
        return _bad_record(paths[0] if paths else None, record)
    parquet = found.get("FAILED_READ_FILE.PARQUET_COLUMN_DATA_TYPE_MISMATCH", {})
    if {"path", "column", "expectedType", "actualType"} <= set(parquet):
        column = parquet["column"].strip("[]")
        return _type_mismatch(parquet["path"], column, parquet["expectedType"], parquet["actualType"])
    return malformed_row(text) or unreadable_parquet(paths, text)


#: The Parquet reader's words for a file cut short, damaged, or not Parquet at all (Spark 3.5 and 4.x).
_NOT_PARQUET = (
    r"is not a Parquet file|Expected magic number|corrupted file: the footer|"
    r"can not read class org\.apache\.parquet|ParquetDecodingException"
)


def unreadable_parquet(paths: List[str], text: str) -> Optional[str]:
    """A one-line message for a Parquet file that cannot be read (truncated, damaged, not Parquet), or None.

    Spark 4 names the file in a ``FAILED_READ_FILE`` condition (``paths``); Spark 3.5 only in the
    reader's words, which for a damaged footer do not name it. Any other failure to read a file
    (storage unreachable, permissions) is not the input's fault and stays a failure (exit code 1).
    """
    if not re.search(_NOT_PARQUET, text):
        return None
    named = re.search(r"(\S+) is not a Parquet file|while reading file (\S+?)\.?(?:\s|$)", text)
    file = paths[0] if paths else next((g for g in named.groups() if g), None) if named else None
    where = _as_uri(file) if file else "a file of the input (Spark did not name it)"
    return f"{where} cannot be read as Parquet: it is truncated, damaged or not a Parquet file"


def _as_uri(path: str) -> str:
    """A local path as Spark 4 writes it in messages (``file:///x``; Hadoop's own words have ``file:/x``)."""
    return re.sub(r"^file:/(?!/)", "file:///", path)


def malformed_row(text: str) -> Optional[str]:
    """A one-line message for an input file that Spark refused while computing, from its words.

    A CSV row whose fields do not match the header, a CSV file whose header is not the table's
    (:func:`ndcg_spark.reading.read_table` has Spark compare every file's header with the
    table's columns), or a Parquet file that stores a column with another type than the table's
    schema. None for any other error. Spark gives the header's mismatch in words only; the other
    two are read here when no error condition names them (:func:`refused_file`).
    """
    file = re.search(r"(?:while reading file|in file|CSV file:) (\S+?)\.?(?:\s|$)", text)
    record = re.search(r"Malformed CSV record: (.*?)(?: SQLSTATE|\n|$)", text)
    if record:
        return _bad_record(file.group(1) if file else None, record.group(1))
    where = file.group(1) if file else "a file"
    header = re.search(r"CSV header does not conform to the schema\.\s+Header: (.*)\n\s*Schema: (.*)\n", text)
    if header:
        return (
            f"{where} has the header {header.group(1)[: 2 * QUOTED]!r} where the table's columns are "
            f"{header.group(2)[: 2 * QUOTED]!r}: every CSV file of a table must begin with the same header, "
            "in the same order"
        )
    count = re.search(r"Number of column in CSV header is not equal.*\s+Header length: (\d+), schema size: (\d+)", text)
    if count:
        return (
            f"{where} has a header of {count.group(1)} columns where the table has {count.group(2)}: "
            "every CSV file of a table must begin with the same header, in the same order"
        )
    parquet = re.search(
        r"Parquet column \[(.*?)\]\. Expected Spark type (.+?), actual Parquet type (\w+)"
        r"|Column: \[(.*?)\], Expected: (.+?), Found: (\w+)",
        text,
    )
    if parquet:
        column, expected, found = (g for g in parquet.groups() if g is not None)
        return _type_mismatch(where, column, expected, found)
    return None


def _bad_record(file: Optional[str], record: str) -> str:
    where = f"{file} has" if file else "a CSV file has"
    return f"{where} a row whose fields do not match its header: {record[:QUOTED]!r}"


def _type_mismatch(file: str, column: str, expected: str, found: str) -> str:
    return (
        f"{file} stores column {column!r} as {found} where the table's schema has {expected}: "
        "the files of one table must store each column with one type"
    )


def first_line(exc: BaseException) -> str:
    """The first informative line of an exception: no py4j call id, no Java class, no SQLSTATE.

    A raw Py4J error (a Spark job that failed in classic mode, e.g. reading a file of another
    format) is read at its first cause that carries a Spark error condition: the message that
    Spark Connect reports for the same failure.
    """
    text = _spark_condition_message(getattr(exc, "java_exception", None)) or str(exc)
    for line in text.strip().splitlines():
        line = line.strip().lstrip(": ").strip()
        if not line or line.startswith("An error occurred while calling"):
            continue
        line = re.sub(r"^(?:[a-z]+\.)+[A-Za-z]+(?:Exception|Error): ", "", line)
        return line.split(" SQLSTATE:")[0].strip()
    return type(exc).__name__


def _one_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _java_causes(exc: BaseException) -> Iterator:
    """The Java exception behind ``exc`` (classic: captured, or a raw Py4J error) and its causes."""
    java, seen = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None), 0
    while java is not None and seen < 20:
        yield java
        try:
            java = java.getCause()
        except Exception:  # noqa: BLE001 - not a Java object after all
            return
        seen += 1


def _spark_failures(exc: BaseException) -> Iterator[Tuple[Optional[str], Dict[str, str]]]:
    """(error condition, message parameters) of ``exc`` and of each Java exception behind it.

    Spark Connect's exceptions carry the condition and parameters of the error the server met
    (its causes only as stack trace text); classic ones give the whole chain of Java causes.
    """
    for source in (exc, *_java_causes(exc)):
        try:
            condition = error_condition(source)
            parameters = source.getMessageParameters()
        except Exception:  # noqa: BLE001 - no error condition (not a SparkThrowable)
            continue
        yield condition, dict(parameters or {})


def _text(exc: BaseException) -> str:
    """Every message Spark gave for ``exc``: its own, its Java causes', Spark Connect's stack trace."""
    parts = [str(exc)]
    for java in _java_causes(exc):
        try:
            parts.append(str(java.getMessage()))
        except Exception:  # noqa: BLE001 - not a Java object after all
            break
    stack = getattr(exc, "getStackTrace", None)
    if callable(stack):
        parts.append(str(stack() or ""))
    return "\n".join(parts)


def _spark_condition_message(java_exception) -> Optional[str]:
    """The message of the first exception in a Java cause chain with a Spark error condition."""
    seen = 0
    while java_exception is not None and seen < 20:
        try:
            if error_condition(java_exception) is not None:
                return str(java_exception.getMessage())
        except Exception:  # noqa: BLE001 - not a SparkThrowable
            pass
        java_exception, seen = java_exception.getCause(), seen + 1
    return None
