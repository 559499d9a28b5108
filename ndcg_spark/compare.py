"""Paired comparison of two models against one relevance table.

Per user and k the two NDCG values are paired (``candidate - baseline``); per segment and k the
summary reports both means, the mean paired difference with its 95% interval, a paired t-test
p-value and wins / ties / losses. The per-user pairing and every sum run in Spark; only the
small per-(segment, k) summary is collected to turn t statistics into p-values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ndcg_spark.core import EXCLUDED, evaluate, join_null_safe
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.functions import ident


@dataclass(frozen=True)
class ComparisonResult:
    """Lazy paired per-user figures and their summary; :meth:`report` adds p-values."""

    per_user: DataFrame
    summary: DataFrame
    options: EvaluationOptions

    def report(self) -> List[Dict[str, Any]]:
        """The summary rows with the 95% interval of the mean difference and the p-value."""
        rows = []
        for row in self.summary.collect():
            record = row.asDict()
            record.update(paired_t_test(record["pairs"], record["mean_difference"], record["std_difference"]))
            rows.append(record)
        return rows


def compare(
    baseline: DataFrame,
    candidate: DataFrame,
    relevance: DataFrame,
    *,
    user_attributes: Optional[DataFrame] = None,
    **options: Any,
) -> ComparisonResult:
    """Compare the NDCG of two recommendation tables, user by user.

    A user scored for only one model (no recommendations and no relevance rows in the other)
    is treated on the other side as a user without recommendations, so the core policies
    (``no_recommendations``, ``zero_idcg``) decide whether the pair counts; the summary counts
    such users in ``users_only_in_baseline`` and ``users_only_in_candidate``.

    Parameters
    ----------
    baseline, candidate : DataFrame
        The two models' recommendations, each as :func:`ndcg_spark.evaluate` takes them.
    relevance : DataFrame
        The ground truth both are judged against.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by``.
    **options
        Any field of :class:`ndcg_spark.options.EvaluationOptions`, applied to both sides.

    Returns
    -------
    ComparisonResult
        ``per_user`` (segments, user, k, both NDCGs and their difference), ``summary`` (per
        segment and k: means, mean difference with its 95% interval, paired t-test p-value,
        wins / ties / losses, one-sided users) and ``report()`` (the summary as dicts).

    Examples
    --------
    >>> result = compare(production_recs, candidate_recs, relevance, k=[10])  # doctest: +SKIP
    >>> result.report()[0]["p_value"]  # doctest: +SKIP
    """
    opts = EvaluationOptions.from_mapping(options)
    keys = [*opts.group_by, opts.user_col, "k"]
    sides = []
    for name, recs in (("baseline", baseline), ("candidate", candidate)):
        scored = evaluate(recs, relevance, user_attributes=user_attributes, **options).scored
        sides.append(
            scored.select(
                *[F.col(ident(c)) for c in keys],
                F.col("ndcg").alias(f"ndcg_{name}"),
                F.col(EXCLUDED).alias(f"__excluded_{name}"),
                F.col("n_relevant").alias(f"__n_relevant_{name}"),
                F.lit(True).alias(f"__present_{name}"),
            )
        )
    # Null-safe: k is null for the whole list, and a segment value may be null.
    paired = join_null_safe(sides[0], sides[1], keys, "full")
    n_relevant = F.coalesce(F.col("__n_relevant_baseline"), F.col("__n_relevant_candidate"))
    excluded = F.coalesce(F.col("__excluded_baseline"), F.lit(False)) | F.coalesce(
        F.col("__excluded_candidate"), F.lit(False)
    )
    missing = F.col("__present_baseline").isNull() | F.col("__present_candidate").isNull()
    if opts.no_recommendations == "exclude":
        excluded = excluded | missing
    if opts.zero_idcg == "exclude":
        excluded = excluded | (n_relevant == 0)
    per_user = paired.select(
        *[F.col(ident(c)) for c in keys],
        F.coalesce(F.col("ndcg_baseline"), F.lit(0.0)).alias("ndcg_baseline"),
        F.coalesce(F.col("ndcg_candidate"), F.lit(0.0)).alias("ndcg_candidate"),
        excluded.alias(EXCLUDED),
        F.col("__present_baseline").isNull().alias("__only_candidate"),
        F.col("__present_candidate").isNull().alias("__only_baseline"),
    ).withColumn("difference", F.col("ndcg_candidate") - F.col("ndcg_baseline"))
    return ComparisonResult(
        per_user=per_user.filter(~F.col(EXCLUDED)).select(
            *[F.col(ident(c)) for c in keys], "ndcg_baseline", "ndcg_candidate", "difference"
        ),
        summary=summarize_pairs(per_user, opts),
        options=opts,
    )


def summarize_pairs(per_user: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Per segment and k: means, mean difference and its spread, wins / ties / losses, counts."""
    included = ~F.col(EXCLUDED)

    def count_if(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    d = F.when(included, F.col("difference"))
    keys = [F.col(ident(c)) for c in (*opts.group_by, "k")]
    return (
        per_user.groupBy(*keys)
        .agg(
            count_if(included).alias("pairs"),
            F.avg(F.when(included, F.col("ndcg_baseline"))).alias("mean_ndcg_baseline"),
            F.avg(F.when(included, F.col("ndcg_candidate"))).alias("mean_ndcg_candidate"),
            F.avg(d).alias("mean_difference"),
            F.stddev_samp(d).alias("std_difference"),
            count_if(included & (F.col("difference") > 0)).alias("wins"),
            count_if(included & (F.col("difference") == 0)).alias("ties"),
            count_if(included & (F.col("difference") < 0)).alias("losses"),
            count_if(F.col("__only_baseline")).alias("users_only_in_baseline"),
            count_if(F.col("__only_candidate")).alias("users_only_in_candidate"),
            count_if(F.col(EXCLUDED)).alias("users_excluded"),
        )
        .orderBy(*[F.col(ident(c)).asc_nulls_last() for c in (*opts.group_by, "k")])
    )


# ----------------------------------------------------------------------------- statistics


def paired_t_test(n: int, mean: Optional[float], std: Optional[float]) -> Dict[str, Optional[float]]:
    """Two-sided paired t-test and the 95% interval of the mean difference."""
    empty = {"difference_ci_low": None, "difference_ci_high": None, "t_statistic": None, "p_value": None}
    if n is None or n < 2 or mean is None or std is None or math.isnan(std):
        return empty
    df = n - 1
    se = std / math.sqrt(n)
    half = student_t_quantile(0.975, df) * se
    if se == 0.0:
        p = 1.0 if mean == 0.0 else 0.0
        t = None if mean == 0.0 else math.copysign(math.inf, mean)
    else:
        t = mean / se
        p = 2.0 * student_t_sf(abs(t), df)
    return {"difference_ci_low": mean - half, "difference_ci_high": mean + half, "t_statistic": t, "p_value": p}


def student_t_sf(t: float, df: int) -> float:
    """P(T > t) for t >= 0 under Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    return 0.5 * regularized_incomplete_beta(df / 2.0, 0.5, x)


def student_t_quantile(p: float, df: int) -> float:
    """The ``p`` quantile (p > 0.5) of Student's t, by bisection on the survival function."""
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if student_t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2.0


def regularized_incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b) by its continued fraction (modified Lentz), accurate to ~1e-15."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - regularized_incomplete_beta(b, a, 1.0 - x)
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    f = d
    for m in range(1, 500):
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            f *= c * d
        if abs(c * d - 1.0) < 1e-16:
            break
    return math.exp(log_front) * f / a
