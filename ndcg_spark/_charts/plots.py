"""The report's SVG charts: the NDCG@k curve, the trend across runs and the histograms of
per-user NDCG, drawn on the driver from the summary rows and the histogram's counts."""

from __future__ import annotations

import html
import math
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ndcg_spark.options import k_label

BINS = 20
#: Height of one legend line under the NDCG@k curve, in pixels.
LEGEND_LINE = 18
#: Average width of a character of the sans-serif labels, as a share of the font size.
CHAR_WIDTH = 0.62
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf")


def escaped(value: Any) -> str:
    return html.escape(str(value))


def _segment(row: Dict[str, Any], group_by: Sequence[str]) -> str:
    return ", ".join(f"{c}={row[c]}" for c in group_by) or "all users"


def ndcg_curve(metrics: List[Dict[str, Any]], group_by: Sequence[str], width: int = 560, height: int = 320) -> str:
    """Line chart of mean NDCG against k (finite cutoffs), one line per segment with its 95%
    interval as a band."""

    def y_max(rows: List[Dict[str, Any]]) -> float:
        return min(1.0, nice_ceiling(max([m.get("ndcg_ci_high") or m["mean_ndcg"] for m in rows] + [1e-9])))

    return k_curve("ndcg-curve", metrics, group_by, "mean_ndcg", "mean NDCG", y_max, "segment", True, width, height)


def k_curve(
    chart: str,
    metrics: List[Dict[str, Any]],
    group_by: Sequence[str],
    column: str,
    title: str,
    y_max_of: Callable[[List[Dict[str, Any]]], float],
    kind: str,
    banded: bool = False,
    width: int = 560,
    height: int = 320,
) -> str:
    """Line chart of the summary's ``column`` against k (finite cutoffs), one line per segment:
    the skeleton of the report's @k charts. ``y_max_of``: the axis' top from the charted rows;
    ``banded``: NDCG's 95% interval as a band around each line and in each point's label."""
    finite = [m for m in metrics if m["k"] is not None and m.get(column) is not None]
    ks = sorted({m["k"] for m in finite})
    segments: Dict[str, List[Dict[str, Any]]] = {}
    for m in finite:
        segments.setdefault(_segment(m, group_by), []).append(m)
    y_max = y_max_of(finite)
    svg, (left, top, w, h) = line_chart(chart, width, height, len(segments) if ks else None, y_max, title)
    if not ks:
        svg.append(f'<text x="{left + 10}" y="{top + 20}">no finite cutoff</text></svg>')
        return "".join(svg)

    x_of, y_of = x_scale(ks, left, w), y_scale(top, h, y_max)

    for k in ks:
        svg.append(f'<text x="{x_of(k):.1f}" y="{top + h + 16}" font-size="11" text-anchor="middle">{k}</text>')
    svg.append(f'<text x="{left + w / 2}" y="{height - 4}" font-size="12" text-anchor="middle">k (cutoff)</text>')

    for i, (name, rows) in enumerate(sorted(segments.items())):
        rows = sorted(rows, key=lambda r: r["k"])
        if banded:
            svg += _band([(x_of(r["k"]), r) for r in rows], y_of, PALETTE[i % len(PALETTE)])
        line = [(x_of(r["k"]), y_of(r[column])) for r in rows]
        dots = [
            (x, y, f"{name} k={r['k']}: {r[column]:.4f}{_interval(r) if banded else ''}")
            for (x, y), r in zip(line, rows)
        ]
        svg += series_svg(i, name, kind, line, dots, width, height)
    svg.append("</svg>")
    return "".join(svg)


def _band(points: List[Tuple[float, Dict[str, Any]]], y_of, color: str) -> List[str]:
    """The 95% interval of a series as a shaded band: (x, row) of the points that have one."""
    banded = [(x, r) for x, r in points if r.get("ndcg_ci_low") is not None and r.get("ndcg_ci_high") is not None]
    if not banded:
        return []
    edge = [(x, y_of(r["ndcg_ci_high"])) for x, r in banded] + [
        (x, y_of(r["ndcg_ci_low"])) for x, r in reversed(banded)
    ]
    outline = " ".join(f"{x:.1f},{y:.1f}" for x, y in edge)
    return [f'<polygon class="band" fill="{color}" fill-opacity="0.15" stroke="none" points="{outline}"/>']


def _interval(r: Dict[str, Any]) -> str:
    if r.get("ndcg_ci_low") is None or r.get("ndcg_ci_high") is None:
        return ""
    return f" [{r['ndcg_ci_low']:.4f}, {r['ndcg_ci_high']:.4f}]"


