"""Reading input tables as users have them: Parquet, ORC, CSV, JSON lines, TREC runs and qrels.

Text formats carry no types, and guessing them changes keys: schema inference reads the items
``007`` and ``7`` as the same integer. So CSV and JSON are read with every column as a string,
then the numeric columns of the table's role (the score or rank of the recommendations, the
relevance of the judgements) as ``double``. A schema names the columns whose type the user
sets; it overrides those defaults, for any format. A value that does not fit its type stops
the run with its column and value, never becomes a silent null.

TREC files are whitespace-separated text: a run (``qid Q0 docno rank score tag``) read as
recommendations, and qrels (``qid iter docno rel``) read as relevance, with the user and item
columns named by the options. Every read error is one line that names the cause.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._spark.compat import is_connect, parse_ddl
from ndcg_spark._spark.sql import ident, string_literal
from ndcg_spark.errors import (
    EMPTY_TABLE,
    MISSING_COLUMN,
    QUOTED,
    UNREADABLE_TABLE,
    ConfigError,
    InputDataError,
    first_line,
    input_check,
)
from ndcg_spark.options import EvaluationOptions

FORMATS = ("parquet", "csv", "json", "orc", "trec")
ROLES = ("recommendations", "relevance", "user_attributes", "interactions", "items", "baseline_recommendations")
#: TREC columns, in file order, with the option naming each (None: a fixed name) and its type.
TREC_RUN = (("user_col", "qid", "string"), (None, "q0", "string"), ("item_col", "docno", "string"),
            (None, "rank", "int"), ("score_col", "score", "double"), (None, "tag", "string"))  # fmt: skip
TREC_QRELS = (("user_col", "qid", "string"), (None, "iteration", "string"), ("item_col", "docno", "string"),
              ("relevance_col", "rel", "double"))  # fmt: skip
TREC_TYPES = {"int": T.IntegerType(), "double": T.DoubleType()}


def read_table(
    spark,
    source: str,
    format: str = "parquet",
    *,
    role: str = "recommendations",
    schema: Optional[str] = None,
    options: Optional[EvaluationOptions] = None,
    label: Optional[str] = None,
) -> DataFrame:
    """One input table, read so that its keys stay as written.

    Parameters
    ----------
    spark : SparkSession
    source : str
        A path (anything holding a ``/`` or a URI scheme, or an existing file), or else a
        catalog table name.
    format : {"parquet", "csv", "json", "orc", "trec"}
        Format of a path. CSV has a header row, the same in every file of a folder; JSON has one
        object per line; ``trec`` is a TREC run (role ``recommendations``) or qrels file (role
        ``relevance``).
    role : {"recommendations", "relevance", "user_attributes", "interactions", "items", "baseline_recommendations"}
        Which table this is: it decides the numeric columns of CSV and JSON, and the TREC layout.
    schema : str, optional
        Column types in Spark's DDL, e.g. ``"user_id int, score double"``: the columns named are
        read as these types (every other column keeps the default).
    options : EvaluationOptions, optional
        The column names (``user_col``, ``item_col``, ``score_col``, ...) to read; defaults when
        omitted.
    label : str, optional
        The table's name in messages (default: the role).

    Returns
    -------
    DataFrame
        Lazy. A value that does not fit its column's type stops the first action that reads it,
        naming the column and the value.

    Raises
    ------
    ConfigError
        An unknown format or role, or a schema that does not parse.
    InputDataError
        A path or table that does not exist, is empty or is not in the declared format.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "recs.csv"
    >>> _ = path.write_text("user_id,item_id,score\\n1,007,0.9\\n1,7,0.8\\n")
    >>> recs = read_table(spark, str(path), "csv")
    >>> recs.dtypes
    [('user_id', 'string'), ('item_id', 'string'), ('score', 'double')]
    >>> [r.item_id for r in recs.collect()]
    ['007', '7']
    >>> read_table(spark, str(path), "csv", schema="user_id int").dtypes[0]
    ('user_id', 'int')
    """
    opts = options if options is not None else EvaluationOptions()
    if format not in FORMATS:
        raise ConfigError(f"format = {format!r} is not one of {', '.join(FORMATS)}")
    if role not in ROLES:
        raise ConfigError(f"role = {role!r} is not one of {', '.join(ROLES)}")
    if format == "trec" and role in ("user_attributes", "interactions", "items"):
        what = role.replace("_", " ")
        raise ConfigError(f"the trec format reads a run (recommendations) or qrels (relevance), not {what}")
    label = label or role.replace("_", " ")
    types = parse_schema(schema, label, spark)
    is_path = "/" in source or "://" in source or os.path.exists(source)
    where = format if is_path else "a table"
    try:
        if is_path:
            _probe(spark, source)
        if not is_path:
            df = spark.read.table(source)
        elif format == "trec":
            df = _read_trec(
                spark,
                source,
                TREC_RUN if role in ("recommendations", "baseline_recommendations") else TREC_QRELS,
                opts,
                label,
            )
        else:
            df = _reader(spark, format).load(source)
            if format == "csv":
                df = _headers_checked(spark, source, df)
        # Over Spark Connect the reader is lazy: asking for the columns is what reads the schema.
        columns = df.columns
    except (ConfigError, InputDataError):
        raise
    except Exception as exc:  # AnalysisException, Py4JJavaError: missing, unreadable, wrong format
        cause = read_failure(exc, format)
        raise InputDataError(
            f"cannot read {label} {source!r} as {where}: {cause}{_hint(source, format, is_path, cause, role)}",
            condition=UNREADABLE_TABLE,
            parameters={"table": label, "source": source, "reason": cause},
        ) from exc
    if not columns:
        raise InputDataError(
            f"cannot read {label} {source!r} as {where}: it is empty",
            condition=EMPTY_TABLE,
            parameters={"table": label, "source": source},
        )
    text = is_path and format in ("csv", "json")
    defaults = {name: T.DoubleType() for name in numeric_columns(role, opts)} if text else {}
    return cast_columns(df, {**defaults, **types}, label, required=list(types))


def numeric_columns(role: str, opts: EvaluationOptions) -> List[str]:
    """The columns of a table that hold numbers: the score or rank, or the relevance."""
    if role in ("recommendations", "baseline_recommendations"):
        return [opts.rank_col] if opts.rank_col else [opts.score_col]
    return [opts.relevance_col] if role == "relevance" else []


def parse_schema(schema: Optional[str], label: str, spark=None) -> Dict[str, T.DataType]:
    """``{column: type}`` from a DDL schema such as ``"user_id string, score double"``, parsed by ``spark``'s Spark."""
    if schema is None or not str(schema).strip():
        return {}
    try:
        parsed = parse_ddl(str(schema), spark)
    except Exception as exc:
        # Spark 3.5 ends the line with the position, which Spark 4 gives on lines of its own.
        reason = re.sub(r"\s*\(line \d+, pos \d+\)$", "", first_line(exc))
        raise ConfigError(f"{label} schema {schema!r} does not parse: {reason}") from None
    if not isinstance(parsed, T.StructType):
        raise ConfigError(f"{label} schema {schema!r} must name columns, e.g. 'user_id string, score double'")
    return {f.name: f.dataType for f in parsed.fields}


