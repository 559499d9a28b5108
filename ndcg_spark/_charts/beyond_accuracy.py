"""The report's beyond-accuracy charts, drawn on the driver from a few collected rows: catalog
coverage against k (from the summary) and the exposure curve (from
:meth:`EvaluationResult.exposure_curve <ndcg_spark.EvaluationResult.exposure_curve>`, at most 100
bins of popularity rank)."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence

from ndcg_spark._charts.plots import escaped, k_curve, line_chart, nice_ceiling, series_svg, x_scale, y_scale
from ndcg_spark.options import k_label


def _y_max(values: Sequence[float]) -> float:
    """The axis' top: a round share for figures up to 1, the next whole number past it (a coverage
    over the interactions' items can exceed 1, as Recommenders')."""
    top = max([*values, 1e-9])
    return nice_ceiling(top) if top <= 1.0 else float(math.ceil(top))


def coverage_curve(metrics: List[Dict[str, Any]], group_by: Sequence[str], width: int = 560, height: int = 320) -> str:
    """Line chart of catalog coverage against k (finite cutoffs), one line per segment."""

    def y_max(rows: List[Dict[str, Any]]) -> float:
        return _y_max([m["catalog_coverage"] for m in rows])

    return k_curve("coverage-curve", metrics, group_by, "catalog_coverage", "catalog coverage", y_max, "coverage",
                   width=width, height=height)  # fmt: skip


def exposure_chart(rows: List[Dict[str, Any]], k: Optional[int], width: int = 560, height: int = 320) -> str:
    """The exposure curve: per bin of popularity rank (most popular first), the share of the
    recommendations within k its items got, beside their share of the interactions. A model
    that follows popularity draws its line on the interactions'; one that reaches the long tail
    lifts the right of the chart."""
    rows = sorted((r for r in rows if r.get("bin") is not None), key=lambda r: r["bin"])
    series = (
        ("exposure_share", f"share of recommendations@{k_label(k)}"),
        ("interaction_share", "share of interactions"),
    )
    values = [r[c] for r in rows for c, _ in series if r.get(c) is not None]
    y_max = _y_max(values)
    svg, (left, top, w, h) = line_chart("exposure-curve", width, height, len(series) if rows else None, y_max, "share")
    if not rows:
        svg.append(f'<text x="{left + 10}" y="{top + 20}">no item</text></svg>')
        return "".join(svg)
    bins = [r["bin"] for r in rows]
    x_of, y_of = x_scale(bins, left, w), y_scale(top, h, y_max)
    # About six rank labels along the axis: the first rank of their bin.
    step = max(1, -(-len(rows) // 6))
    for i, r in enumerate(rows):
        if i % step == 0 or i == len(rows) - 1:
            anchor = "end" if i == len(rows) - 1 and i > 0 else "middle"
            svg.append(
                f'<text x="{x_of(r["bin"]):.1f}" y="{top + h + 16}" font-size="10" '
                f'text-anchor="{anchor}">{r["first_rank"]}</text>'
            )
    title = "item's popularity rank in the interactions (1: most popular)"
    svg.append(f'<text x="{left + w / 2}" y="{height - 4}" font-size="12" text-anchor="middle">{escaped(title)}</text>')
    for i, (column, name) in enumerate(series):
        shown = [r for r in rows if r.get(column) is not None]
        line = [(x_of(r["bin"]), y_of(r[column])) for r in shown]
        dots = [
            (x, y, f"{name}, ranks {r['first_rank']}-{r['last_rank']} ({r['items']} items): {r[column]:.4f}")
            for (x, y), r in zip(line, shown)
        ]
        svg += series_svg(i, name, "exposure", line, dots, width, height)
    svg.append("</svg>")
    return "".join(svg)
