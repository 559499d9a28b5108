"""``report.html``: one self-contained page (inline SVG, no scripts, no network) with the summary
table, the NDCG@k curve per segment and a histogram of per-user NDCG per k; for ``compare``, the
pairs' table and their mean differences with intervals.

The histogram bins are counted in Spark (:func:`ndcg_histogram`); the page is built on the
driver from those counts and the summary rows only.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._charts import BINS, _e, histograms, ndcg_curve, trend_chart
from ndcg_spark._metrics import COMPANIONS, SUMMARY_COLUMNS
from ndcg_spark._sql import ident
from ndcg_spark.options import EvaluationOptions, k_label

#: The options that define the figure (docs/conventions.md), shown under the page's convention.
CONVENTION_SWITCHES = (
    "gain",
    "tie_break",
    "ties",
    "zero_idcg",
    "no_recommendations",
    "no_relevance",
    "negative_relevance",
    "duplicate_relevance",
    "cap_ideal_at_list_length",
    "discount",
    "log_base",
    "ideal",
    "positions",
    "gains",
    "whole_list",
    "confidence_interval",
)


def ndcg_histogram(per_user: DataFrame, group_by: Sequence[str] = (), bins: int = BINS) -> DataFrame:
    """Counts of per-user NDCG in ``bins`` equal bins over [0, 1] (1.0 in the last), per segment and k.

    A user whose NDCG is not a finite number (null, NaN, infinite) is in no bin: flooring NaN
    would put it in the first.
    """
    b = F.least(F.floor(F.col("ndcg") * F.lit(bins)).cast("int"), F.lit(bins - 1))
    keys = [F.col(ident(c)) for c in (*group_by, "k")]
    finite = per_user.filter("ndcg IS NOT NULL AND NOT isnan(ndcg) AND abs(ndcg) <> CAST('Infinity' AS DOUBLE)")
    return finite.groupBy(*keys, b.alias("bin")).agg(F.count(F.lit(1)).alias("users"))


def render(
    metrics: List[Dict[str, Any]],
    histogram: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark report",
    notes: Optional[Dict[str, Any]] = None,
    options: Optional[EvaluationOptions] = None,
    trend: Optional[List[Dict[str, Any]]] = None,
    trend_key: str = "run_date",
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
    limits: Sequence[Tuple[str, float]] = (),
) -> str:
    """The report page as a string.

    With ``verdict`` (each gate's (passed, line), as the console words it; empty when no gate
    was set), the page opens with the run's verdict. With ``options``, the page says which
    convention made its figures and shows every switch that defines them as it resolved
    (:func:`settings_table`), above the summary. With ``trend`` (rows of :func:`trend_chart`,
    tonight's run among them), also the chart of mean NDCG@k across runs, with each of
    ``limits`` ((label, value): a gate's floor, the lowest mean a drop gate allows) drawn on it.
    """
    parts = page_head(title, notes, "#settings td{text-align:left}tr.changed td{font-weight:bold}", verdict)
    if options is not None:
        parts += ["<h2>Convention</h2>", settings_table(options)]
    parts += ["<h2>Summary</h2>", _table(metrics, group_by)]
    parts += ["<h2>Mean NDCG@k</h2>", ndcg_curve(metrics, group_by)]
    if trend is not None:
        parts += [f"<h2>Mean NDCG@k by {_e(trend_key)}</h2>", trend_chart(trend, group_by, trend_key, limits=limits)]
    parts += ["<h2>Per-user NDCG</h2>", *histograms(histogram, group_by)]
    parts.append("</body></html>")
    return "\n".join(parts)


def page_head(
    title: str,
    notes: Optional[Dict[str, Any]] = None,
    style: str = "",
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
) -> List[str]:
    """The start of a report page: the head with its style, the title, the run's verdict (when
    given: :func:`verdict_block`) and the line of ``notes``."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
        ".wide{max-width:100%;overflow-x:auto}"
        "#verdict{padding:4px 14px;margin:0 0 1em;border:2px solid}#verdict ul{margin:4px 0 8px}"
        "#verdict.failed{border-color:#d62728;background:#fdecea}#verdict.passed{border-color:#2ca02c;background:#edf7ed}"
        "#verdict.none{border-color:#ccc;background:#f6f6f6}li.failed{color:#a00;font-weight:bold}"
        "svg{background:#fff;border:1px solid #ddd;margin:4px}.small{display:inline-block}" + style + "</style>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    if verdict is not None:
        parts.append(verdict_block(verdict))
    if notes:
        parts.append("<p>" + " · ".join(f"{_e(k)}: {_e(v)}" for k, v in notes.items()) + "</p>")
    return parts


#: A gate's line is led by a check mark when it passed, a cross when it failed.
MARKS = {True: "\u2713", False: "\u2717"}


def verdict_block(verdict: Sequence[Tuple[bool, str]]) -> str:
    """The run's verdict: PASSED or FAILED and how many gates failed, then each gate's line.

    Examples
    --------
    >>> print(verdict_block([(True, "quality gate passed: mean NDCG@10 = 0.41 >= 0.3")]))
    <div id="verdict" class="passed"><p><strong>PASSED</strong>: 1 gate, all passed</p><ul><li class="passed">✓ quality gate passed: mean NDCG@10 = 0.41 &gt;= 0.3</li></ul></div>
    >>> verdict_block([])
    '<div id="verdict" class="none"><p><strong>No gate</strong> was set for this run.</p></div>'
    """
    if not verdict:
        return '<div id="verdict" class="none"><p><strong>No gate</strong> was set for this run.</p></div>'
    failed = sum(1 for passed, _ in verdict if not passed)
    gates = f"{len(verdict)} gate{'s' if len(verdict) != 1 else ''}"
    head = (
        f"<strong>FAILED</strong>: {failed} of {gates} failed"
        if failed
        else f"<strong>PASSED</strong>: {gates}, all passed"
    )
    items = "".join(
        f'<li class="{"passed" if passed else "failed"}">{MARKS[passed]} {_e(line)}</li>' for passed, line in verdict
    )
    return f'<div id="verdict" class="{"failed" if failed else "passed"}"><p>{head}</p><ul>{items}</ul></div>'


def settings_table(options: EvaluationOptions) -> str:
    """The convention's name (or "none": the defaults) and each switch of
    :data:`CONVENTION_SWITCHES` as it resolved; a switch away from its default is marked ``changed``.

    Examples
    --------
    >>> page = settings_table(EvaluationOptions(convention="trec_eval", gain="exponential"))
    >>> page.startswith('<p id="convention">convention: trec_eval')
    True
    >>> '<tr class="changed"><td>gain</td><td>exponential</td></tr>' in page
    True
    """
    defaults = EvaluationOptions()
    name = options.convention or "none (every switch at its default unless set)"
    rows = []
    for switch in CONVENTION_SWITCHES:
        value = getattr(options, switch)
        changed = ' class="changed"' if value != getattr(defaults, switch) else ""
        rows.append(f"<tr{changed}><td>{_e(switch)}</td><td>{_e(_setting(value))}</td></tr>")
    return (
        f'<p id="convention">convention: {_e(name)}</p>'
        '<table id="settings"><tr><th>switch</th><th>value</th></tr>' + "".join(rows) + "</table>"
    )


def _setting(value: Any) -> str:
    """A switch's value as the config file writes it: true/false, a gain map as {grade = gain}."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, tuple):
        return "{" + ", ".join(f"{grade:g} = {gain:g}" for grade, gain in value) + "}"
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _table(metrics: List[Dict[str, Any]], group_by: Sequence[str]) -> str:
    columns = [*group_by, "k", *(c for c, _ in SUMMARY_COLUMNS)]
    columns += [m.summary for m in COMPANIONS if metrics and m.summary in metrics[0]]
    return html_table(metrics, columns, "summary", ".4f")


def html_table(rows: List[Dict[str, Any]], columns: Sequence[str], table_id: str, float_format: str) -> str:
    """An HTML table of ``rows`` (dicts) under ``columns``: floats as ``float_format``, ``k`` as its label, ``-`` for none."""

    def cell(column: str, value: Any) -> str:
        if column == "k":
            return k_label(value)
        if isinstance(value, float):
            return format(value, float_format)
        return "-" if value is None else value

    head = "".join(f"<th>{_e(c)}</th>" for c in columns)
    body = ["<tr>" + "".join(f"<td>{_e(cell(c, row.get(c)))}</td>" for c in columns) + "</tr>" for row in rows]
    # A wide table scrolls inside its own box; the page keeps the window's width.
    return f'<div class="wide"><table id="{table_id}"><tr>{head}</tr>' + "".join(body) + "</table></div>"