def cast_columns(df: DataFrame, types: Dict[str, T.DataType], label: str, required: Sequence[str] = ()) -> DataFrame:
    """Each column of ``types`` cast to its type; a value that does not fit stops the run.

    The columns in ``required`` (a schema's) must exist; the others may be absent, and the
    evaluation names them if it needs them.
    """
    columns = {f.name: f.dataType for f in df.schema.fields}
    for name in required:
        if name not in columns:
            raise InputDataError(
                f"{label} schema names column {name!r}, which the table does not have (it has: {', '.join(columns)})",
                condition=MISSING_COLUMN,
                parameters={"table": label, "column": name},
            )
    todo = {name: t for name, t in types.items() if name in columns and columns[name] != t}
    if not todo:
        return df
    checked = df
    for name, t in todo.items():
        col = ident(name)
        kind = "an integer" if isinstance(t, T.IntegralType) else "a number" if isinstance(t, T.NumericType) else ""
        kind = kind or "a " + t.simpleString()
        before = string_literal(f"{label} column {name!r} holds '")
        after = string_literal("', which is not " + kind)
        message = f"concat({before}, left(CAST({col} AS STRING), {QUOTED}), {after})"
        failed = f"{col} IS NOT NULL AND try_cast({col} AS {t.simpleString()}) IS NULL"
        checked = checked.filter(F.expr(input_check(failed, message)))
    return checked.select(
        *(F.col(ident(c)).cast(todo[c]).alias(c) if c in todo else F.col(ident(c)) for c in df.columns)
    )


