"""How a run's gates are worded: one line per gate checked, passed or failed, for the console,
the report and the finished line; and the one line of a run whose gates failed (stderr, exit 4).

Everything here reads a :class:`~ndcg_spark.job.result.RunResult`, tonight's or one read back
from a published marker, so a page or line written from a marker says what the run said.
"""

from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from ndcg_spark.job.config.gate_specs import NDCG
from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.result import Checked, DropOutcome, RunResult, of_segment, segment_text
from ndcg_spark.options import k_label

#: (passed, line) of one gate on one segment and k.
Line = Tuple[bool, str]


def gate_lines(result: RunResult) -> List[Line]:
    """Every gate the run checked, in the order the job checks them: its floors, then its drop
    gate (``ndcg-spark``); the non-inferiority gates (``compare``). Empty when no gate was set.

    Examples
    --------
    >>> from ndcg_spark.job.gates.holding import check
    >>> from ndcg_spark.job.config.gate_specs import parse_gates
    >>> floors = check(parse_gates("floor", "10:0.3"), [{"k": 10, "users": 50, "mean_ndcg": 0.41}])
    >>> gate_lines(RunResult("evaluate", floors=tuple(floors)))
    [(True, 'quality gate passed: mean NDCG@10 = 0.410000 is at least 0.3')]
    """
    lines = [(c.passed, _floor_line(c)) for c in result.floors]
    drop = result.drop
    if drop:
        if not drop.checked:  # no earlier run to compare with: the gate passes, and says why
            lines.append((True, drop.message))
        key = next(iter(result.partition or {RUN_DATE: None}))
        compared = f"{key} {drop.previous} -> {drop.current}{skipped_text(drop.skipped, key)}"
        for c in drop.checked:
            verdict = "passed" if c.passed else "failed"
            lines.append((c.passed, f"regression gate {verdict}: {compared}, {describe_change(c)}"))
    return lines + [(c.passed, _worse_line(c)) for c in result.worse]


def skipped_text(skipped: Sequence[str], key: str) -> str:
    """The runs the drop gate passed over because their tables are gone, as its lines say it."""
    return f" ({', '.join(f'{key}={v}' for v in skipped)} skipped: its tables are missing)" if skipped else ""


def limits(result: RunResult) -> List[Tuple[str, float]]:
    """(label, value) of what tonight's mean had to reach, for the trend chart: each floor, and
    each drop gate's lowest allowed mean (the earlier run's mean less the allowed drop)."""
    # The trend chart draws mean NDCG: a gate on a beyond-accuracy figure has no place on it.
    found = [
        (f"floor of NDCG@{k_label(c.k)}{of_segment(c)}", float(c.threshold))
        for c in result.floors
        if c.gate.metric == NDCG
    ]
    for c in result.drop.checked if result.drop else ():
        if c.mean_previous is not None and c.threshold is not None and c.gate.metric == NDCG:
            found.append(
                (f"lowest NDCG@{k_label(c.k)}{of_segment(c)} the drop gate allows", c.mean_previous - c.threshold)
            )
    return found


def failed_gates(result: RunResult) -> Optional[str]:
    """The one line of a run whose gates failed (the first failure and how many more), or None.

    ``ndcg-spark``'s floors come first, then its regression gate; ``compare``'s non-inferiority.
    """
    worse = [c for c in result.worse if not c.passed]
    if worse:
        return worse_failure(worse)
    floors = [c for c in result.floors if not c.passed]
    dropped = result.drop is not None and result.drop.failed
    if floors:
        line = gate_failure(floors)
        return (
            line.replace(" (outputs were written)", "; the regression gate failed too (outputs were written)")
            if dropped
            else line
        )
    return result.drop.message if dropped else None


def gate_failure(failed: Sequence[Checked]) -> str:
    """One line naming the first failed floor's segment, k, figure and threshold (and how many more)."""
    more = f"; {len(failed) - 1} more gate(s) failed, see summary.json" if len(failed) > 1 else ""
    return f"{_floor_line(failed[0])}{more} (outputs were written)"


