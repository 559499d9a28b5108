"""``report.html``: one self-contained page (inline SVG, no scripts, no network) with the summary
table, the NDCG@k curve per segment and a histogram of per-user NDCG per k; for ``compare``, the
pairs' table and their mean differences with intervals.

The histogram bins are counted in Spark (:func:`ndcg_histogram`); the page is built on the
driver from those counts and the summary rows only.
"""

from __future__ import annotations

import html
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._metrics import COMPANIONS
from ndcg_spark._sql import ident
from ndcg_spark.options import EvaluationOptions, k_label

BINS = 20
#: Height of one legend line under the NDCG@k curve, in pixels.
LEGEND_LINE = 18
#: Average width of a character of the sans-serif labels, as a share of the font size.
CHAR_WIDTH = 0.62
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")
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
) -> str:
    """The report page as a string.

    With ``options``, the page says which convention made its figures and shows every switch
    that defines them as it resolved (:func:`settings_table`), above the summary. With ``trend``
    (rows of :func:`trend_chart`, tonight's run among them), also the chart of mean NDCG@k
    across runs.
    """
    parts = page_head(title, notes, "#settings td{text-align:left}tr.changed td{font-weight:bold}")
    if options is not None:
        parts += ["<h2>Convention</h2>", settings_table(options)]
    parts += ["<h2>Summary</h2>", _table(metrics, group_by)]
    parts += ["<h2>Mean NDCG@k</h2>", ndcg_curve(metrics, group_by)]
    if trend is not None:
        parts += [f"<h2>Mean NDCG@k by {_e(trend_key)}</h2>", trend_chart(trend, group_by, trend_key)]
    parts += ["<h2>Per-user NDCG</h2>", *histograms(histogram, group_by)]
    parts.append("</body></html>")
    return "\n".join(parts)


def page_head(title: str, notes: Optional[Dict[str, Any]] = None, style: str = "") -> List[str]:
    """The start of a report page: the head with its style, the title, and the line of ``notes``."""
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{_e(title)}</title>",
        "<style>body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}"
        "svg{background:#fff;border:1px solid #ddd;margin:4px}.small{display:inline-block}" + style + "</style>",
        "</head><body>",
        f"<h1>{_e(title)}</h1>",
    ]
    if notes:
        parts.append("<p>" + " · ".join(f"{_e(k)}: {_e(v)}" for k, v in notes.items()) + "</p>")
    return parts


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


def _e(value: Any) -> str:
    return html.escape(str(value))


def _segment(row: Dict[str, Any], group_by: Sequence[str]) -> str:
    return ", ".join(f"{c}={row[c]}" for c in group_by) or "all users"


def _table(metrics: List[Dict[str, Any]], group_by: Sequence[str]) -> str:
    columns = [*group_by, "k", "users", "mean_ndcg", "ndcg_ci_low", "ndcg_ci_high", "mean_dcg", "std_ndcg"]
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
    return f'<table id="{table_id}"><tr>{head}</tr>' + "".join(body) + "</table>"


def ndcg_curve(metrics: List[Dict[str, Any]], group_by: Sequence[str], width: int = 560, height: int = 320) -> str:
    """Line chart of mean NDCG against k (finite cutoffs), one line per segment."""
    finite = [m for m in metrics if m["k"] is not None and m["mean_ndcg"] is not None]
    ks = sorted({m["k"] for m in finite})
    segments: Dict[str, List[Dict[str, Any]]] = {}
    for m in finite:
        segments.setdefault(_segment(m, group_by), []).append(m)
    y_max = min(1.0, _nice(max([m["mean_ndcg"] for m in finite] + [1e-9])))
    svg, (left, top, w, h) = _plot("ndcg-curve", width, height, len(segments) if ks else None, y_max)
    if not ks:
        svg.append(f'<text x="{left + 10}" y="{top + 20}">no finite cutoff</text></svg>')
        return "".join(svg)

    def x_of(k: int) -> float:
        return left + (w * ks.index(k) / (len(ks) - 1) if len(ks) > 1 else w / 2)

    for k in ks:
        svg.append(f'<text x="{x_of(k):.1f}" y="{top + h + 16}" font-size="11" text-anchor="middle">{k}</text>')
    svg.append(f'<text x="{left + w / 2}" y="{height - 4}" font-size="12" text-anchor="middle">k</text>')

    def y_of(r: Dict[str, Any]) -> float:
        return top + h - h * r["mean_ndcg"] / y_max

    for i, (name, rows) in enumerate(sorted(segments.items())):
        line = [(x_of(r["k"]), y_of(r)) for r in sorted(rows, key=lambda r: r["k"])]
        dots = [(x_of(r["k"]), y_of(r), f"{name} k={r['k']}: {r['mean_ndcg']:.4f}") for r in rows]
        svg += _series(i, name, "segment", line, dots, width, height)
    svg.append("</svg>")
    return "".join(svg)