def histograms(rows: List[Dict[str, Any]], group_by: Sequence[str], bins: int = BINS) -> List[str]:
    """One bar chart per (segment, k): users per bin of NDCG, on a logarithmic count axis so a
    bin of a few users stands beside one of thousands, each bar's count written above it."""
    charts: Dict[tuple, List[int]] = {}
    for r in rows:
        key = (_segment(r, group_by), r["k"])
        charts.setdefault(key, [0] * bins)[int(r["bin"])] += int(r["users"])
    out = []
    # Rows from the top: the chart's label, the count axis' title, then the plot, whose tallest
    # bar has its count above it, under the axis' title (they never meet).
    width, height, left, right, top, bottom = 440, 212, 44, 10, 46, 34
    w, h = width - left - right, height - top - bottom
    for (segment, k), counts in sorted(charts.items(), key=lambda kv: (kv[0][0], kv[0][1] is None, kv[0][1] or 0)):
        scale = math.log10(max(max(counts), 1) + 1)
        bar = w / bins

        def y_of(count: float, scale: float = scale) -> float:
            return top + h - h * math.log10(count + 1) / scale

        svg = [
            f'<svg class="histogram" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img">'
        ]
        svg.append(_label(f"{segment}, NDCG@{k_label(k)} ({sum(counts)} users)", left, 14, w, 12))
        svg.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#444"/>')
        svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#444"/>')
        tick = 1
        while tick <= max(counts):
            svg.append(
                f'<text class="count-tick" x="{left - 4}" y="{y_of(tick) + 3:.1f}" font-size="10" text-anchor="end">'
                f"{_count(tick)}</text>"
            )
            tick *= 10
        svg.append(f'<text class="axis-title" x="4" y="{top - 16}" font-size="10">users (log)</text>')
        for i, c in enumerate(counts):
            x, y = left + i * bar, y_of(c)
            svg.append(
                f'<rect x="{x + 0.5:.1f}" y="{y:.1f}" width="{bar - 1:.1f}" height="{top + h - y:.1f}" '
                f'fill="#1f77b4"><title>[{i / bins:.2f}, {(i + 1) / bins:.2f}): {c}</title></rect>'
            )
            if c:
                svg.append(
                    f'<text class="count" x="{x + bar / 2:.1f}" y="{y - 3:.1f}" font-size="9" '
                    f'text-anchor="middle">{_count(c)}</text>'
                )
        for v in (0, 0.5, 1):
            anchor = ("start", "middle", "end")[int(v * 2)]
            svg.append(
                f'<text x="{left + w * v:.1f}" y="{top + h + 13}" font-size="10" text-anchor="{anchor}">{v:g}</text>'
            )
        svg.append(f'<text x="{left + w / 2:.1f}" y="{height - 4}" font-size="11" text-anchor="middle">NDCG</text>')
        svg.append("</svg>")
        out.append('<div class="small">' + "".join(svg) + "</div>")
    return out


def _count(n: int) -> str:
    """A count in at most four characters: 7, 345, 1.2k, 35k, 1.2M.

    Examples
    --------
    >>> [_count(n) for n in (7, 345, 1234, 35_000, 1_200_000)]
    ['7', '345', '1.2k', '35k', '1.2M']
    """
    for size, unit in ((1_000_000, "M"), (1_000, "k")):
        if n >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 10 else f"{value:.0f}{unit}"
    return str(n)


def line_chart(
    svg_id: str, width: int, height: int, legend_lines: Optional[int], y_max: float, y_title: str
) -> Tuple[List[str], Tuple[int, int, int, int]]:
    """The opening of a line chart: the SVG element, its two axes, the y axis' title and five
    ticks up to ``y_max``; and the plot's (left, top, width, height). ``legend_lines``: the lines
    of the legend below the plot (None: nothing is drawn, and no room is kept for a legend)."""
    left, right, top, bottom = 50, 20, 20, 40
    w, h = width - left - right, height - top - bottom
    # The legend goes below the plot, one line a series, so a name of any length has the
    # chart's whole width (and is cut with an ellipsis, in full in its tooltip, past that).
    total = height + (LEGEND_LINE * legend_lines + 8 if legend_lines is not None else 0)
    svg = [f'<svg id="{svg_id}" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{total}" role="img">']
    svg.append(f'<line x1="{left}" y1="{top + h}" x2="{left + w}" y2="{top + h}" stroke="#444"/>')
    svg.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + h}" stroke="#444"/>')
    # The axis' title reads across, above its top tick: a rotated text would need room on the left.
    svg.append(f'<text class="axis-title" x="{left + 6}" y="{top + 4}" font-size="12">{escaped(y_title)}</text>')
    for i in range(5):
        svg.append(
            f'<text x="{left - 6}" y="{top + h - h * i / 4 + 4:.1f}" font-size="11" text-anchor="end">'
            f"{y_max * i / 4:.3g}</text>"
        )
    return svg, (left, top, w, h)


