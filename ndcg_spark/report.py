"""``report.html`` pages: one self-contained HTML page (inline SVG, no scripts, no network) for an
evaluation or a comparison, built on the driver from a few collected rows.

:func:`ndcg_histogram` counts the per-user NDCG in bins in Spark (a few rows per segment and k);
:func:`render` makes the evaluation's page from the summary rows and those bins, and
:func:`render_comparison` the comparison's from the rows of
:meth:`ModelComparison.report <ndcg_spark.ModelComparison.report>` (or
:meth:`ComparisonResult.report <ndcg_spark.ComparisonResult.report>`). Nothing per user reaches
the driver.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._charts.beyond_accuracy import coverage_curve, exposure_chart
from ndcg_spark._charts.plots import BINS, escaped, histograms, ndcg_curve, trend_chart
from ndcg_spark._metrics.accuracy import COMPANIONS, COMPARISON_COLUMNS, SUMMARY_COLUMNS, beyond_comparison_columns
from ndcg_spark._spark.sql import FINITE_NDCG, ident, ndcg_bin
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
    """Counts of per-user NDCG in equal bins over [0, 1], per segment and k, counted in Spark.

    Parameters
    ----------
    per_user : DataFrame
        Per-user figures with the segment columns, ``k`` and ``ndcg``
        (:attr:`EvaluationResult.per_user <ndcg_spark.EvaluationResult.per_user>`).
    group_by : sequence of str
        The segment columns.
    bins : int
        The number of bins (1.0 falls in the last).

    Returns
    -------
    DataFrame
        Segment columns, ``k``, ``bin`` (0-based) and ``users``, for the bins that hold users. A
        user whose NDCG is not a finite number is in no bin.

    Examples
    --------
    >>> per_user = spark.createDataFrame([(1, 10, 0.0), (2, 10, 0.52), (3, 10, 1.0)], "user_id int, k int, ndcg double")
    >>> sorted(tuple(r) for r in ndcg_histogram(per_user, bins=4).collect())
    [(10, 0, 1), (10, 2, 1), (10, 3, 1)]
    """
    keys = [F.col(ident(c)) for c in (*group_by, "k")]
    finite = per_user.filter(FINITE_NDCG)
    return finite.groupBy(*keys, F.expr(ndcg_bin(bins)).alias("bin")).agg(F.count(F.lit(1)).alias("users"))


def render(
    metrics: List[Dict[str, Any]],
    histogram: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark report",
    *,
    notes: Optional[Dict[str, Any]] = None,
    options: Optional[EvaluationOptions] = None,
    trend: Optional[List[Dict[str, Any]]] = None,
    trend_key: str = "run_date",
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
    limits: Sequence[Tuple[str, float]] = (),
    exposure: Optional[List[Dict[str, Any]]] = None,
    exposure_k: Optional[int] = None,
) -> str:
    """An evaluation's report page: the summary table, mean NDCG@k per segment, the histograms of
    per-user NDCG and, when given, the run's verdict, its convention and the trend across runs;
    with beyond-accuracy figures, catalog coverage against k and the exposure curve.

    Parameters
    ----------
    metrics : list of dict
        The summary's rows (:attr:`EvaluationResult.summary <ndcg_spark.EvaluationResult.summary>`,
        collected, each as a dict).
    histogram : list of dict
        The rows of :func:`ndcg_histogram`, each as a dict.
    group_by : sequence of str
        The segment columns.
    title : str
        The page's title and heading.
    notes : dict, optional
        One line of settings under the title (name: value).
    options : EvaluationOptions, optional
        The options of the run: the page then names the convention and shows every switch that
        defines the figure as it resolved.
    trend : list of dict, optional
        Rows of the chart of mean NDCG@k across runs (``trend_key``, segments, ``k``,
        ``mean_ndcg``; the job's history makes them), this run among them.
    trend_key : str
        The column of ``trend`` that names each run.
    verdict : sequence of (bool, str), optional
        Each gate's (passed, line): the page then opens with PASSED or FAILED. Empty: no gate
        was set.
    limits : sequence of (str, float)
        (label, value) lines drawn on the trend chart (a gate's floor).
    exposure : list of dict, optional
        The exposure curve's rows (:meth:`EvaluationResult.exposure_curve
        <ndcg_spark.EvaluationResult.exposure_curve>`, collected): the page then draws it.
        Catalog coverage against k is drawn when the summary rows carry ``catalog_coverage``.
    exposure_k : int or None
        The cutoff of the exposure curve (None: the whole list).

    Returns
    -------
    str
        The whole page.

    Examples
    --------
    >>> metrics = [{"k": 10, "users": 2, "mean_ndcg": 0.5, "mean_dcg": 0.8}]
    >>> page = render(metrics, [{"k": 10, "bin": 10, "users": 2}], notes={"gain": "linear"})
    >>> page.startswith("<!DOCTYPE html>") and "<title>ndcg-spark report</title>" in page
    True
    """
    parts = page_head(title, notes, "#settings td{text-align:left}tr.changed td{font-weight:bold}", verdict)
    if options is not None:
        parts += ["<h2>Convention</h2>", settings_table(options)]
    parts += ["<h2>Summary</h2>", _table(metrics, group_by)]
    parts += ["<h2>Mean NDCG@k</h2>", ndcg_curve(metrics, group_by)]
    if trend is not None:
        parts += [
            f"<h2>Mean NDCG@k by {escaped(trend_key)}</h2>",
            trend_chart(trend, group_by, trend_key, limits=limits),
        ]
    parts += ["<h2>Per-user NDCG</h2>", *histograms(histogram, group_by)]
    if any(m.get("catalog_coverage") is not None for m in metrics):
        parts += ["<h2>Catalog coverage@k</h2>", coverage_curve(metrics, group_by)]
    if exposure is not None:
        parts += [
            f"<h2>Exposure by popularity rank, k = {escaped(k_label(exposure_k))}</h2>",
            exposure_chart(exposure, exposure_k),
        ]
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
        f"<title>{escaped(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
        ".wide{max-width:100%;overflow-x:auto}"
        "#verdict{padding:4px 14px;margin:0 0 1em;border:2px solid}#verdict ul{margin:4px 0 8px}"
        "#verdict.failed{border-color:#d62728;background:#fdecea}#verdict.passed{border-color:#2ca02c;background:#edf7ed}"
        "#verdict.none{border-color:#ccc;background:#f6f6f6}li.failed{color:#a00;font-weight:bold}"
        "svg{background:#fff;border:1px solid #ddd;margin:4px}.small{display:inline-block}" + style + "</style>",
        "</head><body>",
        f"<h1>{escaped(title)}</h1>",
    ]
    if verdict is not None:
        parts.append(verdict_block(verdict))
    if notes:
        parts.append("<p>" + " · ".join(f"{escaped(k)}: {escaped(v)}" for k, v in notes.items()) + "</p>")
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
        f'<li class="{"passed" if passed else "failed"}">{MARKS[passed]} {escaped(line)}</li>'
        for passed, line in verdict
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
        rows.append(f"<tr{changed}><td>{escaped(switch)}</td><td>{escaped(_setting(value))}</td></tr>")
    return (
        f'<p id="convention">convention: {escaped(name)}</p>'
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

    head = "".join(f"<th>{escaped(c)}</th>" for c in columns)
    body = ["<tr>" + "".join(f"<td>{escaped(cell(c, row.get(c)))}</td>" for c in columns) + "</tr>" for row in rows]
    # A wide table scrolls inside its own box; the page keeps the window's width.
    return f'<div class="wide"><table id="{table_id}"><tr>{head}</tr>' + "".join(body) + "</table></div>"


# ----------------------------------------------------------------------------- compare's page


def render_comparison(
    rows: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark comparison",
    *,
    notes: Optional[Dict[str, Any]] = None,
    margins: Optional[Mapping[Any, Sequence[float]]] = None,
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
) -> str:
    """A comparison's report page: the pairs' table and, per k, each pair's mean difference with
    its 95% interval.

    Parameters
    ----------
    rows : list of dict
        :meth:`ModelComparison.report <ndcg_spark.ModelComparison.report>`'s rows (each with
        ``baseline_model`` and ``candidate_model``).
    group_by : sequence of str
        The segment columns.
    title : str
        The page's title and heading.
    notes : dict, optional
        One line of settings under the title (name: value).
    margins : mapping of k to sequence of float, optional
        Non-inferiority margins per k, drawn on that k's chart as dashed lines at -margin.
    verdict : sequence of (bool, str), optional
        Each gate's (passed, line): the page then opens with PASSED or FAILED.

    Returns
    -------
    str
        The whole page.

    Examples
    --------
    >>> schema = "user_id int, item_id string, score double"
    >>> a = spark.createDataFrame([(1, "x", 0.9), (1, "y", 0.8), (2, "z", 0.9)], schema)
    >>> b = spark.createDataFrame([(1, "y", 0.9), (1, "x", 0.8), (2, "z", 0.9)], schema)
    >>> rel = spark.createDataFrame([(1, "y", 1.0), (2, "z", 1.0)], "user_id int, item_id string, relevance double")
    >>> page = render_comparison(compare_models({"a": a, "b": b}, rel, k=[2]).report(), margins={2: [0.05]})
    >>> '<table id="comparison">' in page and 'class="margin"' in page
    True
    """
    columns = ["baseline_model", "candidate_model", *group_by, "k", *(c for c, _ in COMPARISON_COLUMNS)]
    columns += [c for c, _ in beyond_comparison_columns(rows[0])] if rows else []
    parts = page_head(title, notes, verdict=verdict)
    parts += ["<h2>Pairs</h2>", html_table(rows, columns, "comparison", ".4g")]
    parts.append("<h2>Mean difference (candidate − baseline) with its 95% interval</h2>")
    for k in sorted({r["k"] for r in rows}, key=lambda k: (k is None, k or 0)):
        at_k = [r for r in rows if r["k"] == k]
        parts.append(difference_chart(at_k, group_by, k, sorted(set((margins or {}).get(k) or ()))))
    parts.append("</body></html>")
    return "\n".join(parts)


def difference_chart(
    rows: List[Dict[str, Any]], group_by: Sequence[str], k: Any, margins: Sequence[float] = (), width: int = 620
) -> str:
    """One line per pair (and segment): the interval, the mean as a dot, a line at 0; each
    non-inferiority margin as a dashed red line at -margin, on a scale that reaches it."""
    shown = [r for r in rows if r.get("mean_difference") is not None]
    left, right, top, line = 300, 24, 34, 26
    height = top + line * max(len(shown), 1) + 20
    ends = [[r[c] if r.get(c) is not None else r["mean_difference"] for c in ("difference_ci_low", "difference_ci_high")]
            for r in shown]  # fmt: skip
    span = max([abs(v) for pair in ends for v in pair] + [abs(m) for m in margins] + [1e-9])
    w = width - left - right

    def x_of(v: float) -> float:
        return left + w * (v + span) / (2 * span)

    svg = [f'<svg class="differences" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">']
    svg.append(f'<text x="8" y="20" font-size="15">NDCG@{escaped(k_label(k))}</text>')
    svg.append(f'<line x1="{x_of(0):.1f}" y1="{top - 6}" x2="{x_of(0):.1f}" y2="{height - 16}" stroke="#999"/>')
    for m in margins:
        svg.append(
            f'<line class="margin" x1="{x_of(-m):.1f}" y1="{top - 6}" x2="{x_of(-m):.1f}" y2="{height - 16}" '
            f'stroke="#d62728" stroke-dasharray="4 3"><title>non-inferiority margin -{m:g}</title></line>'
            f'<text x="{x_of(-m):.1f}" y="{top - 10}" font-size="12" fill="#d62728" text-anchor="middle">-{m:g}</text>'
        )
    for v, anchor in ((-span, "start"), (0.0, "middle"), (span, "end")):
        text = "0" if v == 0 else f"{v:+.3g}"
        svg.append(
            f'<text class="axis" x="{x_of(v):.1f}" y="{height - 4}" font-size="12" text-anchor="{anchor}">{text}</text>'
        )
    for i, (r, (low, high)) in enumerate(zip(shown, ends)):
        y = top + line * i + line / 2
        segment = ", ".join(f"{c}={r[c]}" for c in group_by)
        label = f"{r['candidate_model']} vs {r['baseline_model']}" + (f" ({segment})" if segment else "")
        p = r.get("p_value_adjusted")
        tip = f"{label}: {r['mean_difference']:+.4f}" + (f", adjusted p = {p:.3g}" if p is not None else "")
        svg.append(f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="13" text-anchor="end">{escaped(label)}</text>')
        svg.append(f'<line x1="{x_of(low):.1f}" y1="{y:.1f}" x2="{x_of(high):.1f}" y2="{y:.1f}" stroke="#1f77b4"/>')
        svg.append(
            f'<circle class="pair" cx="{x_of(r["mean_difference"]):.1f}" cy="{y:.1f}" r="4" fill="#1f77b4">'
            f"<title>{escaped(tip)}</title></circle>"
        )
    svg.append("</svg>")
    return "".join(svg)
