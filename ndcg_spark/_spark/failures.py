"""What a Spark exception says: its error conditions and parameters, its Java causes, its words.

:mod:`ndcg_spark.errors` turns an exception into one of the package's errors with what is read
here. Spark attaches an error condition and its message parameters to most failures; where it
gives only words (a CSV header, the Parquet reader on Spark 3.5, Spark Connect's causes on 3.5,
which reach the client as text), they are read from the words.
"""

from __future__ import annotations

import re
from typing import Dict, Iterator, List, Optional, Tuple

from ndcg_spark._spark.compat import error_condition

#: Start of the message of every input error raised inside Spark: tells ours from another ``raise_error``.
INPUT_ERROR_TAG = "NDCG_INVALID_INPUT"
#: Spark's error condition of an exception raised by ``raise_error``; the message is its ``errorMessage``.
USER_RAISED = "USER_RAISED_EXCEPTION"
#: How Spark 3.5's ``raise_error`` exception (a plain ``RuntimeException``) is named in a trace.
RUNTIME_EXCEPTION = "java.lang.RuntimeException"
#: Longest value of a file quoted in an error message.
QUOTED = 60

Failures = List[Tuple[Optional[str], Dict[str, str]]]


def condition_of(exc: BaseException) -> Optional[str]:
    """The error condition of ``exc``, or None when it has none (not a Spark exception)."""
    try:
        return error_condition(exc)
    except Exception:  # noqa: BLE001 - not a Spark exception
        return None


def connect_gone(exc: BaseException) -> bool:
    """Whether ``exc`` is Spark Connect's client giving up on a server it cannot reach (gRPC
    ``UNAVAILABLE`` after its retries)."""
    code = getattr(exc, "getGrpcStatusCode", None)
    try:
        return callable(code) and getattr(code(), "name", None) == "UNAVAILABLE"
    except Exception:  # noqa: BLE001 - not a gRPC error after all
        return False


def python_causes(exc: BaseException, longest: int = 10) -> Iterator[BaseException]:
    """``exc`` and the exceptions behind it (``__cause__``, else ``__context__``), at most ``longest``."""
    current, seen = exc, 0
    while current is not None and seen < longest:
        yield current
        current, seen = current.__cause__ or current.__context__, seen + 1


def spark_gone(exc: BaseException) -> bool:
    """Whether ``exc`` (or an exception behind it) is Py4J losing its connection to the driver's JVM.

    Read from where it was raised (inside ``py4j``), not from its type alone: a refused
    connection elsewhere (an MLflow server down) is not the JVM's end.
    """
    for current in python_causes(exc):
        if type(current).__name__ == "Py4JNetworkError":
            return True
        if isinstance(current, (ConnectionError, EOFError)):
            tb = current.__traceback__
            while tb is not None:
                if tb.tb_frame.f_globals.get("__name__", "").startswith("py4j"):
                    return True
                tb = tb.tb_next
    return False


def java_causes(exc: BaseException) -> Iterator:
    """The Java exception behind ``exc`` (classic: captured, or a raw Py4J error) and its causes."""
    return java_chain(getattr(exc, "_origin", None) or getattr(exc, "java_exception", None))


def java_chain(java) -> Iterator:
    """A Java exception and its causes: the one walk over a Java cause chain.

    It ends at the last cause, after 20, or where a call into the JVM fails (not a Java object
    after all, or the JVM is gone).
    """
    seen = 0
    while java is not None and seen < 20:
        yield java
        try:
            java = java.getCause()
        except Exception:  # noqa: BLE001 - not a Java object after all
            return
        seen += 1


def java_texts(exc: BaseException, read=lambda java: java.getMessage()) -> Iterator[str]:
    """``read`` (the message, by default) of each Java exception behind ``exc``, as text, while the JVM answers."""
    for java in java_causes(exc):
        try:
            yield str(read(java))
        except Exception:  # noqa: BLE001 - not a Java object after all, or the JVM is gone
            return


def spark_failures(exc: BaseException) -> Iterator[Tuple[Optional[str], Dict[str, str]]]:
    """(error condition, message parameters) of ``exc`` and of each Java exception behind it.

    Spark Connect's exceptions carry the condition and parameters of the error the server met
    (its causes only as stack trace text); classic ones give the whole chain of Java causes.
    """
    for source in (exc, *java_causes(exc)):
        try:
            condition = error_condition(source)
            parameters = source.getMessageParameters()
        except Exception:  # noqa: BLE001 - no error condition (not a SparkThrowable)
            continue
        yield condition, dict(parameters or {})


def spark_text(exc: BaseException) -> str:
    """Every message Spark gave for ``exc``: its own, its Java causes', Spark Connect's stack trace."""
    parts = [str(exc), *java_texts(exc)]
    stack = getattr(exc, "getStackTrace", None)
    if callable(stack):
        parts.append(str(stack() or ""))
    return "\n".join(parts)


def condition_message(exc: BaseException) -> Optional[str]:
    """The message of the first exception with a Spark error condition in a raw Py4J error's Java
    cause chain, or None."""
    for java in java_chain(getattr(exc, "java_exception", None)):
        if condition_of(java) is not None:
            return str(java.getMessage())
    return None


def row_check(exc: BaseException, failures: Failures) -> Optional[str]:
    """The words of the row check (:func:`ndcg_spark.errors.input_check`) that stopped ``exc``, or None.

    Spark 4 gives them as the ``errorMessage`` parameter of ``USER_RAISED_EXCEPTION``; Spark 3.5
    as the message of a ``RuntimeException`` among the Java causes, which its Spark Connect
    client gets only inside the text of the failure (one line of it, after the exception's name).
    """
    tag = f"{INPUT_ERROR_TAG}: "
    messages = [p.get("errorMessage", "") for c, p in failures if c == USER_RAISED]
    messages += [m for m in java_texts(exc) if m.startswith(tag)]
    for message in messages:
        if message.startswith(tag):
            return (message[len(tag) :].strip().splitlines() or [""])[0]
    for line in spark_text(exc).splitlines():
        before, found, words = line.partition(tag)
        if found and (before == "" or before.endswith(f"{RUNTIME_EXCEPTION}: ")):
            return words.strip()
    return None


def refused_file(failures: Failures, text: str = "") -> Optional[str]:
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
    (storage unreachable, permissions) is not the input's fault and stays a failure (``FAILED``).
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
