"""Input preparation: the tables' shapes checked, the array layout as rows, the inputs narrowed.

After :func:`narrow` the two tables hold only what the metric reads, under these names (the
user column and the recommendations' segment columns keep their own):

========================  =========================================================
recommendations           segments, user, :data:`ITEM`, :data:`ORDER` (double, smaller first)
relevance                 user, :data:`ITEM`, :data:`REL` (double)
========================  =========================================================

so no later column can collide with the caller's.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._sql import ident, string_literal
from ndcg_spark.errors import InputDataError, input_check
from ndcg_spark.options import EvaluationOptions

ITEM = "__ndcg_item"
ORDER = "__ndcg_order"
REL = "__ndcg_relevance"
#: The rank column made from the array position under ``array_ranking = "order"``.
ARRAY_RANK = "__ndcg_array_rank"
#: On the scored rows with segments from the user attributes: whether the user has an attribute row.
HAS_ATTRIBUTES = "__ndcg_has_attributes"

NUMERIC_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
INTEGRAL_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
KEY_TYPES = INTEGRAL_TYPES + (T.StringType,)
KEY_TYPE_NAMES = "tinyint, smallint, int, bigint or string"
NUMERIC_TYPE_NAMES = "tinyint, smallint, int, bigint, float, double or decimal"


# ----------------------------------------------------------------------------- shapes


def as_rows(df: DataFrame, opts: EvaluationOptions) -> Tuple[DataFrame, EvaluationOptions]:
    """The recommendations in the 'rows' layout, and the options that read them.

    The 'array' layout (ALS ``recommendForAllUsers``: user, array<struct<item, score>>) is
    exploded; with ``array_ranking = "order"`` the array position becomes the rank column.
    """
    if opts.recommendations_layout == "rows":
        return df, opts
    if opts.array_col not in df.columns:
        raise InputDataError(
            f"recommendations table has no column {opts.array_col!r} (it has: {', '.join(df.columns)})"
        )
    element = df.schema[opts.array_col].dataType
    if not isinstance(element, T.ArrayType) or not isinstance(element.elementType, T.StructType):
        raise InputDataError(
            f"recommendations column {opts.array_col!r} has type {element.simpleString()}; "
            "the 'array' layout needs array<struct<item, score>>"
        )
    fields = element.elementType.fieldNames()
    wanted = [opts.item_col] + ([opts.score_col] if opts.array_ranking == "score" else [])
    for name in wanted:
        if name not in fields:
            raise InputDataError(
                f"recommendations array {opts.array_col!r} has no field {name!r} (it has: {', '.join(fields)})"
            )
    keep = [F.col(ident(c)) for c in df.columns if c != opts.array_col]
    exploded = df.select(*keep, F.posexplode(F.col(ident(opts.array_col))).alias("__pos", "__rec"))
    values = [F.col("__rec")[f].alias(f) for f in wanted]
    if opts.array_ranking == "order":
        values.append((F.col("__pos") + 1).alias(ARRAY_RANK))
        opts = opts.updated(rank_col=ARRAY_RANK)
    return exploded.select(*keep, *values), opts.updated(recommendations_layout="rows")


def check_schema(df: DataFrame, table: str, opts: EvaluationOptions) -> None:
    """Missing columns and unsupported types, from the schema alone (no data is read)."""
    needed: List[Tuple[str, str]] = [(opts.user_col, "key"), (opts.item_col, "key")]
    if table == "recommendations":
        needed.append((opts.rank_col, "numeric") if opts.rank_col else (opts.score_col, "numeric"))
    else:
        needed.append((opts.relevance_col, "numeric"))
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name, kind in needed:
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputDataError(
                f"{table} table has no column {name!r} (it has: {', '.join(fields) or 'no columns'}){hint}"
            )
        accepted, names = (KEY_TYPES, KEY_TYPE_NAMES) if kind == "key" else (NUMERIC_TYPES, NUMERIC_TYPE_NAMES)
        if not isinstance(fields[name], accepted):
            raise InputDataError(
                f"{table} column {name!r} has type {fields[name].simpleString()}; accepted types: {names}"
            )


def check_tables(recs: DataFrame, rel: DataFrame, opts: EvaluationOptions) -> None:
    """:func:`check_schema` of both tables, and their user and item keys of one kind."""
    check_schema(recs, "recommendations", opts)
    check_schema(rel, "relevance", opts)
    for name in (opts.user_col, opts.item_col):
        left, right = recs.schema[name].dataType, rel.schema[name].dataType
        if isinstance(left, T.StringType) != isinstance(right, T.StringType):
            raise InputDataError(
                f"column {name!r} is {left.simpleString()} in the recommendations but "
                f"{right.simpleString()} in the relevance table; store both with one type"
            )


def check_segments(recs: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> None:
    """Every group_by column must come from the recommendations or the user attributes."""
    available = set(recs.columns) | (set(attributes.columns) if attributes is not None else set())
    for name in opts.group_by:
        if name not in available:
            where = "the recommendations" + (" or the user attributes" if attributes is not None else "")
            raise InputDataError(f"group_by column {name!r} is not a column of {where}")
    if attributes is not None and opts.user_col not in attributes.columns:
        raise InputDataError(f"user attributes table has no column {opts.user_col!r}")


def list_keys(columns: Sequence[str], opts: EvaluationOptions) -> List[str]:
    """What names one ranked list, quoted: the segment columns among ``columns``, then the user."""
    return [ident(c) for c in (*opts.group_by, opts.user_col) if c in columns]


# ----------------------------------------------------------------------------- counting


@dataclass(frozen=True)
class RowCount:
    """The rows of ``frame``, counted by ``observation`` on the way of a pass that reads it."""

    frame: DataFrame
    observation: Observation

    def rows(self) -> int:
        """The count, once an action has read the frame in full.

        Spark drops an empty relation from the plan with the observation on it, which then
        reports nothing: only then is the frame counted by a pass of its own (it is empty).
        """
        try:
            return int(self.observation.get["rows"])
        except Exception:  # noqa: BLE001 - no metrics reported (classic: an assertion; Connect: no key)
            return self.frame.count()


def counted(df: DataFrame, count: Optional[RowCount] = None) -> Tuple[DataFrame, RowCount]:
    """``df`` with its rows counted as they pass, and the count (:meth:`RowCount.rows` after an action).

    The count rides on the evaluation's own pass, so it costs no pass of its own. Below a
    shuffle (as the ranking's and the judgements' inputs are) it sees every row even when an
    action computes only some lists (``first()``): a shuffle's map side always runs in full.
    ``count``, when given, is the (not yet attached) observation to use.
    """
    observation = count.observation if count is not None else Observation()
    return df.observe(observation, F.count(F.lit(1)).alias("rows")), RowCount(df, observation)


def segments_served(recs: DataFrame, opts: EvaluationOptions) -> Optional[DataFrame]:
    """The distinct values of the group_by columns of the recommendations (None without any).

    Each is one segment: the evaluation of that segment's recommendations against the whole
    relevance table. A handful of rows (one per model or arm), joined by broadcast.
    """
    segments = [c for c in opts.group_by if c in recs.columns]
    if not segments:
        return None
    return recs.select(*[F.col(ident(c)) for c in segments]).distinct()


# ----------------------------------------------------------------------------- narrowing


def narrow(recs: DataFrame, rel: DataFrame, opts: EvaluationOptions) -> Tuple[DataFrame, DataFrame]:
    """Both tables narrowed to the columns the metric reads (see the module's table).

    The items are compared in one type (:func:`common_item_type`).
    """
    segments = [ident(c) for c in opts.group_by if c in recs.columns]
    if opts.rank_col:
        order = f"CAST({ident(opts.rank_col)} AS DOUBLE)"
    else:
        order = f"-CAST({ident(opts.score_col)} AS DOUBLE)"
    recs_item_type = recs.schema[opts.item_col].dataType
    rel_item_type = rel.schema[opts.item_col].dataType
    item_type = common_item_type(recs_item_type, rel_item_type, opts)

    def item(table_type: T.DataType) -> str:
        if table_type == item_type:
            return f"{ident(opts.item_col)} AS {ITEM}"
        return f"CAST({ident(opts.item_col)} AS {item_type.simpleString()}) AS {ITEM}"

    relevance = f"CAST({ident(opts.relevance_col)} AS DOUBLE)"
    if opts.negative_relevance == "clip":
        relevance = f"greatest({relevance}, 0.0D)"
    return (
        recs.selectExpr(*segments, ident(opts.user_col), item(recs_item_type), f"{order} AS {ORDER}"),
        rel.selectExpr(ident(opts.user_col), item(rel_item_type), f"{relevance} AS {REL}"),
    )


def common_item_type(recs_type: T.DataType, rel_type: T.DataType, opts: EvaluationOptions) -> T.DataType:
    """The type both tables' items are compared in: theirs, or the wider of two integer types.

    Widening, never narrowing: a relevance item beyond the range of the recommendations' type
    (a bigint judged against int recommendations) must stay itself, not overflow.
    """
    if rel_type == recs_type:
        return recs_type
    if not (isinstance(rel_type, INTEGRAL_TYPES) and isinstance(recs_type, INTEGRAL_TYPES)):
        raise InputDataError(
            f"item column {opts.item_col!r} is {recs_type.simpleString()} in the recommendations "
            f"but {rel_type.simpleString()} in the relevance table; store both with one type"
        )
    width = {t: i for i, t in enumerate(INTEGRAL_TYPES)}
    return max(recs_type, rel_type, key=lambda t: width[type(t)])


# ----------------------------------------------------------------------------- attributes


def with_user_attributes(df: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> DataFrame:
    """Join the segment columns that live in the user attributes table (left join on user).

    The table must hold one row per user: a repeated user stops the run (an input error). A
    user without an attribute row is kept, with null segment values, and flagged in
    :data:`HAS_ATTRIBUTES` (false) so the summary counts it in ``users_without_attributes``.
    """
    if attributes is None:
        return df
    wanted = [c for c in opts.group_by if c in attributes.columns and c not in df.columns]
    if not wanted:
        return df
    user = ident(opts.user_col)
    message = string_literal(f"user attributes table has more than one row for {opts.user_col}=")
    # One row per user, checked: a repeated user would repeat that user's figures in the join.
    attrs = (
        attributes.groupBy(F.col(user).alias(opts.user_col))
        .agg(F.count(F.lit(1)).alias("__ndcg_attribute_rows"), *[F.first(F.col(ident(c))).alias(c) for c in wanted])
        .filter(input_check("__ndcg_attribute_rows > 1", f"concat({message}, CAST({user} AS STRING))"))
        .drop("__ndcg_attribute_rows")
        .withColumn(HAS_ATTRIBUTES, F.lit(True))
    )
    joined = df.join(attrs, on=opts.user_col, how="left")
    return joined.withColumn(HAS_ATTRIBUTES, F.coalesce(F.col(HAS_ATTRIBUTES), F.lit(False)))
