"""The regression gate (``--fail-if-drop``): tonight's per-user NDCG against the most recent
earlier complete run's in the same output, paired by user, per segment and k.

The command finds the previous run in its output's runs (a run whose tables were deleted is
skipped) and hands its per-user frame here; it is paired with tonight's in Spark, and only one
row per segment and k is collected, from which the 95% interval of the mean paired difference is computed as
``compare`` does (paired t).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Optional, Sequence

from pyspark.sql import DataFrame

from ndcg_spark.errors import InputDataError
from ndcg_spark.job.config.gate_specs import Gate
from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.gates.holding import check
from ndcg_spark.job.gates.wording import drop_line
from ndcg_spark.job.result import DropOutcome
from ndcg_spark.paired import paired_difference


def paired_change(
    current: DataFrame, previous: DataFrame, group_by: Sequence[str], user_col: str, metric: str = "ndcg"
) -> List[Dict[str, Any]]:
    """Per segment and k, the paired change of NDCG (or of the per-user ``metric``) from
    ``previous`` to ``current`` over the users in both (same segment, user and k).

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
    if metric not in previous.columns:
        raise InputDataError(
            f"the previous run's per-user table has no column {metric!r}: it did not compute {metric}, "
            "so there is nothing to pair with"
        )
    return paired_difference(current, previous, group_by, user_col, metric)


def regression_gate(
    previous: Optional[str],
    previous_per_user: Optional[DataFrame],
    current_value: str,
    current_per_user: DataFrame,
    gates: Sequence[Gate],
    group_by: Sequence[str],
    user_col: str,
    *,
    key: str = RUN_DATE,
    point_estimate: bool = False,
    which: str = "complete run",
    skipped: Sequence[str] = (),
    shown: str = "",
) -> DropOutcome:
    """``--fail-if-drop``: tonight's per-user NDCG against the earlier run's it is handed.

    Parameters
    ----------
    previous : str or None
        The earlier run's partition value; None when there is none (the gate passes, and says so).
    previous_per_user : DataFrame or None
        The earlier run's per-user figures (read by the command from the output's runs).
    current_value : str
        Tonight's partition value (the run date).
    current_per_user : DataFrame
        Tonight's per-user figures (``EvaluationResult.per_user``; cache it, it is read again).
    gates : sequence of Gate
        The ``drop`` gates (:func:`~ndcg_spark.job.config.gate_specs.parse_gates`).
    group_by : sequence of str
        The segment columns.
    user_col : str
        The user column.
    key : str
        The partition column (``run_date``, or the key of ``--partition``).
    point_estimate : bool
        Fail on the mean difference alone, whatever its interval.
    which : str
        What earlier run was looked for (``complete run``, ``passing run``), as the line says it.
    skipped : sequence of str
        The later runs passed over because a table of theirs is gone.
    shown : str
        The output, as the line names it.

    Returns
    -------
    DropOutcome
        With no earlier run, no gate is checked and the message says so (the gate passes).
    """
    if previous is None:
        outcome = DropOutcome(current_value, None, (), "", tuple(skipped))
    else:
        # One pairing per figure the gates hold (NDCG, a per-user beyond-accuracy mean), in the gates' order.
        metrics = list(dict.fromkeys(g.metric for g in gates))
        changes = {m: paired_change(current_per_user, previous_per_user, group_by, user_col, m) for m in metrics}
        checked = [c for g in gates for c in check([g], changes[g.metric], group_by, point_estimate=point_estimate)]
        outcome = DropOutcome(current_value, previous, tuple(checked), "", tuple(skipped))
    return replace(outcome, message=drop_line(outcome, key, which, shown))
