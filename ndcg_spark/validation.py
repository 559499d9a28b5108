"""``validate``: every problem of both input tables counted, with example keys.

The rules themselves live in :mod:`ndcg_spark._stages.rules`; ``evaluate`` enforces the same rules
while it computes (a bad row stops the run there at no extra pass), so ``validate`` is the full
report: one aggregation per table, then up to five example keys per problem found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond import sources as beyond_tables
from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.inputs import as_rows, check_tables, reading_options
from ndcg_spark._stages.rules import RowRule, key_text, rules_for
from ndcg_spark.errors import EMPTY_TABLE, INVALID_ROWS, InputDataError, input_errors
from ndcg_spark.options import EvaluationOptions, resolve


@dataclass
class TableReport:
    """What :func:`validate` found in one input table.

    Attributes
    ----------
    table : str
        ``"recommendations"``, ``"relevance"``, or a beyond-accuracy table (``"interactions"``,
        ``"items"``, ``"baseline_recommendations"``).
    rows : int
        Its number of rows.
    problems : dict of str to int
        Rows at fault per problem (a rule name such as ``"null_score"``); empty when clean.
    examples : dict of str to list of str
        Up to five keys (``user_id=7/item_id=42``) per problem, sorted.
    unknown_items : int or None
        With an items table: the rows (interactions) or distinct items (recommendations,
        baseline) naming an item it lacks, counted, as ``evaluate`` counts them (not a problem:
        the run goes on); None otherwise.
    """

    table: str
    rows: int
    problems: Dict[str, int] = field(default_factory=dict)
    examples: Dict[str, List[str]] = field(default_factory=dict)
    unknown_items: Optional[int] = None


def _report(df: DataFrame, table: str, opts: EvaluationOptions, rules: List[RowRule], key: str) -> TableReport:
    """Count every problem of one table in one aggregation (plus a shuffle for group rules);
    ``key``: SQL text naming a row, for the examples."""
    flagged = df.selectExpr(*[f"{rule.sql} AS {ident(rule.name)}" for rule in rules])
    aggregates = [F.count(F.lit(1)).alias("__rows")] + [
        F.sum(F.col(rule.name).cast("long")).alias(rule.name) for rule in rules
    ]
    with input_errors():  # a file Spark cannot read is bad input too
        row = flagged.agg(*aggregates).first()
    report = TableReport(table=table, rows=int(row["__rows"]))
    for rule in rules:
        n = int(row[rule.name] or 0)
        if n:
            report.problems[rule.name] = n
            # Window predicates (group rules) cannot sit in a filter: project the flag first.
            at_fault = df.selectExpr(f"{key} AS k", f"{rule.sql} AS bad").filter("bad")
            examples = at_fault.select("k").distinct().orderBy("k").limit(5).collect()
            report.examples[rule.name] = sorted(r.k for r in examples)
    return report


def validate(
    recommendations: DataFrame,
    relevance: DataFrame,
    options: Optional[EvaluationOptions] = None,
    *,
    interactions: Optional[DataFrame] = None,
    items: Optional[DataFrame] = None,
    baseline_recommendations: Optional[DataFrame] = None,
    **option_values: Any,
) -> Dict[str, TableReport]:
    """Check both tables and report every problem found, each with its row count and examples;
    and the beyond-accuracy tables given, by the rules ``evaluate`` holds them to.

    With the default ``on_invalid_rows = "error"`` any problem raises one
    :class:`~ndcg_spark.InputDataError` whose message names every problem of both tables (joined
    by ``; ``); its ``problems`` attribute lists those descriptions one by one, and its ``reports``
    attribute holds the two :class:`TableReport` values.

    With ``on_invalid_rows = "quarantine"`` row-level problems are reported, not raised (the
    rows are set aside by :func:`ndcg_spark.evaluate`); empty tables and schema problems
    always raise.

    Parameters
    ----------
    recommendations, relevance : DataFrame
        The two tables, as given to :func:`ndcg_spark.evaluate`.
    options : EvaluationOptions, optional
        The options the tables will be evaluated with (column names, rank column, relevance
        policies, ``on_invalid_rows``, ``group_by``).
    interactions, items, baseline_recommendations : DataFrame, optional
        The beyond-accuracy tables, as :func:`ndcg_spark.evaluate` takes them: each gets its
        :class:`TableReport` (a null user or item; an item listed twice, a feature vector null,
        holding a null or NaN, or of another length than the longest; the baseline by the
        recommendations' rules), and with an items table the items it lacks are counted
        (``unknown_items``), never a problem.
    **option_values
        Fields of :class:`~ndcg_spark.EvaluationOptions` to set (over ``options``).

    Returns
    -------
    dict of str to TableReport
        ``{"recommendations": TableReport, "relevance": TableReport}`` (and one per
        beyond-accuracy table given) with row counts and, per problem, the number of rows and
        up to five example keys.

    Raises
    ------
    InputDataError
        One line naming, for every problem found, the table, column, problem, row count and
        example keys (condition ``INVALID_INPUT.INVALID_ROWS``, whose ``problems`` parameter lists
        them); ``error.reports`` holds what the return value would have held.

    Examples
    --------
    >>> recs = spark.createDataFrame([(1, "a", 0.9), (2, "b", None)], "user_id int, item_id string, score double")
    >>> rel = spark.createDataFrame([(1, "a", 1.0), (1, "a", 2.0)], "user_id int, item_id string, relevance double")
    >>> validate(recs, rel)
    Traceback (most recent call last):
    ...
    ndcg_spark.errors.InputDataError: recommendations column 'score' is null in 1 row, e.g. user_id=2/item_id=b; relevance key (user_id, item_id) appears more than once (set duplicate_relevance = "max" to keep the largest) in 2 rows, e.g. user_id=1/item_id=a
    >>> validate(recs, rel, on_invalid_rows="quarantine")["recommendations"].problems
    {'null_score': 1}
    """
    opts = resolve(options, option_values)
    named, _ = beyond_tables.named_tables(
        beyond_tables.Tables(interactions, items, baseline_recommendations), None, opts
    )
    interactions, items, baseline_recommendations = named.interactions, named.items, named.baseline
    recommendations = as_rows(recommendations, opts)
    if baseline_recommendations is not None:  # the baseline's lists as the recommendations' own
        baseline_recommendations = as_rows(baseline_recommendations, opts.unsegmented)
    opts = reading_options(opts)
    check_tables(recommendations, relevance, opts)
    beyond = {"interactions": interactions, "items": items, "baseline_recommendations": baseline_recommendations}
    beyond = {table: df for table, df in beyond.items() if df is not None}
    tables: List[Tuple[str, DataFrame, List[RowRule], str]] = [
        (t, df, rules_for(t, opts, df.columns), key_text(opts))
        for t, df in (("recommendations", recommendations), ("relevance", relevance))
    ]
    for table, df in beyond.items():
        beyond_tables.check_schema(df, table, opts)
        tables.append((table, df, beyond_tables.row_rules(table, opts), beyond_tables.row_key(table, opts)))
    reports, found = {}, []
    for table, df, rules, key in tables:
        report = _report(df, table, opts, rules, key)
        if report.rows == 0 and table not in beyond:
            raise InputDataError(f"{table} table is empty", condition=EMPTY_TABLE, parameters={"table": table})
        if items is not None and table != "items" and table != "relevance":
            report.unknown_items = beyond_tables.unknown_rows(df, items, opts, distinct=table != "interactions")
        reports[table] = report
        for rule in rules:
            if rule.name in report.problems:
                found.append(rule.message(report.problems[rule.name], report.examples[rule.name]))
    if found and opts.on_invalid_rows == "error":
        # Every problem of both tables in one line, so one fix round mends them all.
        error = InputDataError("; ".join(found), condition=INVALID_ROWS, parameters={"problems": found})
        error.reports = reports
        error.problems = found  # read before it was a parameter
        raise error
    return reports
