"""What the job prints: fixed-width tables, the row accounting, and one JSON line for schedulers."""

from __future__ import annotations

import unicodedata
from typing import Any, Dict, List, Optional, Sequence

from ndcg_spark.compare import COMPARISON_COLUMNS, beyond_comparison_columns
from ndcg_spark.evaluation import COMPANIONS, SUMMARY_COLUMNS
from ndcg_spark.job.config.targets import shown
from ndcg_spark.job.result import RunResult, gates_summary
from ndcg_spark.options import beyond_global, beyond_per_user, k_label

#: Unicode categories escaped when printed: controls, format characters, line and paragraph separators.
UNPRINTABLE = ("Cc", "Cf", "Zl", "Zp")

#: Columns printed after those when the companion metrics were computed.
COMPANION_COLUMNS = tuple((m.summary, m.header) for m in COMPANIONS)


def beyond_columns() -> tuple:
    """The beyond-accuracy figures of the summary (each mean, then the global figures), as the
    console shows them: (column, header), for the metrics declared now."""
    return tuple((f"mean_{n}", n) for n in beyond_per_user()) + tuple((n, n) for n in beyond_global())


def printable(text: str) -> str:
    r"""``text`` with control and line-breaking characters escaped, so a value prints on its own line.

    Examples
    --------
    >>> printable('kr\n{"event": "x"}\x1b[2J')
    'kr\\n{"event": "x"}\\x1b[2J'
    """
    return "".join(
        ch.encode("unicode_escape").decode("ascii") if unicodedata.category(ch) in UNPRINTABLE else ch for ch in text
    )


def cell(value: Any) -> str:
    """A value as printed: floats to 6 decimals (in scientific notation below 1e-4, where six
    decimals would say 0), a missing value as ``-``, control characters escaped.

    Examples
    --------
    >>> [cell(v) for v in (0.0278, 9e-17, 0.0, None, "kr")]
    ['0.027800', '9.000e-17', '0.000000', '-', 'kr']
    """
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3e}" if 0 < abs(value) < 1e-4 else f"{value:.6f}"
    return printable(str(value))


def text_table(rows: List[Dict[str, Any]], columns: Sequence[tuple], segments: Sequence[str] = ()) -> str:
    """Right-aligned columns: ``k`` (``all`` for the whole list), the segments, then ``columns``.

    Examples
    --------
    >>> print(text_table([{"k": 5, "users": 3}, {"k": None, "users": 12}], [("users", "users")]))
      k  users
      5      3
    all     12
    """
    headers = ["k", *segments, *(header for _, header in columns)]
    table = [
        [k_label(r["k"]), *(cell(r.get(s)) for s in segments), *(cell(r.get(c)) for c, _ in columns)] for r in rows
    ]
    widths = [max([len(h), *(len(t[i]) for t in table)]) for i, h in enumerate(headers)]
    return "\n".join("  ".join(v.rjust(w) for v, w in zip(line, widths)) for line in [headers, *table])


def format_summary(
    metrics: List[Dict[str, Any]], segments: Sequence[str] = (), accounting: Optional[Dict[str, Any]] = None
) -> str:
    """The summary as a table, then one line of row accounting per table."""
    companions = tuple(c for c in COMPANION_COLUMNS + beyond_columns() if metrics and c[0] in metrics[0])
    return "\n".join([text_table(metrics, SUMMARY_COLUMNS + companions, segments), *accounting_lines(accounting)])


def accounting_lines(accounting: Optional[Dict[str, Any]]) -> List[str]:
    """One line of row accounting per table: ``read N = used M + <reason> n, ...``."""
    lines = []
    for table, t in (accounting or {}).items():
        aside = ", ".join(f"{k} {v}" for k, v in t["set_aside"].items() if v)
        lines.append(f"{table}: read {t['read']} = used {t['used']}" + (f" + {aside}" if aside else ""))
    return lines


def format_comparison(rows: List[Dict[str, Any]], segments: Sequence[str] = ()) -> str:
    """The comparison as a table, each row led by its pair of models when they are named."""
    names = [c for c in ("baseline_model", "candidate_model") if rows and c in rows[0]]
    # The corrected p-value is shown only where compare_models corrected for several pairs.
    columns = [c for c in COMPARISON_COLUMNS if c[0] != "p_value_adjusted" or (rows and c[0] in rows[0])]
    # Then each paired beyond-accuracy metric the comparison carries.
    columns += beyond_comparison_columns(rows[0]) if rows else ()
    return text_table(rows, columns, [*names, *segments])


def output_shown(path: str, result: Optional[RunResult] = None) -> str:
    """The output as every line names it: the path the run qualified (``run.output``) without a
    local ``file:`` scheme; before that, a local path made absolute, a URI as given."""
    qualified = result.output if result is not None else None
    if qualified:
        return shown(qualified)
    return path  # config.Output.shown: a local path made absolute, a URI or a table family's name as given


def finished_record(config, result: RunResult, status: str) -> Dict[str, Any]:
    """The ``ndcg_spark.finished`` JSON line: the figures per segment and k (``"all"`` for the
    whole list), and without segments also ``users`` and ``mean_ndcg`` keyed by k."""
    group_by, part, command = config.options.group_by, config.output.partition, result.command
    if command == "compare":
        fields = (
            "baseline_model",
            "candidate_model",
            "pairs",
            "mean_ndcg_baseline",
            "mean_ndcg_candidate",
            "mean_difference",
            "p_value",
            "p_value_adjusted",
        )
    else:
        fields = ("users", "mean_ndcg")
    rows = result.figures
    figures = [
        {"segment": {c: r[c] for c in group_by}, "k": k_label(r["k"]), **{f: r.get(f) for f in fields}} for r in rows
    ]
    record = {
        "event": "ndcg_spark.finished",
        "command": command,
        "status": status,
        "output": output_shown(config.output.shown, result),
    }
    record["partition"] = {part.key: part.value} if part else None
    if command != "compare" and not group_by:
        record["users"] = rows[0]["users"] if rows else 0
        record["mean_ndcg"] = {k_label(r["k"]): r["mean_ndcg"] for r in rows}
    record["figures"] = figures
    # The gates in the words history shows them: "-", "passed" or "failed: floor@10, ...".
    record["gates"] = gates_summary(result)
    record["input_rows"] = result.input_rows
    record["duration_seconds"] = result.duration_seconds
    return record
