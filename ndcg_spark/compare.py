"""Paired comparison of two models against one relevance table.

Per user and k the two NDCG values are paired (``candidate - baseline``); per segment and k the
summary reports both means, the mean paired difference with its 95% interval, a paired t-test
p-value and wins / ties / losses. The per-user pairing and every sum run in Spark; only the
small per-(segment, k) summary is collected to turn t statistics into p-values.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ndcg_spark._sql import ident
from ndcg_spark._stats import paired_t_test
from ndcg_spark._summary import EXCLUDED, excluded, join_null_safe
from ndcg_spark.evaluation import evaluate
from ndcg_spark.options import EvaluationOptions, resolve


@dataclass(frozen=True)
class ComparisonResult:
    """The outcome of :func:`compare`: lazy paired figures and their summary.

    Attributes
    ----------
    per_user : DataFrame
        Segments, user, ``k``, ``ndcg_baseline``, ``ndcg_candidate`` and ``difference``
        (candidate - baseline), for the pairs the policies keep.
    summary : DataFrame
        Per segment and k: ``pairs``, both means, ``mean_difference``, ``std_difference``,
        wins / ties / losses, ``users_only_in_baseline``, ``users_only_in_candidate``,
        ``users_excluded``.
    options : EvaluationOptions
        The options both sides were evaluated with.
    """

    per_user: DataFrame
    summary: DataFrame
    options: EvaluationOptions

    def report(self) -> List[Dict[str, Any]]:
        """The summary rows as dicts, with the 95% interval of the mean difference, the t
        statistic and the two-sided p-value of the paired t-test."""
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
    options: Optional[EvaluationOptions] = None,
    *,
    user_attributes: Optional[DataFrame] = None,
    **option_values: Any,
) -> ComparisonResult:
    """Compare the NDCG of two recommendation tables, user by user.

    A user scored for only one model is, on the other side, a user without recommendations,
    so the exclusion policies (``no_recommendations``, ``zero_idcg``) decide whether the pair
    counts, as they do in :func:`ndcg_spark.evaluate`; the summary counts such users in
    ``users_only_in_baseline`` and ``users_only_in_candidate``.

    Parameters
    ----------
    baseline, candidate : DataFrame
        The two models' recommendations, each as :func:`ndcg_spark.evaluate` takes them.
    relevance : DataFrame
        The ground truth both are judged against.
    options : EvaluationOptions, optional
        Applied to both sides; the defaults when omitted.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by``.
    **option_values
        Fields of :class:`~ndcg_spark.EvaluationOptions` to set (over ``options``).

    Returns
    -------
    ComparisonResult
        ``per_user``, ``summary`` and ``report()`` (the summary with p-values).

    Raises
    ------
    ConfigError, InputDataError
        As :func:`ndcg_spark.evaluate`.

    Examples
    --------
    >>> schema = "user_id int, item_id string, score double"
    >>> a = spark.createDataFrame([(1, "x", 0.9), (1, "y", 0.8), (2, "z", 0.9)], schema)
    >>> b = spark.createDataFrame([(1, "y", 0.9), (1, "x", 0.8), (2, "z", 0.9)], schema)
    >>> rel = spark.createDataFrame([(1, "y", 1.0), (2, "z", 1.0)], "user_id int, item_id string, relevance double")
    >>> row = compare(a, b, rel, k=[2]).report()[0]
    >>> row["pairs"], row["wins"], row["ties"], round(row["mean_difference"], 4)
    (2, 1, 1, 0.1845)
    """
    opts = resolve(options, option_values)
    keys = [*opts.group_by, opts.user_col, "k"]
    sides = []
    for name, recs in (("baseline", baseline), ("candidate", candidate)):
        scored = evaluate(recs, relevance, opts, user_attributes=user_attributes).scored
        sides.append(
            scored.select(
                *[F.col(ident(c)) for c in keys],
                F.col("ndcg").alias(f"ndcg_{name}"),
                F.col("n_recommended").alias(f"__n_recommended_{name}"),
                F.col("n_relevant").alias(f"__n_relevant_{name}"),
                F.lit(True).alias(f"__present_{name}"),
            )
        )
    # Null-safe: k is null for the whole list, and a segment value may be null.
    paired = join_null_safe(sides[0], sides[1], keys, "full")
    n_relevant = "coalesce(__n_relevant_baseline, __n_relevant_candidate)"
    # A side without the user is a side without recommendations for it.
    either_excluded = " OR ".join(
        excluded(f"coalesce(__n_recommended_{name}, 0)", n_relevant, opts) for name in ("baseline", "candidate")
    )
    per_user = paired.select(
        *[F.col(ident(c)) for c in keys],
        F.coalesce(F.col("ndcg_baseline"), F.lit(0.0)).alias("ndcg_baseline"),
        F.coalesce(F.col("ndcg_candidate"), F.lit(0.0)).alias("ndcg_candidate"),
        F.expr(either_excluded).alias(EXCLUDED),
        F.col("__present_baseline").isNull().alias("__only_candidate"),
        F.col("__present_candidate").isNull().alias("__only_baseline"),
    ).withColumn("difference", F.col("ndcg_candidate") - F.col("ndcg_baseline"))
    return ComparisonResult(
        per_user=per_user.filter(~F.col(EXCLUDED)).select(
            *[F.col(ident(c)) for c in keys], "ndcg_baseline", "ndcg_candidate", "difference"
        ),
        summary=_summarize_pairs(per_user, opts),
        options=opts,
    )


def _summarize_pairs(per_user: DataFrame, opts: EvaluationOptions) -> DataFrame:
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
