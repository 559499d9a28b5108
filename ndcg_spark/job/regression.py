"""The regression gate (``--fail-if-drop``): tonight's per-user NDCG against the most recent
earlier complete run's in the same output, paired by user, per segment and k.

The previous run is found by its marker (:func:`ndcg_spark.job.history.previous_intact_run`,
which skips a run whose tables were deleted); its
per-user partition is read and paired with tonight's in Spark, and only one row per segment and
k is collected, from which the 95% interval of the mean paired difference is computed as
``compare`` does (paired t).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from pyspark.sql import DataFrame

from ndcg_spark.compare import paired_difference
from ndcg_spark.errors import InputDataError
from ndcg_spark.job.gates import ChangeGate, parse_change_gates
from ndcg_spark.job.history import RUN_DATE, previous_intact_run, read_per_user
from ndcg_spark.job.storage import shown
from ndcg_spark.job.verdict import describe_change, skipped_text
from ndcg_spark.options import Cutoff


def parse_drop_gates(spec: Any, group_by: Sequence[str] = (), cutoffs: Optional[Sequence[Cutoff]] = None):
    """``--fail-if-drop [column=value:]k:drop[,...]``; ``drop`` absolute (``0.02``) or a share
    of the previous run's mean (``2%``). Raises ConfigError (one line) on a bad spelling."""
    return parse_change_gates(spec, "fail_if_drop", group_by, cutoffs)


def paired_change(
    current: DataFrame, previous: DataFrame, group_by: Sequence[str], user_col: str
) -> List[Dict[str, Any]]:
    """Per segment and k, the paired change of NDCG from ``previous`` to ``current`` over the
    users in both (same segment, user and k).

    The pairing and the sums run in Spark; one row per segment and k is collected, and the 95%
    interval of the mean difference is computed from it as ``compare`` does (paired t).

    Parameters
    ----------
    current, previous : DataFrame
        Per-user figures of the two runs: the segment columns, ``user_col``, ``k`` and ``ndcg``.
    group_by : sequence of str
        The segment columns.
    user_col : str
        The user column.

    Returns
    -------
    list of dict
        Segments, ``k``, ``users_in_common``, ``mean_previous``, ``mean_current``,
        ``mean_difference`` (current - previous), ``std_difference``, ``difference_ci_low``,
        ``difference_ci_high``, ``t_statistic``, ``p_value``; segments then k ascending, the
        whole list last.
    """
    keys = [*group_by, user_col, "k"]
    missing = [c for c in keys if c not in previous.columns]
    if missing:
        raise InputDataError(
            f"the previous run's per-user table has no column {missing[0]!r}: it was evaluated with other segments"
        )
    return paired_difference(current, previous, group_by, user_col)


