"""Two per-user tables already computed, paired by user: the change of NDCG between two runs
of one model (the job's regression gate) or between two models' written results.

The pairing and the sums run in Spark; one row per segment and k is collected, and the paired
t-test is computed from it as :mod:`ndcg_spark.compare` computes its own.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._comparison.statistics import with_t_test
from ndcg_spark._spark.sql import ident, join_null_safe
from ndcg_spark.errors import MISSING_COLUMN, InputDataError

__all__ = ["paired_difference"]


def paired_difference(
    current: DataFrame,
    previous: DataFrame,
    group_by: Sequence[str] = (),
    user_col: str = "user_id",
    metric: str = "ndcg",
) -> List[Dict[str, Any]]:
    """Per segment and k, the paired change of NDCG (or of another per-user figure, ``metric``)
    from ``previous`` to ``current`` over the users in both: two per-user tables (two runs of
    one model, two models) paired by user.

    The pairs are matched on the segment columns, the user and ``k``, a null matching a null
    (``k`` is null for the whole list). Unlike :func:`compare`, which evaluates both sides
    itself and applies the exclusion policies to each pair, this pairs figures already computed
    (``EvaluationResult.per_user``, or a ``per_user/`` table written earlier), and a user
    missing from either side, or without a value of ``metric`` on either side (a beyond-accuracy
    figure of a user without a list, an NDCG the policies leave out), is left out. The pairing and the sums run in Spark; one row per
    segment and k is collected, and the 95% interval of the mean difference and the paired
    t-test are computed from it as :meth:`ComparisonResult.report` computes them.

    Parameters
    ----------
    current, previous : DataFrame
        Per-user figures of the two sides: the segment columns, ``user_col``, ``k`` and ``ndcg``
        (other columns are ignored). The difference is ``current - previous``.
    group_by : sequence of str
        The segment columns (none by default).
    user_col : str
        The user column.
    metric : str
        The per-user column paired: ``ndcg`` (the default), or a per-user beyond-accuracy
        metric (``novelty``, ``diversity``...). The returned figures keep their names
        (``mean_previous``, ``mean_difference``...) whichever it is.

    Returns
    -------
    list of dict
        One per segment and k present in both (segments, then k ascending, the whole list
        last): the segment columns, ``k``, ``users_in_common``, ``mean_previous``,
        ``mean_current``, ``mean_difference``, ``std_difference``, ``difference_ci_low``,
        ``difference_ci_high``, ``t_statistic``, ``p_value`` (the last five None for fewer than
        two users in common).

    Raises
    ------
    InputDataError
        A table without one of the columns paired on, or without ``metric``.

    Examples
    --------
    >>> schema = "user_id int, k int, ndcg double"
    >>> before = spark.createDataFrame([(1, 5, 0.5), (2, 5, 0.25), (3, 5, 1.0)], schema)
    >>> after = spark.createDataFrame([(1, 5, 0.75), (2, 5, 0.75), (4, 5, 0.0)], schema)
    >>> row = paired_difference(after, before)[0]
    >>> row["k"], row["users_in_common"], row["mean_previous"], row["mean_current"], row["mean_difference"]
    (5, 2, 0.375, 0.75, 0.375)
    """
    keys = [*group_by, user_col, "k"]
    for name, table in (("current", current), ("previous", previous)):
        missing = [c for c in (*keys, metric) if c not in table.columns]
        if missing:
            raise InputDataError(
                f"the {name} per-user table has no column {missing[0]!r} (it has: {', '.join(table.columns)})",
                condition=MISSING_COLUMN,
                parameters={"table": f"{name} per-user", "column": missing[0]},
            )
    sides = [
        table.select(*[F.col(ident(c)) for c in keys], F.col(ident(metric)).alias(alias)).filter(
            F.col(alias).isNotNull()
        )
        for table, alias in ((current, "ndcg"), (previous, "__ndcg_previous"))
    ]
    # Null-safe: k is null for the whole list, and a segment value may be null.
    pairs = join_null_safe(sides[0], sides[1], keys, "inner")
    d = F.col("ndcg") - F.col("__ndcg_previous")
    summary = pairs.groupBy(*[F.col(ident(c)) for c in (*group_by, "k")]).agg(
        F.count(F.lit(1)).alias("users_in_common"),
        F.avg("__ndcg_previous").alias("mean_previous"),
        F.avg("ndcg").alias("mean_current"),
        F.avg(d).alias("mean_difference"),
        F.stddev_samp(d).alias("std_difference"),
    )
    order = [*group_by, "k"]
    # A handful of rows, sorted here: nulls last, as the summaries order them.
    rows = sorted((r.asDict() for r in summary.collect()), key=lambda r: [(r[c] is None, r[c]) for c in order])
    return [with_t_test(r, "users_in_common") for r in rows]