def _reader(spark, format: str):
    reader = spark.read.format(format)
    if format == "csv":
        # Every column as text (no inference), and a row whose fields do not match the header
        # stops the read instead of being padded with nulls or cut.
        return reader.option("header", "true").option("inferSchema", "false").option("mode", "FAILFAST")
    if format == "json":
        return reader.option("primitivesAsString", "true").option("mode", "FAILFAST")
    return reader


def _headers_checked(spark, source: str, df: DataFrame) -> DataFrame:
    """The CSV table read again so that every file's header must be the one its columns came from.

    Spark takes the column names from one file's header and reads every other file by position:
    a file whose header lists the columns in another order would have its values under the wrong
    names, and a file without a header would lose its first row as one. With the names as the
    schema and ``enforceSchema`` off, Spark compares each file's header with them (case aside)
    and stops at the first file that differs, naming it (:func:`ndcg_spark.errors.as_error` words it). It
    costs no pass: the header is the first line each file's reader meets anyway (only a header
    with a name like Spark's ``_c<index>`` for an empty one has its first line read once more).

    A header with a repeated name cannot be stated as a schema (Spark renames the repeats): such
    a table is read as Spark reads it, unchecked.
    """
    columns = df.columns
    line = ""
    if any(name == f"_c{i}" for i, name in enumerate(columns)):
        # Spark names an empty header field _c<index>: the header line tells it from one so named.
        first = spark.read.text(source).filter("trim(value) <> ''").first()
        line = first.value if first is not None else ""
    names = ["" if name == f"_c{i}" and name not in line else name for i, name in enumerate(columns)]
    # Spark renames each repeat of a name to the name followed by its index.
    bases = [name[: -len(str(i))].lower() for i, name in enumerate(names) if name.endswith(str(i))]
    if len({name.lower() for name in names}) < len(names) or len(set(bases)) < len(bases):
        return df
    schema = T.StructType([T.StructField(name, T.StringType()) for name in names])
    # An empty name is stated as such, then given back the name Spark gave it.
    return _reader(spark, "csv").schema(schema).option("enforceSchema", "false").load(source).toDF(*columns)


def _read_trec(spark, source: str, layout, opts: EvaluationOptions, label: str) -> DataFrame:
    """A whitespace-separated TREC file; blank lines skipped, any other line must have every field."""
    kind, header = (
        ("a TREC run", "qid Q0 docno rank score tag") if layout is TREC_RUN else ("TREC qrels", "qid iter docno rel")
    )
    names = [getattr(opts, option) if option else name for option, name, _ in layout]
    lines = (
        spark.read.text(source)
        .selectExpr("value", r"filter(split(value, '\\s+'), f -> f <> '') AS fields")
        .filter("size(fields) > 0")
    )
    first = lines.first()
    if first is None:
        raise InputDataError(f"cannot read {label} {source!r} as trec: it is empty")
    n = len(first.fields)
    if n != len(layout):
        raise InputDataError(
            f"{label} {source!r} has {n} column{'s' if n > 1 else ''} where {kind} has {len(layout)} "
            f"({header}): {' '.join(first.fields)[:QUOTED]!r}"
        )
    shape = string_literal(f"{label} {source!r} has a line without the {len(layout)} columns of {kind} ({header}): ")
    checked = lines.filter(
        F.expr(input_check(f"size(fields) <> {len(layout)}", f"concat({shape}, left(value, {QUOTED}))"))
    )
    fields = checked.selectExpr(*(f"fields[{i}] AS {ident(name)}" for i, name in enumerate(names)))
    return cast_columns(fields, {n: TREC_TYPES[t] for n, (_, _, t) in zip(names, layout) if t in TREC_TYPES}, label)


# ----------------------------------------------------------------------------- error messages

#: (pattern in Spark's error text, the cause as users read it); the first match wins.
_CAUSES = (
    # S3A's words (SDK v1 and v2): before "does not exist", which its messages also hold.
    # Each word's start at a word's start: Jackson's "_reportInvalidToken" in a JSON file's parse
    # error is no S3 refusal ("NoSuchBucketException", "AccessDeniedException" are).
    (r"\b(?:NoSuchBucket|UnknownStoreException)", "its bucket does not exist"),
    (
        r"\b(?:AccessDenied|InvalidAccessKeyId|SignatureDoesNotMatch|ExpiredToken|InvalidToken)|Status Code: 403",
        "the store refused access (its credentials or permissions)",
    ),
    (
        r"Unable to execute HTTP request|UnknownHostException|ConnectException|SdkClientException|"
        r"Connect to \S+ failed",
        "the store cannot be reached (its endpoint, network or proxy)",
    ),
    (r"PATH_NOT_FOUND|TABLE_OR_VIEW_NOT_FOUND|Path does not exist|FileNotFoundException", "it does not exist"),
    (r"is not a Parquet file", "it is not a Parquet file"),
    (r"CANNOT_READ_FILE_FOOTER|Malformed ORC file|not an ORC file", "it is not {format_name} file"),
    (r"UNABLE_TO_INFER_SCHEMA", "it is empty (no {format} data files)"),
    # Spark 3.5 words schema inference's failure without a condition.
    (
        r"MALFORMED_RECORD_IN_PARSING|Malformed records are detected in schema inference",
        "it is not {format_name} file: {detail}",
    ),
)
_FORMAT_NAMES = {"parquet": "a Parquet", "orc": "an ORC", "json": "a JSON lines", "csv": "a CSV", "trec": "a TREC"}