def histograms(rows: List[Dict[str, Any]], group_by: Sequence[str], bins: int = BINS) -> List[str]:
    """One small bar chart per (segment, k)."""
    charts: Dict[tuple, List[int]] = {}
    for r in rows:
        key = (_segment(r, group_by), r["k"])
        charts.setdefault(key, [0] * bins)[int(r["bin"])] += int(r["users"])
    out = []
    width, height, pad = 300, 160, 24
    for (segment, k), counts in sorted(charts.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or 0)):
        top = max(counts) or 1
        bar = (width - 2 * pad) / bins
        svg = [
            f'<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
        ]
        svg.append(_label(f"{segment}, NDCG@{k_label(k)} ({sum(counts)} users)", pad, 14, width - 2 * pad, 12))
        for i, c in enumerate(counts):
            bh = (height - 2 * pad - 10) * c / top
            svg.append(
                f'<rect x="{pad + i * bar:.1f}" y="{height - pad - bh:.1f}" width="{bar - 1:.1f}" height="{bh:.1f}" '
                f'fill="#1f77b4"><title>[{i / bins:.2f}, {(i + 1) / bins:.2f}): {c}</title></rect>'
            )
        svg.append(f'<text x="{pad}" y="{height - 6}" font-size="10">0</text>')
        svg.append(f'<text x="{width - pad}" y="{height - 6}" font-size="10" text-anchor="end">1</text>')
        svg.append("</svg>")
        out.append('<div class="small">' + "".join(svg) + "</div>")
    return out


def _plot(
    svg_id: str, width: int, height: int, legend_lines: Optional[int], y_max: float
) -> Tuple[List[str], Tuple[int, int, int, int]]:
    """The opening of a line chart: the SVG element, its two axes and the y axis' five ticks up to
    ``y_max``; and the plot's (left, top, width, height). ``legend_lines``: the lines of the
    legend below the plot (None: nothing is drawn, and no room is kept for a legend)."""
    left, right, top, bottom = 50, 20, 20, 40
    w, h = width - left - right, height - top - bottom
    # The legend goes below the plot, one line a series, so a name of any length has the
    # chart's whole width (and is cut with an ellipsis, in full in its tooltip, past that).
    total = height + (LEGEND_LINE * legend_lines + 8 if legend_lines is not None else 0)
    svg = [f'<svg id="{svg_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" role="img">']
    svg.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#444"/>')
    svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#444"/>')
    for i in range(5):
        svg.append(
            f'<text x="{left - 6}" y="{top + h - h * i / 4 + 4:.1f}" font-size="11" text-anchor="end">'
            f"{y_max * i / 4:.3g}</text>"
        )
    return svg, (left, top, w, h)


def _series(
    i: int,
    name: str,
    css_class: str,
    line: List[Tuple[float, float]],
    dots: List[Tuple[float, float, str]],
    width: int,
    height: int,
) -> List[str]:
    """The ``i``-th series of a line chart: its line through ``line`` (x, y), its points ``dots``
    (x, y, tooltip) and its entry in the legend below the chart, in the ``i``-th colour."""
    color = PALETTE[i % len(PALETTE)]
    points = " ".join(f"{x:.1f},{y:.1f}" for x, y in line)
    svg = [f'<polyline class="{css_class}" fill="none" stroke="{color}" stroke-width="2" points="{points}"/>']
    svg += [
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{_e(tip)}</title></circle>'
        for x, y, tip in dots
    ]
    y = height + LEGEND_LINE * i + 12
    svg.append(f'<line x1="10" y1="{y - 4}" x2="30" y2="{y - 4}" stroke="{color}" stroke-width="2"/>')
    svg.append(_label(name, 36, y, width - 36 - 8, 12, f'class="legend" fill="{color}"'))
    return svg


