"""How a run's gates are worded: one line per gate checked, passed or failed, for the console,
the report and the finished line; and the one line of a run whose gates failed (stderr, exit 4).

Everything here reads the gates' records as the manifest holds them (``quality_gates``,
``regression_gate``, ``non_inferiority``), so a page or line written from a published marker
says what the run said.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ndcg_spark.job.gates import segment_text
from ndcg_spark.options import k_label

#: (passed, line) of one gate on one segment and k.
Line = Tuple[bool, str]


def gate_lines(command: str, manifest: Dict[str, Any]) -> List[Line]:
    """Every gate the run checked, in the order the job checks them: its floors, then its drop
    gate (``ndcg-spark``); the non-inferiority gates (``compare``). Empty when no gate was set.

    Examples
    --------
    >>> floor = {"segment": {}, "k": 10, "threshold": 0.3, "users": 50, "mean_ndcg": 0.41, "passed": True}
    >>> gate_lines("evaluate", {"quality_gates": [floor], "regression_gate": None})
    [(True, 'quality gate passed: mean NDCG@10 = 0.410000 is at least 0.3')]
    """
    if command == "compare":
        return [(g["passed"], _worse_line(g)) for g in manifest.get("non_inferiority") or []]
    lines = [(g["passed"], _floor_line(g)) for g in manifest.get("quality_gates") or []]
    drop = manifest.get("regression_gate")
    if drop:
        if not drop["gates"]:  # no earlier run to compare with: the gate passes, and says why
            lines.append((True, drop["message"]))
        key = next(iter(manifest.get("partition") or {"run_date": None}))
        compared = f"{key} {drop['previous']} -> {drop['current']}{skipped_text(drop.get('skipped') or [], key)}"
        for g in drop["gates"]:
            verdict = "passed" if g["passed"] else "failed"
            lines.append((g["passed"], f"regression gate {verdict}: {compared}, {describe_change(g)}"))
    return lines


def skipped_text(skipped: List[str], key: str) -> str:
    """The runs the drop gate passed over because their tables are gone, as its lines say it."""
    return f" ({', '.join(f'{key}={v}' for v in skipped)} skipped: its tables are missing)" if skipped else ""


def limits(manifest: Dict[str, Any]) -> List[Tuple[str, float]]:
    """(label, value) of what tonight's mean had to reach, for the trend chart: each floor, and
    each drop gate's lowest allowed mean (the earlier run's mean less the allowed drop)."""
    found = []
    for g in manifest.get("quality_gates") or []:
        found.append((f"floor of NDCG@{k_label(g['k'])}{_of(g)}", float(g["threshold"])))
    for g in (manifest.get("regression_gate") or {}).get("gates") or []:
        if g["mean_previous"] is not None and g["threshold"] is not None:
            found.append(
                (f"lowest NDCG@{k_label(g['k'])}{_of(g)} the drop gate allows", g["mean_previous"] - g["threshold"])
            )
    return found


def gates_summary(manifest: Dict[str, Any]) -> str:
    """A run's gates in a few words, as ``history`` shows them: ``-`` (none set), ``passed``, or
    ``failed:`` and which (``floor@10``, ``drop@10 of model=a``, ``worse@10``).

    Examples
    --------
    >>> floor = {"segment": {"model": "a"}, "k": 10, "passed": False}
    >>> gates_summary({"quality_gates": [floor], "regression_gate": {"gates": [{"segment": {}, "k": 5, "passed": True}]}})
    'failed: floor@10 of model=a'
    """
    checked = [("floor", g) for g in manifest.get("quality_gates") or []]
    checked += [("drop", g) for g in (manifest.get("regression_gate") or {}).get("gates") or []]
    checked += [("worse", g) for g in manifest.get("non_inferiority") or []]
    if not checked and not manifest.get("regression_gate"):  # a drop gate with no earlier run passed
        return "-"
    failed = [f"{kind}@{k_label(g['k'])}{_of(g)}" for kind, g in checked if not g.get("passed", True)]
    return "failed: " + ", ".join(failed) if failed else "passed"


def failed_gates(command: str, manifest: Dict[str, Any]) -> Optional[str]:
    """The one line of a run whose gates failed (the first failure and how many more), or None.

    ``ndcg-spark``'s floors come first, then its regression gate; ``compare``'s non-inferiority.
    """
    if command == "compare":
        worse = [g for g in manifest.get("non_inferiority") or [] if not g["passed"]]
        return worse_failure(worse) if worse else None
    floors = [g for g in manifest["quality_gates"] if not g["passed"]]
    drop = manifest.get("regression_gate") or {}
    dropped = any(not g["passed"] for g in drop.get("gates") or [])
    if floors:
        line = gate_failure(floors)
        return (
            line.replace(" (outputs were written)", "; the regression gate failed too (outputs were written)")
            if dropped
            else line
        )
    return drop["message"] if dropped else None


def gate_failure(failed: List[Dict[str, Any]]) -> str:
    """One line naming the first failed floor's segment, k, figure and threshold (and how many more)."""
    more = f"; {len(failed) - 1} more gate(s) failed, see summary.json" if len(failed) > 1 else ""
    return f"{_floor_line(failed[0])}{more} (outputs were written)"


