"""``ndcg-spark validate``: the run's inputs checked as the run would read them, writing nothing.

With the same flags and TOML file as the job, it reads both tables (and the beyond-accuracy
tables given: interactions, items, baseline recommendations), applies every row rule
(:func:`ndcg_spark.validate`) and prints every problem with its row count and example keys (exit
3), or, when there is none, the row accounting the run would publish (exit 0). Under
``on_invalid_rows = "quarantine"`` the problems are the rows the run would set aside: listed, and
counted in the accounting (exit 0).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Dict, List, Sequence

from ndcg_spark.errors import INVALID_ROWS, InputDataError
from ndcg_spark.evaluation import BEYOND_TABLES, evaluate
from ndcg_spark.job import console, progress
from ndcg_spark.job.commands.input_tables import account_rows, read_input
from ndcg_spark.job.config.parsing import EvaluateConfig
from ndcg_spark.job.exits import EXIT_INPUT, EXIT_OK
from ndcg_spark.validation import validate

#: The output the config needs to parse when ``validate`` is given none: it writes nothing.
NO_OUTPUT = "(validate writes nothing)"


def with_output(argv: Sequence[str]) -> List[str]:
    """``validate``'s flags as the job's config takes them: with an output (the config needs one;
    validate writes nothing), unless catalog tables are given as the output."""
    return list(argv) if "--output-table" in argv else [*argv, "--output", NO_OUTPUT]


def main(spark, config: EvaluateConfig) -> Dict[str, Any]:
    """Check ``config``'s inputs: ``{"problems": [...], "rows": accounting or None}``.

    ``problems`` are the one-line descriptions of every problem found (empty when none);
    ``unknown_items`` what the items table lacks, per table ({} without one);
    ``rows`` the row accounting (:func:`~ndcg_spark.job.commands.input_tables.account_rows`) when the run
    would go on, else None. Empty tables and schema problems raise :class:`InputDataError`.
    """
    progress.phase("reading the inputs")
    recs = read_input(spark, config, "recommendations")
    rel = read_input(spark, config, "relevance")
    attributes = read_input(spark, config, "user_attributes") if config.inputs.user_attributes else None
    beyond = {role: read_input(spark, config, role) for role in BEYOND_TABLES if getattr(config.inputs, role)}
    opts = config.options
    progress.phase("checking every row rule")
    problems: List[str] = []
    try:
        reports = validate(recs, rel, dataclasses.replace(opts, on_invalid_rows="error"), **beyond)
    except InputDataError as error:
        if error.condition != INVALID_ROWS:  # an empty table, a schema problem: no rule was applied
            raise
        problems = list(error.parameters["problems"])
        reports = error.reports
    unknown = {t: r.unknown_items for t, r in reports.items() if r.unknown_items}
    if problems and opts.on_invalid_rows == "error":
        return {"problems": problems, "rows": None, "unknown_items": unknown}
    progress.phase("counting the rows the run would use")
    evaluation = evaluate(recs, rel, opts, user_attributes=attributes)
    sums = evaluation.row_accounting()
    read = evaluation.input_rows()
    rejected: Dict[str, Dict[str, int]] = {"recommendations": {}, "relevance": {}}
    for table, frame in (evaluation.rejected or {}).items():
        rejected[table] = {r["reason"]: r["count"] for r in frame.groupBy("reason").count().collect()}
    return {"problems": problems, "rows": account_rows(read, rejected, sums), "unknown_items": unknown}


def report(checked: Dict[str, Any]) -> tuple:
    """(exit code, the lines on stdout, the finished record) of what :func:`main` found."""
    problems, rows, unknown = checked["problems"], checked["rows"], checked.get("unknown_items") or {}
    lines = [console.printable(f"problem: {p}") for p in problems]
    for table, n in unknown.items():
        what = "rows name" if table == "interactions" else "distinct items are"
        missing = "an item the items table lacks" if table == "interactions" else "missing from the items table"
        lines.append(f"note: {table}: {n} {what} {missing} (counted; the run goes on)")
    if rows is not None:
        lines += console.accounting_lines(rows)
    invalid = rows is None
    record = {
        "event": "ndcg_spark.finished",
        "command": "validate",
        "status": "invalid_input" if invalid else "ok",
        "problems": problems,
        "rows": rows,
        "unknown_items": unknown,
    }
    return (EXIT_INPUT if invalid else EXIT_OK), lines, record
