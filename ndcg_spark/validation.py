"""Input checks: schema problems, row-level problems, and what to do with the rows at fault.

Each row-level problem is a :class:`RowRule` (a name, a SQL predicate that is true for a row at
fault, and the words of its message). The same rules serve three purposes:

* ``guard_rows`` (``on_invalid_rows = "error"``, inside :func:`ndcg_spark.evaluate`): a
  ``raise_error`` in a filter over the input, so a bad row stops the run at no extra pass;
* :func:`validate` (the job, and anyone wanting the full report): one aggregation per table
  counts every problem, then up to five example keys are fetched for the problems found;
* ``split_rows`` (``on_invalid_rows = "quarantine"``): the rows at fault, with a ``reason``
  column, and the rest.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark.errors import INPUT_ERROR_TAG, InputDataError
from ndcg_spark.functions import fails_if, ident, string_literal
from ndcg_spark.options import EvaluationOptions

#: Relevance at or above this overflows 2^rel - 1 in a double.
MAX_EXPONENTIAL_RELEVANCE = 1024.0

NUMERIC_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.FloatType, T.DoubleType, T.DecimalType)
INTEGRAL_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
KEY_TYPES = INTEGRAL_TYPES + (T.StringType,)
KEY_TYPE_NAMES = "tinyint, smallint, int, bigint or string"
NUMERIC_TYPE_NAMES = "tinyint, smallint, int, bigint, float, double or decimal"

REASON = "reason"


@dataclass(frozen=True)
class RowRule:
    """A row-level problem: ``sql`` is a SQL predicate, true for a row at fault (never null)."""

    name: str
    table: str
    column: str
    problem: str
    sql: str
    by_group: bool = False


@dataclass
class TableReport:
    """Counts for one input table, from :func:`validate`."""

    table: str
    rows: int
    problems: Dict[str, int] = field(default_factory=dict)
    examples: Dict[str, List[str]] = field(default_factory=dict)


# ----------------------------------------------------------------------------- schema


def check_schema(df: DataFrame, table: str, opts: EvaluationOptions) -> None:
    """Missing columns and unsupported types, from the schema alone (no data is read)."""
    needed: List[Tuple[str, str]] = [(opts.user_col, "key"), (opts.item_col, "key")]
    if table == "recommendations":
        needed.append((opts.rank_col, "rank") if opts.rank_col else (opts.score_col, "numeric"))
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
        dtype = fields[name]
        accepted = {"key": KEY_TYPES, "numeric": NUMERIC_TYPES, "rank": NUMERIC_TYPES}[kind]
        if not isinstance(dtype, accepted):
            names = KEY_TYPE_NAMES if kind == "key" else NUMERIC_TYPE_NAMES
            raise InputDataError(
                f"{table} column {name!r} has type {dtype.simpleString()}; accepted types: {names}"
            )


def check_key_types(recs: DataFrame, rel: DataFrame, opts: EvaluationOptions) -> None:
    """The user and item keys must be both strings or both integers in the two tables."""
    for name in (opts.user_col, opts.item_col):
        left, right = recs.schema[name].dataType, rel.schema[name].dataType
        if isinstance(left, T.StringType) != isinstance(right, T.StringType):
            raise InputDataError(
                f"column {name!r} is {left.simpleString()} in the recommendations but "
                f"{right.simpleString()} in the relevance table; store both with one type"
            )


# ----------------------------------------------------------------------------- rules


def _is_bad_number(value: str) -> str:
    return f"(isnan({value}) OR abs({value}) = CAST('Infinity' AS DOUBLE))"


def recommendation_rules(opts: EvaluationOptions, columns: Sequence[str] = ()) -> List[RowRule]:
    """The row rules of the recommendations; ``columns`` (the table's) name its segment columns.

    A rank tie is two items at one rank in one user's list, and with segment columns of the
    recommendations (``group_by``, e.g. a model column) a user has one list per segment.
    """
    t = "recommendations"
    user, item = ident(opts.user_col), ident(opts.item_col)
    by_list = ", ".join([*[ident(c) for c in opts.group_by if c in columns], user])
    rules = [
        RowRule("null_user", t, opts.user_col, "is null", f"{user} IS NULL"),
        RowRule("null_item", t, opts.item_col, "is null", f"{item} IS NULL"),
    ]
    if opts.rank_col:
        rank = f"CAST({ident(opts.rank_col)} AS DOUBLE)"
        rules += [
            RowRule("null_rank", t, opts.rank_col, "is null", f"{rank} IS NULL"),
            RowRule(
                "bad_rank", t, opts.rank_col, "is not a positive integer",
                f"coalesce({_is_bad_number(rank)} OR {rank} < 1 OR {rank} != floor({rank}), false)",
            ),
            RowRule(
                "rank_tie", t, opts.rank_col, "has two items at the same rank for one user",
                f"coalesce(count(1) OVER (PARTITION BY {by_list}, {ident(opts.rank_col)}) > 1, false) "
                f"AND {rank} IS NOT NULL AND {user} IS NOT NULL",
                by_group=True,
            ),
        ]
    else:
        score = f"CAST({ident(opts.score_col)} AS DOUBLE)"
        rules += [
            RowRule("null_score", t, opts.score_col, "is null", f"{score} IS NULL"),
            RowRule("bad_score", t, opts.score_col, "is NaN or infinite", f"coalesce({_is_bad_number(score)}, false)"),
        ]
    return rules


def relevance_rules(opts: EvaluationOptions) -> List[RowRule]:
    t = "relevance"
    user, item = ident(opts.user_col), ident(opts.item_col)
    rel = f"CAST({ident(opts.relevance_col)} AS DOUBLE)"
    rules = [
        RowRule("null_user", t, opts.user_col, "is null", f"{user} IS NULL"),
        RowRule("null_item", t, opts.item_col, "is null", f"{item} IS NULL"),
        RowRule("null_relevance", t, opts.relevance_col, "is null", f"{rel} IS NULL"),
        RowRule("bad_relevance", t, opts.relevance_col, "is NaN or infinite", f"coalesce({_is_bad_number(rel)}, false)"),
    ]
    if opts.negative_relevance == "error":
        rules.append(
            RowRule(
                "negative_relevance", t, opts.relevance_col,
                "is negative (set negative_relevance = \"clip\" to read it as 0)",
                f"coalesce({rel} < 0, false)",
            )
        )
    if opts.gain == "exponential":
        rules.append(
            RowRule(
                "relevance_overflow", t, opts.relevance_col,
                f"is {MAX_EXPONENTIAL_RELEVANCE:.0f} or more, so 2^rel - 1 overflows a double under exponential gain",
                f"coalesce(NOT {_is_bad_number(rel)} AND {rel} >= {MAX_EXPONENTIAL_RELEVANCE}D, false)",
            )
        )
    if opts.duplicate_relevance == "error":
        rules.append(
            RowRule(
                "duplicate_relevance", t, f"({opts.user_col}, {opts.item_col})",
                "appears more than once (set duplicate_relevance = \"max\" to keep the largest)",
                f"coalesce(count(1) OVER (PARTITION BY {user}, {item}) > 1, false) "
                f"AND {user} IS NOT NULL AND {item} IS NOT NULL",
                by_group=True,
            )
        )
    return rules


def rules_for(table: str, opts: EvaluationOptions, columns: Sequence[str] = ()) -> List[RowRule]:
    """The row rules of ``table``; ``columns``: the table's columns (its segments matter)."""
    return recommendation_rules(opts, columns) if table == "recommendations" else relevance_rules(opts)


def _message(rule: RowRule, count: Optional[int] = None, examples: Optional[List[str]] = None) -> str:
    where = f"{rule.table} column {rule.column!r}" if not rule.column.startswith("(") else f"{rule.table} key {rule.column}"
    text = f"{where} {rule.problem}"
    if count is not None:
        text += f" in {count} row{'s' if count != 1 else ''}"
    if examples:
        text += f", e.g. {', '.join(examples)}"
    return text


def _key_text(opts: EvaluationOptions) -> str:
    """SQL text naming a row by its keys, e.g. ``user_id=7/item_id=42``."""
    def text(name: str) -> str:
        return f"coalesce(CAST({ident(name)} AS STRING), 'null')"

    return (
        f"concat({string_literal(opts.user_col + '=')}, {text(opts.user_col)}, "
        f"{string_literal('/' + opts.item_col + '=')}, {text(opts.item_col)})"
    )


# ----------------------------------------------------------------------------- three uses


def guard_rows(df: DataFrame, table: str, opts: EvaluationOptions) -> DataFrame:
    """Fail the run at the first row at fault, naming table, column, problem and the row's key.

    Group rules (rank ties, repeated relevance) are left to the evaluation itself, which
    checks them on the per-user arrays without another shuffle.
    """
    whens = [
        f"WHEN {rule.sql} THEN {string_literal(f'{INPUT_ERROR_TAG}: {_message(rule)}, e.g. ')}"
        for rule in rules_for(table, opts, df.columns)
        if not rule.by_group
    ]
    if not whens:
        return df
    # The first problem of the row, as the start of its message; one raise_error for them all.
    problem = f"(CASE {' '.join(whens)} END)"
    return df.filter(fails_if(f"{problem} IS NOT NULL", f"concat({problem}, {_key_text(opts)})"))


def split_rows(df: DataFrame, table: str, opts: EvaluationOptions) -> Tuple[DataFrame, DataFrame]:
    """(clean rows, rejected rows with a ``reason`` column: the first problem found).

    Group rules (rank ties, repeated judgements) only look at rows that passed the row rules, so
    a null-relevance row does not drag a valid judgement of the same item down with it.
    """
    rules = rules_for(table, opts, df.columns)
    clean, rejected = _tag(df, [r for r in rules if not r.by_group])
    group_rules = [r for r in rules if r.by_group]
    if group_rules:
        clean, rejected_by_group = _tag(clean, group_rules)
        rejected = rejected.unionByName(rejected_by_group)
    return clean, rejected


def _tag(df: DataFrame, rules: List[RowRule]) -> Tuple[DataFrame, DataFrame]:
    whens = " ".join(f"WHEN {rule.sql} THEN {string_literal(rule.name)}" for rule in rules)
    tagged = df.selectExpr("*", f"CAST(CASE {whens} END AS STRING) AS {ident(REASON)}")
    return tagged.filter(f"{ident(REASON)} IS NULL").drop(REASON), tagged.filter(f"{ident(REASON)} IS NOT NULL")


def validate_table(df: DataFrame, table: str, opts: EvaluationOptions) -> TableReport:
    """Count every problem of one table in one aggregation (plus a shuffle for group rules)."""
    check_schema(df, table, opts)
    rules = rules_for(table, opts, df.columns)
    flagged = df.selectExpr(*[f"{rule.sql} AS {ident(rule.name)}" for rule in rules])
    aggregates = [F.count(F.lit(1)).alias("__rows")] + [
        F.sum(F.col(rule.name).cast("long")).alias(rule.name) for rule in rules
    ]
    row = flagged.agg(*aggregates).first()
    report = TableReport(table=table, rows=int(row["__rows"]))
    for rule in rules:
        n = int(row[rule.name] or 0)
        if n:
            report.problems[rule.name] = n
            # Window predicates (group rules) cannot sit in a filter: project the flag first.
            at_fault = df.selectExpr(f"{_key_text(opts)} AS k", f"{rule.sql} AS bad").filter("bad")
            examples = at_fault.select("k").distinct().orderBy("k").limit(5).collect()
            report.examples[rule.name] = sorted(r.k for r in examples)
    return report


def check_schemas(recommendations: DataFrame, relevance: DataFrame, opts: EvaluationOptions) -> List[Tuple[str, DataFrame]]:
    """:func:`check_schema` of both tables and :func:`check_key_types`; returns the (name, table) pairs."""
    tables = [("recommendations", recommendations), ("relevance", relevance)]
    for table, df in tables:
        check_schema(df, table, opts)
    check_key_types(recommendations, relevance, opts)
    return tables


def count_rows(
    recommendations: DataFrame, relevance: DataFrame, *, relevance_rows: Optional[int] = None, **options
) -> Dict[str, int]:
    """The schema checks of :func:`validate`, then each table's row count; an empty table raises.

    What the job needs before it computes anything: the row rules are enforced while the figures
    are computed (``guard_rows`` and the checks on the per-user lists), so the full pass of
    :func:`validate` is only needed to explain a failure (every problem counted, with examples).
    ``relevance_rows``, when the relevance table was counted already, is not counted again.

    Returns
    -------
    dict
        ``{"recommendations": rows, "relevance": rows}``.
    """
    opts = EvaluationOptions.from_mapping(options)
    rows = {}
    for table, df in check_schemas(recommendations, relevance, opts):
        rows[table] = relevance_rows if table == "relevance" and relevance_rows is not None else df.count()
        if rows[table] == 0:
            raise InputDataError(f"{table} table is empty")
    return rows


def validate(recommendations: DataFrame, relevance: DataFrame, **options) -> Dict[str, TableReport]:
    """Check both tables and raise :class:`InputDataError` on the first problem found.

    With ``on_invalid_rows = "quarantine"`` row-level problems are reported, not raised (the
    rows are set aside by :func:`ndcg_spark.evaluate`); empty tables and schema problems
    always raise.

    Parameters
    ----------
    recommendations, relevance : DataFrame
        The two tables, as given to :func:`ndcg_spark.evaluate`.
    **options
        Any field of :class:`ndcg_spark.options.EvaluationOptions` (column names, rank column,
        relevance policies, ``on_invalid_rows``, ``group_by``).

    Returns
    -------
    dict
        ``{"recommendations": TableReport, "relevance": TableReport}`` with row counts and, per
        problem, the number of rows and up to five example keys.

    Raises
    ------
    InputDataError
        One line naming the table, column, problem, row count and example keys.
    """
    opts = EvaluationOptions.from_mapping(options)
    reports = {}
    for table, df in check_schemas(recommendations, relevance, opts):
        report = validate_table(df, table, opts)
        if report.rows == 0:
            raise InputDataError(f"{table} table is empty")
        if report.problems and opts.on_invalid_rows == "error":
            rule = next(r for r in rules_for(table, opts) if r.name in report.problems)
            raise InputDataError(_message(rule, report.problems[rule.name], report.examples[rule.name]))
        reports[table] = report
    return reports