def worse_failure(failed: Sequence[Checked]) -> str:
    """One line naming the first failed non-inferiority gate's pair, figures and margin."""
    more = f"; {len(failed) - 1} more gate(s) failed, see comparison.json" if len(failed) > 1 else ""
    return f"{_worse_line(failed[0])}{more} (outputs were written)"


def drop_line(outcome: DropOutcome, key: str, which: str, output: str) -> str:
    """The regression gate's one line: what it compared and its decision (the first failure).

    With no earlier run it names which it looked for (``complete run``) and in what output."""
    gone = skipped_text(outcome.skipped, key)
    if outcome.previous is None:
        return f"regression gate: no {which} before {key}={outcome.current} in {output}{gone}; passed"
    failed = [c for c in outcome.checked if not c.passed]
    first = failed[0] if failed else (outcome.checked[0] if outcome.checked else None)
    line = f"regression gate {'failed' if failed else 'passed'}: {key} {outcome.previous} -> {outcome.current}{gone}"
    if first is not None:
        line += ", " + describe_change(first)
    if len(failed) > 1:
        line += f"; {len(failed) - 1} more gate(s) failed, see summary.json"
    if failed:
        line += " (outputs were written)"
    return line


def _floor_line(c: Checked) -> str:
    k, label = k_label(c.k), c.gate.label
    if c.passed:
        return f"quality gate passed: {label}@{k}{of_segment(c)} = {c.mean:.6f} is at least {c.threshold}"
    if c.mean is not None:
        what = f"{label}@{k}{of_segment(c)} = {c.mean:.6f} is below {c.threshold}"
    elif c.users is None:
        what = f"no segment {segment_text(c)} at {_figure(c)}@{k} to hold against {c.threshold}"
    else:
        what = f"{label}@{k}{of_segment(c)} has no users, below {c.threshold}"
    return f"quality gate failed: {what}"


def _worse_line(c: Checked) -> str:
    k, segment = k_label(c.k), segment_text(c)
    if c.users is None:
        return f"non-inferiority gate failed: no comparison row {segment or 'at all'} at NDCG@{k} to hold against margin {c.threshold:g}"
    pair = f"{c.candidate_model} vs {c.baseline_model}" if c.candidate_model is not None else "candidate"
    of = f" ({segment})" if segment else ""
    if c.mean_difference is None or c.difference_ci_low is None:
        figures = "no interval (fewer than two users)"
    else:
        figures = (
            f"difference {c.mean_difference:+.6f}, "
            f"95% interval [{c.difference_ci_low:+.6f}, {c.difference_ci_high:+.6f}] over {c.users} users"
        )
    if c.passed:
        return (
            f"non-inferiority gate passed: {pair}{of} is not worse at NDCG@{k} by more than {c.threshold:g}: {figures}"
        )
    return f"non-inferiority gate failed: {pair}{of} is worse at NDCG@{k} by more than {c.threshold:g}: {figures}"


def _figure(c: Checked) -> str:
    """The figure a gate holds, as its lines name it without ``mean``: ``NDCG``, ``novelty``."""
    return "NDCG" if c.gate.metric == NDCG else c.gate.metric


def describe_change(c: Checked) -> str:
    """What a drop gate compared, e.g. ``NDCG@10 of model=v2: 480 users in common, difference
    -0.031200, 95% interval [-0.040100, -0.022300], allowed drop 0.020000``."""
    text = f"{_figure(c)}@{k_label(c.k)}{of_segment(c)}: {c.users if c.found else 0} users in common"
    if c.mean_difference is None:
        return text + " (nothing to compare)"
    text += f", difference {c.mean_difference:+.6f}"
    if c.difference_ci_low is not None:
        text += f", 95% interval [{c.difference_ci_low:+.6f}, {c.difference_ci_high:+.6f}]"
    if c.threshold is not None:
        text += f", allowed drop {c.threshold:.6f}"
    return text
