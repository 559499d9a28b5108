"""compare's report page: the pairs' table and, per k, each pair's mean difference with its interval."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

from ndcg_spark._metrics import COMPARISON_COLUMNS
from ndcg_spark._report import _e, html_table, page_head
from ndcg_spark.options import k_label


def render_comparison(
    rows: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    title: str = "ndcg-spark comparison",
    notes: Optional[Dict[str, Any]] = None,
    margins: Optional[Mapping[Any, Sequence[float]]] = None,
    verdict: Optional[Sequence[Tuple[bool, str]]] = None,
) -> str:
    """The comparison page: the verdict of its gates (when given, each gate's (passed, line)),
    the pairs' table (with the corrected p-values) and, per k, each pair's mean difference with
    its 95% interval; ``margins`` ({k: [margin, ...]}, from the non-inferiority gates) are drawn
    on their k's chart as dashed lines at -margin."""
    columns = ["baseline_model", "candidate_model", *group_by, "k", *(c for c, _ in COMPARISON_COLUMNS)]
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
    svg.append(f'<text x="8" y="20" font-size="15">NDCG@{_e(k_label(k))}</text>')
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
        svg.append(f'<text x="{left - 8}" y="{y + 4:.1f}" font-size="13" text-anchor="end">{_e(label)}</text>')
        svg.append(f'<line x1="{x_of(low):.1f}" y1="{y:.1f}" x2="{x_of(high):.1f}" y2="{y:.1f}" stroke="#1f77b4"/>')
        svg.append(
            f'<circle class="pair" cx="{x_of(r["mean_difference"]):.1f}" cy="{y:.1f}" r="4" fill="#1f77b4">'
            f"<title>{_e(tip)}</title></circle>"
        )
    svg.append("</svg>")
    return "".join(svg)
