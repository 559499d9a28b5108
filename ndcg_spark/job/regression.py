"""The regression gate (``--fail-if-drop``): tonight's per-user NDCG against the most recent
earlier complete run's in the same output, paired by user, per segment and k.

The previous run is found by its marker (:func:`ndcg_spark.job.history.previous_intact_run`,
which skips a run whose tables were deleted); its
per-user partition is read and paired with tonight's in Spark, and only one row per segment and
k is collected, from which the 95% interval of the mean paired difference is computed as
``compare`` does (paired t).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Dict, List, Sequence

from pyspark.sql import DataFrame

from ndcg_spark.errors import InputDataError
from ndcg_spark.job.checks import check
from ndcg_spark.job.gates import Gate
from ndcg_spark.job.history import RUN_DATE, runs_of
from ndcg_spark.job.result import DropOutcome
from ndcg_spark.job.verdict import drop_line
from ndcg_spark.paired import paired_difference


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


def regression_gate(
    spark,
    files: Any,
    current_value: str,
    current_per_user: DataFrame,
    gates: Sequence[Gate],
    group_by: Sequence[str],
    user_col: str,
    *,
    key: str = RUN_DATE,
    point_estimate: bool = False,
    passed_only: bool = False,
) -> DropOutcome:
    """``--fail-if-drop``: tonight's per-user NDCG against the most recent earlier complete run's.

    Parameters
    ----------
    spark : SparkSession
    files : Files or runs
        Where the earlier runs are: the output's :class:`Files`, or a sink's runs
        (:class:`~ndcg_spark.job.history.DirectoryRuns`, :class:`~ndcg_spark.job.tables.TableRuns`).
    current_value : str
        Tonight's partition value (the run date).
    current_per_user : DataFrame
        Tonight's per-user figures (``EvaluationResult.per_user``; cache it, it is read again).
    gates : sequence of Gate
        The ``drop`` gates (:func:`~ndcg_spark.job.gates.parse_gates`).
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
    DropOutcome
        With no earlier run, no gate is checked and the message says so (the gate passes).
    """
    runs = runs_of(files)
    previous, skipped = runs.previous(current_value, key, passed_only=passed_only)
    # A run whose tables were deleted is skipped, and the line says so: never a dead end.
    which = "passing run" if passed_only else "complete run"
    if previous is None:
        outcome = DropOutcome(current_value, None, (), "", tuple(skipped))
    else:
        changes = paired_change(current_per_user, runs.per_user(spark, previous, key), group_by, user_col)
        checked = check(gates, changes, group_by, point_estimate=point_estimate)
        outcome = DropOutcome(current_value, previous, tuple(checked), "", tuple(skipped))
    return replace(outcome, message=drop_line(outcome, key, which, runs.shown))
