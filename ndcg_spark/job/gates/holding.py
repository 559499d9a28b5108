"""The job's gates held: :func:`check` holds each :class:`~ndcg_spark.job.config.gate_specs.Gate` against the
few rows the driver already holds (the summary, the paired changes, compare's rows) and returns
one typed :class:`Checked` per gate and row, which the manifest records
(:meth:`Checked.to_json`) and :mod:`ndcg_spark.job.gates.wording` words.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Sequence

from ndcg_spark.job.config.gate_specs import Gate, parse_gates, summary_column  # noqa: F401 - parse_gates: the examples
from ndcg_spark.job.result import Checked


def check(
    gates: Sequence[Gate], rows: Sequence[Mapping[str, Any]], group_by: Sequence[str] = (), *,
    point_estimate: bool = False,
) -> List[Checked]:  # fmt: skip
    """Each gate held against every row it selects, in the order of the gates then the rows.

    - **floor** (rows: the summary): passes when the segment's mean NDCG (or the gate's
      beyond-accuracy figure: ``mean_<name>``, or a global one) reaches the floor; a segment
      without a value (no users in the mean) does not.
    - **drop** (rows: the paired changes of :func:`~ndcg_spark.job.gates.regression.paired_change`):
      fails when NDCG fell by more than the allowed drop (a relative one is a share of the
      earlier mean) and, unless ``point_estimate``, the 95% interval of the paired difference
      lies below 0: a fall the interval cannot tell from noise passes.
    - **worse** (rows: compare's): fails when the candidate is worse than its baseline by more
      than the margin with 95% confidence (the interval's upper end below ``-margin``); a pair
      without an interval (fewer than two users) is not shown to be worse and passes.

    A gate that selects no row fails, whatever its kind: a typo in a filter must not let a run
    through.

    Examples
    --------
    >>> floor = parse_gates("floor", "10:0.3")
    >>> [c.passed for c in check(floor, [{"k": 10, "users": 5, "mean_ndcg": 0.25}])]
    [False]
    """
    checked = []
    for gate in gates:
        selected = [r for r in rows if gate.selects(r)]
        checked += [_held(gate, r, group_by, point_estimate) for r in selected]
        if not selected:
            threshold = gate.threshold(None)
            checked.append(Checked(gate, dict(gate.where), False, threshold=threshold, found=False))
    return checked


def _held(gate: Gate, r: Mapping[str, Any], group_by: Sequence[str], point_estimate: bool) -> Checked:
    segment = {c: r.get(c) for c in group_by}
    if gate.kind == "floor":
        mean = r.get(summary_column(gate.metric))
        passed = mean is not None and mean >= gate.amount
        return Checked(gate, segment, passed, threshold=gate.amount, users=r["users"], mean=mean)
    high = r.get("difference_ci_high")
    figures = dict(
        mean_difference=r.get("mean_difference"), difference_ci_low=r.get("difference_ci_low"), difference_ci_high=high
    )
    if gate.kind == "drop":
        threshold = gate.threshold(r["mean_previous"])
        exceeds = threshold is not None and -r["mean_difference"] > threshold
        sure = point_estimate or (high is not None and high < 0)
        return Checked(
            gate, segment, not (exceeds and sure), threshold=threshold, users=r["users_in_common"],
            mean=r["mean_current"], mean_previous=r["mean_previous"], **figures,
        )  # fmt: skip
    return Checked(
        gate, segment, high is None or high >= -gate.amount, threshold=gate.amount, users=r.get("pairs"),
        baseline_model=r.get("baseline_model"), candidate_model=r.get("candidate_model"), **figures,
    )  # fmt: skip