@dataclass(frozen=True)
class RegressionOutcome:
    """The regression gate's decision.

    Attributes
    ----------
    current, previous : str or None
        The partition values compared (``previous`` None: no earlier complete run).
    checked : list of dict
        One record per (gate, segment it selects): ``gate``, ``segment``, ``k``, ``threshold``
        (as an NDCG difference), ``users_in_common``, ``mean_previous``, ``mean_current``,
        ``mean_difference``, ``difference_ci_low``, ``difference_ci_high``, ``passed``.
    message : str
        One line: what was compared and the decision (the first failure when any).
    skipped : list of str
        The later runs passed over because a table of theirs is gone.
    """

    current: str
    previous: Optional[str]
    checked: List[Dict[str, Any]] = field(default_factory=list)
    message: str = ""
    skipped: List[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        """Whether any gate failed (the job then exits 4, its outputs written)."""
        return any(not g["passed"] for g in self.checked)

    def to_dict(self) -> Dict[str, Any]:
        """The decision as the manifest records it."""
        return {
            "current": self.current,
            "previous": self.previous,
            "skipped": self.skipped,
            "gates": self.checked,
            "message": self.message,
        }


def check_drops(
    gates: Sequence[ChangeGate],
    changes: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    *,
    point_estimate: bool = False,
) -> List[Dict[str, Any]]:
    """Each drop gate held against every row of :func:`paired_change` it selects.

    A gate fails a segment when NDCG fell by more than its threshold (the previous mean less
    tonight's, over the users in common) and, unless ``point_estimate``, the 95% interval of the
    paired difference lies below 0 (a fall the interval cannot tell from noise passes). A
    relative threshold is a share of the previous mean. A gate that selects no row with users
    in common fails: a typo in a filter must not let a run through.
    """
    checked = []
    for gate in gates:
        selected = [r for r in changes if gate.selects(r)]
        for r in selected:
            threshold = gate.threshold(r["mean_previous"])
            high = r["difference_ci_high"]
            exceeds = threshold is not None and -r["mean_difference"] > threshold
            sure = point_estimate or (high is not None and high < 0)
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": {c: r[c] for c in group_by},
                    "k": gate.k,
                    "threshold": threshold,
                    **{c: r[c] for c in ("users_in_common", "mean_previous", "mean_current", "mean_difference")},
                    "difference_ci_low": r["difference_ci_low"],
                    "difference_ci_high": high,
                    "passed": not (exceeds and sure),
                }
            )
        if not selected:
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": dict(gate.where),
                    "k": gate.k,
                    "threshold": gate.amount if not gate.relative else None,
                    "users_in_common": 0,
                    **dict.fromkeys(("mean_previous", "mean_current", "mean_difference")),
                    **dict.fromkeys(("difference_ci_low", "difference_ci_high")),
                    "passed": False,
                }
            )
    return checked


def regression_gate(
    spark,
    output: str,
    current_value: str,
    current_per_user: DataFrame,
    gates: Sequence[ChangeGate],
    group_by: Sequence[str],
    user_col: str,
    *,
    key: str = RUN_DATE,
    point_estimate: bool = False,
    passed_only: bool = False,
) -> RegressionOutcome:
    """``--fail-if-drop``: tonight's per-user NDCG against the most recent earlier complete run's.

    Parameters
    ----------
    spark : SparkSession
    output : str
        The job's output directory, which holds the earlier runs.
    current_value : str
        Tonight's partition value (the run date).
    current_per_user : DataFrame
        Tonight's per-user figures (``EvaluationResult.per_user``; cache it, it is read again).
    gates : sequence of ChangeGate
        From :func:`parse_drop_gates`.
    group_by : sequence of str
        The segment columns.
    user_col : str
        The user column.
    key : str
        The partition column (``run_date``, or the key of ``--partition``).
    point_estimate : bool
        Fail on the mean difference alone, whatever its interval.
    passed_only : bool
        Compare with the most recent earlier run whose gates all passed, not the most recent.

    Returns
    -------
    RegressionOutcome
        With no earlier run, no gate is checked and the message says so (the gate passes).
    """
    previous, skipped = previous_intact_run(spark, output, current_value, key, passed_only=passed_only)
    # A run whose tables were deleted is skipped, and the line says so: never a dead end.
    gone = skipped_text(skipped, key)
    if previous is None:
        which = "passing run" if passed_only else "complete run"
        line = f"regression gate: no {which} before {key}={current_value} in {shown(output)}{gone}; passed"
        return RegressionOutcome(current_value, None, [], line, skipped)
    changes = paired_change(current_per_user, read_per_user(spark, output, previous, key), group_by, user_col)
    checked = check_drops(gates, changes, group_by, point_estimate=point_estimate)
    failed = [g for g in checked if not g["passed"]]
    first = failed[0] if failed else (checked[0] if checked else None)
    verdict = "failed" if failed else "passed"
    line = f"regression gate {verdict}: {key} {previous} -> {current_value}{gone}"
    if first is not None:
        line += ", " + describe_change(first)
    if len(failed) > 1:
        line += f"; {len(failed) - 1} more gate(s) failed, see summary.json"
    if failed:
        line += " (outputs were written)"
    return RegressionOutcome(current_value, previous, checked, line, skipped)
