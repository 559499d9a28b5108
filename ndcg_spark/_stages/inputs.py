"""Input preparation: the tables' shapes checked, the array layout as rows, the inputs narrowed.

After :func:`narrow` the two tables hold only what the metric reads, under names of the column
contract (:mod:`ndcg_spark._stages.column_contract`; the user column and the recommendations' segment columns
keep their own):

========================  =========================================================
recommendations           segments, user, ``ITEM``, ``ORDER`` (double, smaller first)
relevance                 user, ``ITEM``, ``REL`` (double)
========================  =========================================================

so no later column can collide with the caller's.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._spark.sql import ident, string_literal
from ndcg_spark._stages import rules
from ndcg_spark._stages.column_contract import ARRAY_RANK, HAS_ATTRIBUTES, ITEM, ORDER, REL, SEGMENT
from ndcg_spark.errors import COLUMN_TYPE, MISSING_COLUMN, TYPES_DIFFER, InputDataError, input_check
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.spark_support import check_spark

NUMERIC_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
INTEGRAL_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
KEY_TYPES = INTEGRAL_TYPES + (T.StringType,)
KEY_TYPE_NAMES = "tinyint, smallint, int, bigint or string"
NUMERIC_TYPE_NAMES = "tinyint, smallint, int, bigint, float, double or decimal"


# ----------------------------------------------------------------------------- shapes


def as_rows(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """The recommendations in the 'rows' layout, to be read with :func:`reading_options`.

    The 'array' layout (ALS ``recommendForAllUsers``: user, array<struct<item, score>>) is
    exploded; with ``array_ranking = "order"`` the array position becomes the rank column
    ``ARRAY_RANK``.
    """
    if opts.recommendations_layout == "rows":
        return df
    if opts.array_col not in df.columns:
        raise InputDataError(
            f"recommendations table has no column {opts.array_col!r} (it has: {', '.join(df.columns)})",
            condition=MISSING_COLUMN,
            parameters={"table": "recommendations", "column": opts.array_col},
        )
    element = df.schema[opts.array_col].dataType
    if not isinstance(element, T.ArrayType) or not isinstance(element.elementType, T.StructType):
        raise InputDataError(
            f"recommendations column {opts.array_col!r} has type {element.simpleString()}; "
            "the 'array' layout needs array<struct<item, score>>",
            condition=COLUMN_TYPE,
            parameters={"table": "recommendations", "column": opts.array_col, "type": element.simpleString()},
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
    return exploded.select(*keep, *values)


def reading_options(opts: EvaluationOptions) -> EvaluationOptions:
    """The options the stages read the rows of :func:`as_rows` with; the caller's stay as they are.

    For the 'array' layout: the rows layout, and under ``array_ranking = "order"`` the rank
    column ``ARRAY_RANK``.
    """
    if opts.recommendations_layout == "rows":
        return opts
    rank_col = ARRAY_RANK if opts.array_ranking == "order" else opts.rank_col
    return opts.updated(recommendations_layout="rows", rank_col=rank_col)


def _looks_like_values(names) -> bool:
    """Whether most column names are numbers, as when a header-less CSV file's first row was read as one.

    Examples
    --------
    >>> _looks_like_values(["1", "123", "5.362634"]), _looks_like_values(["user", "item", "2024"])
    (True, False)
    """
    numbers = sum(1 for name in names if re.fullmatch(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?", name.strip()))
    return bool(names) and 2 * numbers > len(names)


def check_schema(df: DataFrame, table: str, opts: EvaluationOptions) -> None:
    """Missing columns and unsupported types, from the schema alone (no data is read)."""
    needed: List[Tuple[str, str, str]] = [(opts.user_col, "key", "user_col"), (opts.item_col, "key", "item_col")]
    if table == "recommendations":
        needed.append(
            (opts.rank_col, "numeric", "rank_col") if opts.rank_col else (opts.score_col, "numeric", "score_col")
        )
    else:
        needed.append((opts.relevance_col, "numeric", "relevance_col"))
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name, kind, option in needed:
        if name not in fields:
            close = difflib.get_close_matches(name, list(fields), n=1, cutoff=0.5)
            # The option that names the column, so a table whose column is named otherwise can be read as it is.
            hint = f"; did you mean {close[0]!r}?" if close else ""
            hint += f" (set {option}, flag --{option.replace('_', '-')}, to the column's name)"
            if _looks_like_values(fields):
                # A CSV file without a header line: Spark took its first row for the column names.
                hint = (
                    "; those names look like values: the file's first line is data, not a header "
                    f"(a CSV file needs a first line naming its columns, e.g. {','.join(n for n, _, _ in needed)})"
                )
            raise InputDataError(
                f"{table} table has no column {name!r} (it has: {', '.join(fields) or 'no columns'}){hint}",
                condition=MISSING_COLUMN,
                parameters={"table": table, "column": name},
            )
        accepted, names = (KEY_TYPES, KEY_TYPE_NAMES) if kind == "key" else (NUMERIC_TYPES, NUMERIC_TYPE_NAMES)
        if not isinstance(fields[name], accepted):
            raise InputDataError(
                f"{table} column {name!r} has type {fields[name].simpleString()}; accepted types: {names}",
                condition=COLUMN_TYPE,
                parameters={"table": table, "column": name, "type": fields[name].simpleString()},
            )


def check_tables(recs: DataFrame, rel: DataFrame, opts: EvaluationOptions) -> None:
    """:func:`check_schema` of both tables, and their user and item keys of one kind."""
    check_spark(recs.sparkSession)
    check_schema(recs, "recommendations", opts)
    check_schema(rel, "relevance", opts)
    for name in (opts.user_col, opts.item_col):
        left, right = recs.schema[name].dataType, rel.schema[name].dataType
        if isinstance(left, T.StringType) != isinstance(right, T.StringType):
            raise InputDataError(
                f"column {name!r} is {left.simpleString()} in the recommendations but "
                f"{right.simpleString()} in the relevance table; store both with one type",
                condition=TYPES_DIFFER,
                parameters={"column": name},
            )


def check_segments(recs: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> None:
    """Every group_by column must come from the recommendations or the user attributes."""
    available = set(recs.columns) | (set(attributes.columns) if attributes is not None else set())
    for name in opts.group_by:
        if name not in available:
            where = "the recommendations" + (" or the user attributes" if attributes is not None else "")
            raise InputDataError(
                f"group_by column {name!r} is not a column of {where}",
                condition=MISSING_COLUMN,
                parameters={"table": "recommendations", "column": name},
            )
    if attributes is not None and opts.user_col not in attributes.columns:
        raise InputDataError(
            f"user attributes table has no column {opts.user_col!r}",
            condition=MISSING_COLUMN,
            parameters={"table": "user attributes", "column": opts.user_col},
        )


def segments_served(recs: DataFrame, opts: EvaluationOptions) -> Optional[DataFrame]:
    """The distinct values of the group_by columns of the recommendations (None without any).

    Each is one segment: the evaluation of that segment's recommendations against the whole
    relevance table. A handful of rows (one per model or arm), joined by broadcast.
    """
    segments = [c for c in opts.group_by if c in recs.columns]
    if not segments:
        return None
    return recs.select(*[F.col(ident(c)) for c in segments]).distinct()


@dataclass(frozen=True)
class Inputs:
    """The tables as every later stage reads them (:func:`read_inputs`): the contract's columns,
    the items in one type, keyed by the packed segment (``SEGMENT``) when the recommendations
    have segment columns; ``rejected``: under quarantine, the rows set aside per table."""

    recommendations: DataFrame
    relevance: Optional[DataFrame] = None
    rejected: Optional[Dict[str, DataFrame]] = None


def read_inputs(
    recommendations: DataFrame,
    relevance: Optional[DataFrame],
    opts: EvaluationOptions,
    user_attributes: Optional[DataFrame] = None,
    widen: Callable[[T.DataType], T.DataType] = lambda item_type: item_type,
) -> Inputs:
    """The input stage, whole: both tables' shapes checked, the row rules applied (a bad row
    stops the run, or is set aside under ``on_invalid_rows = "quarantine"``), both narrowed to
    what the metric reads with their items in one type (:func:`common_item_type`, then
    ``widen``: other tables' items join these), and keyed by segment (:func:`with_segment`).

    ``relevance`` None: recommendations alone (another model's, the baseline's), checked and
    narrowed as the recommendations are, their items in ``widen``'s type; a bad row stops the
    run (quarantine sets aside rows of the two tables the row accounting counts).
    """
    if relevance is None:
        check_schema(recommendations, "recommendations", opts)
        guarded = rules.guard_rows(recommendations, "recommendations", opts)
        item_type = widen(recommendations.schema[opts.item_col].dataType)
        return Inputs(_narrowed_recommendations(guarded, opts, item_type))
    check_segments(recommendations, user_attributes, opts)
    check_tables(recommendations, relevance, opts)
    # Read before the row rules: a segment whose every row is set aside is still a segment.
    served = segments_served(recommendations, opts)
    rejected = None
    if opts.on_invalid_rows == "quarantine":
        recommendations, rejected_recs = rules.split_rows(recommendations, "recommendations", opts)
        relevance, rejected_rel = rules.split_rows(relevance, "relevance", opts)
        rejected = {"recommendations": rejected_recs, "relevance": rejected_rel}
    else:
        recommendations = rules.guard_rows(recommendations, "recommendations", opts)
        relevance = rules.guard_rows(relevance, "relevance", opts)
    item_type = common_item_type(
        recommendations.schema[opts.item_col].dataType, relevance.schema[opts.item_col].dataType, opts
    )
    recs, rel = narrow(recommendations, relevance, opts, widen(item_type))
    if served is not None:
        recs, rel = with_segment(recs, rel, served)
    return Inputs(recs, rel, rejected)


def with_segment(recs: DataFrame, rel: DataFrame, served: DataFrame) -> Tuple[DataFrame, DataFrame]:
    """Both tables keyed by the packed segment (``SEGMENT``): the recommendations' segment
    columns as one struct, and the relevance rows repeated for every segment ``served`` holds.

    A struct of nulls equals a struct of nulls, so a plain equi-join on (``SEGMENT``, user)
    matches a null model with a null model, as a filter ``model IS NULL`` would select it; and
    both lists are then grouped by the very keys they are joined on, so the join needs no
    exchange of its own. The relevance rows are repeated before their shuffle, not the judged
    lists after it: each row is shuffled once for each segment, where repeating the lists
    shuffled every judgement once more and the ranked lists again besides.
    """
    segments = list(served.columns)
    packed = "named_struct(" + ", ".join(f"{string_literal(c)}, {ident(c)}" for c in segments) + f") AS {SEGMENT}"
    rest = [ident(c) for c in recs.columns if c not in segments]
    return (
        recs.selectExpr(packed, *rest),
        rel.crossJoin(F.broadcast(served.selectExpr(packed))),
    )


# ----------------------------------------------------------------------------- narrowing


def narrow(
    recs: DataFrame, rel: DataFrame, opts: EvaluationOptions, item_type: Optional[T.DataType] = None
) -> Tuple[DataFrame, DataFrame]:
    """Both tables narrowed to the columns the metric reads (see the module's table).

    The items are compared in one type: ``item_type`` where the caller widened it for other
    tables, else :func:`common_item_type`.
    """
    rel_item_type = rel.schema[opts.item_col].dataType
    item_type = item_type or common_item_type(recs.schema[opts.item_col].dataType, rel_item_type, opts)
    relevance = f"CAST({ident(opts.relevance_col)} AS DOUBLE)"
    if opts.negative_relevance == "clip":
        relevance = f"greatest({relevance}, 0.0D)"
    return (
        _narrowed_recommendations(recs, opts, item_type),
        rel.selectExpr(ident(opts.user_col), item_as(rel_item_type, item_type, opts), f"{relevance} AS {REL}"),
    )


def _narrowed_recommendations(recs: DataFrame, opts: EvaluationOptions, item_type: T.DataType) -> DataFrame:
    """The recommendations narrowed to segments, user, item (in ``item_type``) and ``ORDER``."""
    segments = [ident(c) for c in opts.group_by if c in recs.columns]
    # + 0.0D makes a negative zero 0.0: Spark 3.5's array_distinct tells them apart (4.x does not),
    # so a tie of -0.0 and 0.0 would go unseen there.
    if opts.rank_col:
        order = f"(CAST({ident(opts.rank_col)} AS DOUBLE) + 0.0D)"
    else:
        order = f"(-CAST({ident(opts.score_col)} AS DOUBLE) + 0.0D)"
    item = item_as(recs.schema[opts.item_col].dataType, item_type, opts)
    return recs.selectExpr(*segments, ident(opts.user_col), item, f"{order} AS {ORDER}")


def item_as(table_type: T.DataType, item_type: T.DataType, opts: EvaluationOptions) -> str:
    """SQL: a table's item column as ``ITEM``, in the comparison type ``item_type``: cast where the
    table's own type (``table_type``) differs (an integer of another width is cast up to it)."""
    if table_type == item_type:
        return f"{ident(opts.item_col)} AS {ITEM}"
    return f"CAST({ident(opts.item_col)} AS {item_type.simpleString()}) AS {ITEM}"


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
            f"but {rel_type.simpleString()} in the relevance table; store both with one type",
            condition=TYPES_DIFFER,
            parameters={"column": opts.item_col},
        )
    width = {t: i for i, t in enumerate(INTEGRAL_TYPES)}
    return max(recs_type, rel_type, key=lambda t: width[type(t)])


# ----------------------------------------------------------------------------- attributes


def with_user_attributes(df: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> DataFrame:
    """Join the segment columns that live in the user attributes table (left join on user).

    The table must hold one row per user: a repeated user stops the run (an input error). A
    user without an attribute row is kept, with null segment values, and flagged in
    ``HAS_ATTRIBUTES`` (false) so the summary counts it in ``users_without_attributes``.
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