def _label(text: str, x: float, y: float, room: float, size: int, attributes: str = "") -> str:
    """An SVG text that fits ``room`` pixels: cut with an ellipsis past an estimate of its
    width, the whole text as its tooltip (``<title>``). A label near the limit is set to
    exactly ``room`` (``textLength``), so wide glyphs cannot push it out of the chart."""
    fits = max(int(room / (size * CHAR_WIDTH)), 4)
    shown = text if len(text) <= fits else text[: fits - 1] + "\u2026"
    extra = f" {attributes}" if attributes else ""
    if len(shown) * size * CHAR_WIDTH > 0.85 * room:
        extra += f' textLength="{room:.0f}" lengthAdjust="spacingAndGlyphs"'
    return f'<text x="{x}" y="{y}" font-size="{size}"{extra}><title>{_e(text)}</title>{_e(shown)}</text>'


def _nice(value: float) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0):
        if value <= step:
            return step
    return 1.0


def trend_chart(
    rows: List[Dict[str, Any]], group_by: Sequence[str], key: str = "run_date", width: int = 560, height: int = 320
) -> str:
    """Mean NDCG@k across runs (``key``, ascending), one line per segment and k with its 95% interval as a band.

    ``rows``: one per run, segment and k, with ``mean_ndcg``, ``ndcg_ci_low``, ``ndcg_ci_high``.
    """
    shown = [r for r in rows if r.get("mean_ndcg") is not None]
    runs = sorted({r[key] for r in shown})
    lines: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in shown:
        lines.setdefault((_segment(r, group_by), r["k"] is None, r["k"] or 0), []).append(r)
    y_max = min(1.0, _nice(max([r.get("ndcg_ci_high") or r["mean_ndcg"] for r in shown] + [1e-9])))
    svg, (left, top, w, h) = _plot("ndcg-trend", width, height, len(lines) if runs else None, y_max)
    if not runs:
        svg.append(f'<text x="{left + 10}" y="{top + 20}">no complete run</text></svg>')
        return "".join(svg)

    def x_of(run: str) -> float:
        return left + (w * runs.index(run) / (len(runs) - 1) if len(runs) > 1 else w / 2)

    def y_of(v: float) -> float:
        return top + h - h * min(max(v, 0.0), y_max) / y_max

    # Every run is a point; at most about eight are labelled, the last always.
    step = max(1, -(-len(runs) // 8))
    for i, run in enumerate(runs):
        if i % step == 0 or i == len(runs) - 1:
            # The last run sits on the right edge: its label ends there, so it stays inside the chart.
            anchor = "end" if i == len(runs) - 1 and i > 0 else "middle"
            svg.append(
                f'<text x="{x_of(run):.1f}" y="{top + h + 16}" font-size="10" text-anchor="{anchor}">{_e(run)}</text>'
            )
    svg.append(f'<text x="{left + w / 2}" y="{height - 4}" font-size="12" text-anchor="middle">{_e(key)}</text>')
    for i, ((segment, _, _), points) in enumerate(sorted(lines.items())):
        color = PALETTE[i % len(PALETTE)]
        points.sort(key=lambda r: r[key])
        name = f"{segment}, NDCG@{k_label(points[0]['k'])}"
        banded = [r for r in points if r.get("ndcg_ci_low") is not None and r.get("ndcg_ci_high") is not None]
        if banded:
            edge = [(x_of(r[key]), y_of(r["ndcg_ci_high"])) for r in banded]
            edge += [(x_of(r[key]), y_of(r["ndcg_ci_low"])) for r in reversed(banded)]
            outline = " ".join(f"{x:.1f},{y:.1f}" for x, y in edge)
            svg.append(f'<polygon class="band" fill="{color}" fill-opacity="0.15" stroke="none" points="{outline}"/>')
        line = [(x_of(r[key]), y_of(r["mean_ndcg"])) for r in points]
        dots = []
        for r in points:
            interval = f" [{r['ndcg_ci_low']:.4f}, {r['ndcg_ci_high']:.4f}]" if r in banded else ""
            dots.append((x_of(r[key]), y_of(r["mean_ndcg"]), f"{name} {r[key]}: {r['mean_ndcg']:.4f}{interval}"))
        svg += _series(i, name, "trend", line, dots, width, height)
    svg.append("</svg>")
    return "".join(svg)
