"""The job's gates held: :func:`check` holds each :class:`~ndcg_spark.job.gates.Gate` against the
few rows the driver already holds (the summary, the paired changes, compare's rows) and returns
one typed :class:`Checked` per gate and row, which the manifest records
(:meth:`Checked.to_json`) and :mod:`ndcg_spark.job.verdict` words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ndcg_spark.job.gates import Gate, parse_gates  # noqa: F401 - parse_gates: the examples
from ndcg_spark.options import Cutoff


@dataclass(frozen=True)
class Checked:
    """One gate held against one row it selects (or against nothing, when it selects no row).

    The figures are those of the row the gate read; a kind leaves the others None.

    Attributes
    ----------
    gate : Gate
    segment : dict
        The row's segment values (the gate's filter when it selected no row).
    passed : bool
    threshold : float or None
        The floor; the drop allowed as an NDCG difference (None: relative, with no earlier mean);
        the margin.
    users : int or None
        Users in the mean (floor), users in common (drop), pairs (worse); None when no row.
    mean : float or None
        Mean NDCG (floor); tonight's mean over the users in common (drop).
    mean_previous : float or None
        The earlier run's mean over the users in common (drop).
    mean_difference, difference_ci_low, difference_ci_high : float or None
        The paired difference and its 95% interval (drop: tonight - earlier; worse: candidate -
        baseline).
    baseline_model, candidate_model : str or None
        The pair a ``worse`` gate held.
    """

    gate: Gate
    segment: Dict[str, Any]
    passed: bool
    threshold: Optional[float] = None
    users: Optional[int] = None
    mean: Optional[float] = None
    mean_previous: Optional[float] = None
    mean_difference: Optional[float] = None
    difference_ci_low: Optional[float] = None
    difference_ci_high: Optional[float] = None
    baseline_model: Optional[str] = None
    candidate_model: Optional[str] = None
    #: Whether the gate selected a row at all.
    found: bool = field(default=True)

    @property
    def kind(self) -> str:
        return self.gate.kind

    @property
    def k(self) -> Cutoff:
        return self.gate.k

    def to_json(self) -> Dict[str, Any]:
        """The record the manifest keeps (``quality_gates``, ``regression_gate.gates``, ``non_inferiority``)."""
        head = {"gate": self.gate.describe(), "segment": self.segment, "k": self.k}
        interval = {"difference_ci_low": self.difference_ci_low, "difference_ci_high": self.difference_ci_high}
        if self.kind == "floor":
            body = {"threshold": self.threshold, "users": self.users, "mean_ndcg": self.mean}
        elif self.kind == "drop":
            body = {
                "threshold": self.threshold,
                "users_in_common": self.users if self.found else 0,
                "mean_previous": self.mean_previous,
                "mean_current": self.mean,
                "mean_difference": self.mean_difference,
                **interval,
            }
        else:
            body = {
                "margin": self.threshold,
                "baseline_model": self.baseline_model,
                "candidate_model": self.candidate_model,
                "pairs": self.users,
                "mean_difference": self.mean_difference,
                **interval,
            }
        return {**head, **body, "passed": self.passed}

    @classmethod
    def from_json(cls, kind: str, record: Mapping[str, Any]) -> Checked:
        """A record as :meth:`to_json` wrote it (missing figures read as None)."""
        get = record.get
        amount = get("margin") if kind == "worse" else get("threshold")
        gate = RecordedGate(kind, (), get("k"), math.nan if amount is None else amount, text=get("gate") or "")
        users = {"floor": get("users"), "drop": get("users_in_common"), "worse": get("pairs")}[kind]
        return cls(
            gate,
            dict(get("segment") or {}),
            bool(get("passed", True)),
            threshold=get("margin") if kind == "worse" else get("threshold"),
            users=users,
            mean=get("mean_ndcg") if kind == "floor" else get("mean_current"),
            mean_previous=get("mean_previous"),
            mean_difference=get("mean_difference"),
            difference_ci_low=get("difference_ci_low"),
            difference_ci_high=get("difference_ci_high"),
            baseline_model=get("baseline_model"),
            candidate_model=get("candidate_model"),
            found=not (kind == "floor" and users is None) and not (kind == "worse" and users is None),
        )


@dataclass(frozen=True)
class RecordedGate(Gate):
    """A gate as a manifest recorded it: its spelling kept as written (``text``), its k and amount
    the record's own values (a relative drop's amount as the NDCG figure it came to), never read
    from the spelling again. It words a verdict; it is not held against rows again."""

    text: str = ""

    def describe(self) -> str:
        return self.text or super().describe()


def check(
    gates: Sequence[Gate], rows: Sequence[Mapping[str, Any]], group_by: Sequence[str] = (), *,
    point_estimate: bool = False,
) -> List[Checked]:  # fmt: skip
    """Each gate held against every row it selects, in the order of the gates then the rows.

    - **floor** (rows: the summary): passes when the segment's mean NDCG reaches the floor; a
      segment without users in the mean does not.
    - **drop** (rows: the paired changes of :func:`~ndcg_spark.job.regression.paired_change`):
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
        mean = r["mean_ndcg"]
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