def x_scale(values: Sequence[Any], left: float, w: float):
    """x of each of ``values`` (sorted), spread evenly across the plot; one value sits in its middle."""
    return lambda v: left + (w * values.index(v) / (len(values) - 1) if len(values) > 1 else w / 2)


def y_scale(top: float, h: float, y_max: float):
    """y of a figure on the axis from 0 to ``y_max``, held inside the plot."""
    return lambda v: top + h - h * min(max(v, 0.0), y_max) / y_max


def series_svg(
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
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{color}"><title>{escaped(tip)}</title></circle>'
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
    return f'<text x="{x}" y="{y}" font-size="{size}"{extra}><title>{escaped(text)}</title>{escaped(shown)}</text>'


def nice_ceiling(value: float) -> float:
    for step in (0.01, 0.02, 0.05, 0.1, 0.2, 0.25, 0.5, 1.0):
        if value <= step:
            return step
    return 1.0


def trend_chart(
    rows: List[Dict[str, Any]],
    group_by: Sequence[str],
    key: str = "run_date",
    width: int = 560,
    height: int = 320,
    limits: Sequence[Tuple[str, float]] = (),
) -> str:
    """Mean NDCG@k across runs (``key``, ascending), one line per segment and k with its 95% interval as a band.

    ``rows``: one per run, segment and k, with ``mean_ndcg``, ``ndcg_ci_low``, ``ndcg_ci_high``.
    ``limits``: (label, value) drawn as dashed red lines across the chart (a gate's floor, the
    lowest mean a drop gate allows tonight).
    """
    shown = [r for r in rows if r.get("mean_ndcg") is not None]
    runs = sorted({r[key] for r in shown})
    lines: Dict[tuple, List[Dict[str, Any]]] = {}
    for r in shown:
        lines.setdefault((_segment(r, group_by), r["k"] is None, r["k"] or 0), []).append(r)
    highest = [r.get("ndcg_ci_high") or r["mean_ndcg"] for r in shown] + [v for _, v in limits]
    y_max = min(1.0, nice_ceiling(max(highest + [1e-9])))
    legend = len(lines) + len(limits) if runs else None
    svg, (left, top, w, h) = line_chart("ndcg-trend", width, height, legend, y_max, "mean NDCG")
    if not runs:
        svg.append(f'<text x="{left + 10}" y="{top + 20}">no complete run</text></svg>')
        return "".join(svg)

    x_of, y_of = x_scale(runs, left, w), y_scale(top, h, y_max)

    # Every run is a point; at most about eight are labelled, the last always.
    step = max(1, -(-len(runs) // 8))
    for i, run in enumerate(runs):
        if i % step == 0 or i == len(runs) - 1:
            # The last run sits on the right edge: its label ends there, so it stays inside the chart.
            anchor = "end" if i == len(runs) - 1 and i > 0 else "middle"
            svg.append(
                f'<text x="{x_of(run):.1f}" y="{top + h + 16}" font-size="10" text-anchor="{anchor}">{escaped(run)}</text>'
            )
    svg.append(f'<text x="{left + w / 2}" y="{height - 4}" font-size="12" text-anchor="middle">{escaped(key)}</text>')
    # Each limit is a dashed line across the plot, named in the legend below it: a label on the
    # line itself would sit on the trend lines that run near it.
    for i, (label, value) in enumerate(limits):
        y, below = y_of(value), height + LEGEND_LINE * (len(lines) + i) + 12
        svg.append(
            f'<line class="limit" x1="{left}" y1="{y:.1f}" x2="{left + w}" y2="{y:.1f}" stroke="#d62728" '
            f'stroke-dasharray="5 3"><title>{escaped(label)}: {value:.4f}</title></line>'
        )
        svg.append(
            f'<line x1="10" y1="{below - 4}" x2="30" y2="{below - 4}" stroke="#d62728" stroke-width="2" '
            'stroke-dasharray="5 3"/>'
        )
        svg.append(
            _label(f"{label}: {value:.4f}", 36, below, width - 36 - 8, 12, 'class="legend limit" fill="#d62728"')
        )
    for i, ((segment, _, _), points) in enumerate(sorted(lines.items())):
        points.sort(key=lambda r: r[key])
        name = f"{segment}, NDCG@{k_label(points[0]['k'])}"
        svg += _band([(x_of(r[key]), r) for r in points], y_of, PALETTE[i % len(PALETTE)])
        line = [(x_of(r[key]), y_of(r["mean_ndcg"])) for r in points]
        dots = [
            (x_of(r[key]), y_of(r["mean_ndcg"]), f"{name} {r[key]}: {r['mean_ndcg']:.4f}{_interval(r)}") for r in points
        ]
        svg += series_svg(i, name, "trend", line, dots, width, height)
    svg.append("</svg>")
    return "".join(svg)
