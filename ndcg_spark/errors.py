"""The package's errors, each with an error condition and its message parameters, at both ends of Spark.

Like pyspark's own errors, each carries a condition (``INVALID_INPUT.ROW_CHECK``) and the
parameters of its message (``error.condition``, ``error.parameters``), so a program tells one
failure from another without reading its words. What a failure means to a process (the
``ndcg-spark`` command's exit codes) is the job's, in one table: :mod:`ndcg_spark.job.exits`.

* Into Spark: :func:`input_check` is the SQL filter that stops a computation on a bad row with
  an input error (``raise_error``, whose exception carries Spark's ``USER_RAISED_EXCEPTION``
  condition and the message as its ``errorMessage`` parameter on Spark 4, and is a plain
  ``RuntimeException`` with the message on Spark 3.5).
* Out of Spark: :func:`as_error` turns any exception (classic ``pyspark.errors``, Spark
  Connect's, a raw Py4J error) into one of these errors, by the error conditions and message
  parameters Spark attaches (:mod:`ndcg_spark._spark.failures` reads them), and :func:`first_line`
  gives any exception as one line.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Mapping, Optional

from ndcg_spark._spark.failures import (
    INPUT_ERROR_TAG,
    condition_message,
    condition_of,
    row_check,
    spark_failures,
    spark_text,
)

# Read from this module by name (the job, the tests): where they are written, kept importable here.
from ndcg_spark._spark.failures import QUOTED as QUOTED
from ndcg_spark._spark.failures import connect_gone as connect_gone
from ndcg_spark._spark.failures import java_texts as java_texts
from ndcg_spark._spark.failures import malformed_row as malformed_row
from ndcg_spark._spark.failures import python_causes as python_causes
from ndcg_spark._spark.failures import refused_file as refused_file
from ndcg_spark._spark.failures import spark_gone as spark_gone
from ndcg_spark._spark.failures import unreadable_parquet as unreadable_parquet

#: The library's error conditions beyond each class's own, with their parameters (docs/conventions.md).
ROW_CHECK = "INVALID_INPUT.ROW_CHECK"  # check: the check's words, naming the row
INVALID_ROWS = "INVALID_INPUT.INVALID_ROWS"  # problems: each problem's line (validate)
EMPTY_TABLE = "INVALID_INPUT.EMPTY_TABLE"  # table
MISSING_COLUMN = "INVALID_INPUT.MISSING_COLUMN"  # table, column
COLUMN_TYPE = "INVALID_INPUT.COLUMN_TYPE"  # table, column, type
TYPES_DIFFER = "INVALID_INPUT.TYPES_DIFFER"  # column: of one type in a table, another in the other
UNREADABLE_TABLE = "INVALID_INPUT.UNREADABLE_TABLE"  # table, source, reason
UNREADABLE_FILE = "INVALID_INPUT.UNREADABLE_FILE"  # reason: a file Spark refused while computing


class NdcgError(Exception):
    """Base class of the errors this package raises on purpose.

    Parameters
    ----------
    message : str
        The error's one line, as ``str(error)`` gives it.
    condition : str, optional
        The error condition, ``NAME`` or ``NAME.SUBNAME`` (pyspark's convention); by default the
        class's own, :attr:`CONDITION`.
    parameters : mapping, optional
        The values the message was made of, by name (a path, a column, a check's words).

    Examples
    --------
    >>> error = InputDataError("relevance table is empty", condition="INVALID_INPUT.EMPTY_TABLE", parameters={"table": "relevance"})
    >>> error.condition, error.parameters, str(error)
    ('INVALID_INPUT.EMPTY_TABLE', {'table': 'relevance'}, 'relevance table is empty')
    >>> ConfigError("k must hold positive integers").condition
    'INVALID_CONFIG'
    """

    #: The condition of an error of this class when none more precise is given.
    CONDITION = "FAILED"

    def __init__(self, message: str = "", *, condition: Optional[str] = None, parameters: Optional[Mapping] = None):
        super().__init__(message)
        self.condition: str = condition or self.CONDITION
        self.parameters: Dict[str, Any] = dict(parameters or {})


class ConfigError(NdcgError, ValueError):
    """A bad option, flag or config file (condition ``INVALID_CONFIG``)."""

    CONDITION = "INVALID_CONFIG"


class InputDataError(NdcgError, ValueError):
    """Input tables that cannot be evaluated as they are (condition ``INVALID_INPUT``)."""

    CONDITION = "INVALID_INPUT"


class RowCheckFailed(InputDataError):
    """A row that failed one of the evaluation's checks inside Spark (:func:`input_check`):
    condition ``INVALID_INPUT.ROW_CHECK``, parameter ``check`` (the check's words).

    Its message is the check's, after ``invalid input:``; :func:`ndcg_spark.validate` counts every
    such problem of the tables.
    """

    CONDITION = ROW_CHECK


class SparkGone(NdcgError):
    """The Spark driver's JVM, or the Spark Connect server, ended under the run (killed, out of
    memory): condition ``SPARK_GONE.DRIVER`` or ``SPARK_GONE.CONNECT_SERVER``."""

    CONDITION = "SPARK_GONE"


#: The one line of :class:`SparkGone`.
SPARK_GONE = (
    "the Spark driver's JVM ended unexpectedly (killed? out of memory?): the run stopped; the previous "
    "result stands and the next run completes or clears what this one left"
)

#: The one line of a Spark Connect server that ended under the run (its client gave up retrying).
CONNECT_GONE = (
    "the Spark Connect server ended or cannot be reached (killed? out of memory?): the run stopped; the "
    "previous result stands and the next run completes or clears what this one left"
)

#: The one line of a driver JVM that PySpark could not start (condition ``SPARK_DID_NOT_START``).
JVM_DID_NOT_START = (
    "the Spark driver's JVM did not start (the lines above are its own): Java 17 must be on the PATH or in JAVA_HOME"
)


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
    """Our error for any exception, with its condition and parameters.

    An :class:`NdcgError` is itself; a row that failed one of our checks inside Spark is a
    :class:`RowCheckFailed`; a file Spark refused while computing (:func:`refused_file`) an
    :class:`InputDataError` (``INVALID_INPUT.UNREADABLE_FILE``); the driver's JVM or the Spark
    Connect server gone a :class:`SparkGone`; any other Spark failure an :class:`NdcgError`
    (``FAILED.EXCEPTION``) saying "Spark failed: " and Spark's first line (no Java or Py4J class);
    anything else one naming the exception's type and its first line.

    Examples
    --------
    >>> error = as_error(KeyError("no such key"))
    >>> error.condition, error.parameters, str(error)
    ('FAILED.EXCEPTION', {'type': 'KeyError', 'message': "'no such key'"}, "KeyError: 'no such key'")
    """
    if isinstance(exc, NdcgError):
        return exc
    if spark_gone(exc):
        return SparkGone(SPARK_GONE, condition="SPARK_GONE.DRIVER")
    if connect_gone(exc):
        return SparkGone(CONNECT_GONE, condition="SPARK_GONE.CONNECT_SERVER")
    if condition_of(exc) == "JAVA_GATEWAY_EXITED":  # PySpark could not start the driver's JVM
        return NdcgError(JVM_DID_NOT_START, condition="SPARK_DID_NOT_START")
    failures = list(spark_failures(exc))
    check = row_check(exc, failures)
    if check is not None:
        return RowCheckFailed(f"invalid input: {check}", parameters={"check": check})
    refused = refused_file(failures, spark_text(exc))
    if refused:
        return InputDataError(f"invalid input: {refused}", condition=UNREADABLE_FILE, parameters={"reason": refused})
    line = first_line(exc)
    # A Spark failure (Py4J's or PySpark's exception, a Java one inside) says what failed in
    # Spark's words; the class names are Spark's plumbing, not news to the reader (Spark 3.5
    # writes them into its lines: "(org.apache.spark.SparkException) Job aborted ...: java.lang.RuntimeException: boom").
    spark = type(exc).__module__.split(".")[0] in ("py4j", "pyspark")
    if spark:
        line = without_java_classes(line) or line
    return NdcgError(
        f"Spark failed: {line}" if spark else f"{type(exc).__name__}: {line}",
        condition="FAILED.EXCEPTION",
        parameters={"type": type(exc).__name__, "message": line},
    )


#: A Java exception's class as Spark writes it into a line: ``java.lang.RuntimeException: ``,
#: ``(org.apache.spark.SparkException) ``.
_JAVA_CLASS = re.compile(r"\(?\b(?:[a-z_][a-z0-9_]*\.)+[A-Z][A-Za-z0-9]*(?:Exception|Error)\b\)?:?\s*")


def without_java_classes(line: str) -> str:
    """``line`` less the Java exception class names Spark writes into it.

    >>> without_java_classes("(org.apache.spark.SparkException) Job aborted: java.lang.RuntimeException: boom")
    'Job aborted: boom'
    """
    return _JAVA_CLASS.sub("", line).strip()


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


def first_line(exc: BaseException) -> str:
    """The first informative line of an exception: no py4j call id, no Java class, no SQLSTATE.

    A raw Py4J error (a Spark job that failed in classic mode, e.g. reading a file of another
    format) is read at its first cause that carries a Spark error condition: the message that
    Spark Connect reports for the same failure.
    """
    text = condition_message(exc) or str(exc)
    for line in text.strip().splitlines():
        line = line.strip().lstrip(": ").strip()
        if not line or line.startswith("An error occurred while calling"):
            continue
        line = re.sub(r"^(?:[a-z]+\.)+[A-Za-z]+(?:Exception|Error): ", "", line)
        return line.split(" SQLSTATE:")[0].strip()
    return type(exc).__name__