#: S3A's retries, bounded for the first look at an input (:func:`_probe`): by default it retries an
#: unreachable endpoint or a throttled request for minutes, which a wrong bucket or endpoint in a
#: config would spend before its one line. Timeouts in milliseconds (Hadoop 3.3 and 3.4 both read that).
PROBE_S3A = {
    "fs.s3a.attempts.maximum": "1",
    "fs.s3a.retry.limit": "1",
    "fs.s3a.retry.interval": "100",
    "fs.s3a.retry.throttle.limit": "1",
    "fs.s3a.retry.throttle.interval": "100",
    "fs.s3a.connection.establish.timeout": "5000",
    "fs.s3a.connection.timeout": "10000",
    "fs.s3a.connection.request.timeout": "10000",
}


def _probe(spark, source: str) -> None:
    """Look at an ``s3a://`` input once with S3A's retries bounded (:data:`PROBE_S3A`), so that
    a missing bucket or path, refused credentials or an endpoint that cannot be reached fail the
    read in seconds; the read itself then keeps the session's own retries. Classic mode only
    (over Spark Connect the server reads); a glob is left to the read."""
    if not source.startswith("s3a://") or is_connect(spark) or re.search(r"[*?\[{]", source):
        return
    jvm = spark._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark._jsc.hadoopConfiguration())
    bucket = source[len("s3a://") :].split("/", 1)[0]
    for key, value in PROBE_S3A.items():
        conf.set(key, value)
        conf.set(f"fs.s3a.bucket.{bucket}.{key[len('fs.s3a.') :]}", value)  # a bucket's own settings win
    path = jvm.org.apache.hadoop.fs.Path(source)
    fs = jvm.org.apache.hadoop.fs.FileSystem.newInstance(path.toUri(), conf)  # not the session's cached one
    try:
        fs.getFileStatus(path)
    finally:
        fs.close()


#: File name endings that name a format.
_ENDINGS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".parquet": "parquet", ".orc": "orc"}


def _hint(source: str, format: str, is_path: bool, cause: str, role: str) -> str:
    """What a newcomer's mistake behind a failed read most likely was, or "".

    Examples
    --------
    >>> _hint("recs.csv", "parquet", True, "it is not a Parquet file", "recommendations")
    '; its name ends in .csv: read it with format = "csv" (recommendations_format = "csv" in the job)'
    >>> _hint("recs.csv", "parquet", False, "it does not exist", "recommendations")
    "; a name without a '/' is taken for a catalog table: write './recs.csv' for a file"
    """
    named = _ENDINGS.get(os.path.splitext(source.rstrip("/"))[1].lower())
    if not is_path and named and cause == "it does not exist":  # db.recs stays a table's name
        return f"; a name without a '/' is taken for a catalog table: write './{source}' for a file"
    if is_path and named and named != format and cause.startswith("it is not"):
        return f'; its name ends in {os.path.splitext(source.rstrip("/"))[1]}: read it with format = "{named}" ({role}_format = "{named}" in the job)'
    return ""


def read_failure(exc: BaseException, format: str) -> str:
    """Why a read failed, in a few words (``it is not a Parquet file``), from Spark's error text."""
    text = str(exc)
    for pattern, cause in _CAUSES:
        if re.search(pattern, text):
            detail = re.search(r"(?:JsonParseException|Exception): ([^\n(]*)", text.split("Caused by:", 1)[-1])
            return cause.format(
                format=format,
                format_name=_FORMAT_NAMES.get(format, f"a {format}"),
                detail=detail.group(1).strip().rstrip(":") if detail else "a line does not parse",
            )
    return first_line(exc)