def worse_failure(failed: List[Dict[str, Any]]) -> str:
    """One line naming the first failed non-inferiority gate's pair, figures and margin."""
    more = f"; {len(failed) - 1} more gate(s) failed, see comparison.json" if len(failed) > 1 else ""
    return f"{_worse_line(failed[0])}{more} (outputs were written)"


def _of(g: Dict[str, Any]) -> str:
    segment = _segment(g)
    return f" of {segment}" if segment else ""


def _segment(g: Dict[str, Any]) -> str:
    return ", ".join(f"{c}={v}" for c, v in g["segment"].items())


def _floor_line(g: Dict[str, Any]) -> str:
    k = k_label(g["k"])
    if g["passed"]:
        return f"quality gate passed: mean NDCG@{k}{_of(g)} = {g['mean_ndcg']:.6f} is at least {g['threshold']}"
    if g["mean_ndcg"] is not None:
        what = f"mean NDCG@{k}{_of(g)} = {g['mean_ndcg']:.6f} is below {g['threshold']}"
    elif g["users"] is None:
        what = f"no segment {_segment(g)} at NDCG@{k} to hold against {g['threshold']}"
    else:
        what = f"mean NDCG@{k}{_of(g)} has no users, below {g['threshold']}"
    return f"quality gate failed: {what}"


def _worse_line(g: Dict[str, Any]) -> str:
    k, segment = k_label(g["k"]), _segment(g)
    if g["pairs"] is None:
        return f"non-inferiority gate failed: no comparison row {segment or 'at all'} at NDCG@{k} to hold against margin {g['margin']:g}"
    pair = f"{g['candidate_model']} vs {g['baseline_model']}" if g["candidate_model"] is not None else "candidate"
    of = f" ({segment})" if segment else ""
    if g["mean_difference"] is None or g["difference_ci_low"] is None:
        figures = "no interval (fewer than two users)"
    else:
        figures = (
            f"difference {g['mean_difference']:+.6f}, "
            f"95% interval [{g['difference_ci_low']:+.6f}, {g['difference_ci_high']:+.6f}] over {g['pairs']} users"
        )
    if g["passed"]:
        return (
            f"non-inferiority gate passed: {pair}{of} is not worse at NDCG@{k} by more than {g['margin']:g}: {figures}"
        )
    return f"non-inferiority gate failed: {pair}{of} is worse at NDCG@{k} by more than {g['margin']:g}: {figures}"


def describe_change(g: Dict[str, Any]) -> str:
    """What a gate compared, e.g. ``NDCG@10 of model=v2: 480 users in common, difference
    -0.031200, 95% interval [-0.040100, -0.022300], allowed drop 0.020000``."""
    segment = segment_text(g["segment"], list(g["segment"]))
    of = f" of {segment}" if segment else ""
    text = f"NDCG@{k_label(g['k'])}{of}: {g['users_in_common']} users in common"
    if g["mean_difference"] is None:
        return text + " (nothing to compare)"
    text += f", difference {g['mean_difference']:+.6f}"
    if g["difference_ci_low"] is not None:
        text += f", 95% interval [{g['difference_ci_low']:+.6f}, {g['difference_ci_high']:+.6f}]"
    if g["threshold"] is not None:
        text += f", allowed drop {g['threshold']:.6f}"
    return text
