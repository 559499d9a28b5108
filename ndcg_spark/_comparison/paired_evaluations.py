"""The pairing of two models' evaluations, for :mod:`ndcg_spark.compare`: each user's figures
side by side (null-safely by segment, user and k), the per-segment and k summary of the pairs, and
:class:`ComparisonResult`, whose ``report()`` adds the paired t-tests.

Every sum runs in Spark; only the small per-(segment, k) summary is collected, to turn t
statistics into p-values.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Dict, List, Sequence, Tuple

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ndcg_spark._comparison.statistics import paired_t_test, with_t_test
from ndcg_spark._results.evaluation_result import EvaluationResult
from ndcg_spark._spark.sql import ident, join_null_safe
from ndcg_spark._stages.column_contract import EXCLUDED
from ndcg_spark._stages.summary import excluded
from ndcg_spark.errors import input_errors
from ndcg_spark.options import EvaluationOptions, beyond_per_user


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
    beyond : tuple of str
        The per-user beyond-accuracy metrics both sides computed, each paired as NDCG is: in
        ``per_user``, ``<name>_baseline``, ``<name>_candidate`` and ``<name>_difference``; in the
        summary, ``<name>_pairs`` (the users with a value on both sides, whatever the NDCG
        policies say), ``mean_<name>_baseline``, ``mean_<name>_candidate``,
        ``mean_<name>_difference`` and ``std_<name>_difference``.
    """

    per_user: DataFrame
    summary: DataFrame
    options: EvaluationOptions
    beyond: Tuple[str, ...] = ()

    def report(self) -> List[Dict[str, Any]]:
        """The summary rows as dicts, with the 95% interval of the mean difference, the t
        statistic and the two-sided p-value of the paired t-test; and for each paired
        beyond-accuracy metric its interval and p-value (``<name>_difference_ci_low``,
        ``<name>_difference_ci_high``, ``<name>_p_value``)."""
        with input_errors():
            collected = self.summary.collect()
        return [with_beyond_t_tests(with_t_test(row.asDict(), "pairs"), self.beyond) for row in collected]


def with_beyond_t_tests(record: Dict[str, Any], names: Sequence[str]) -> Dict[str, Any]:
    """A collected summary row with the paired t-test of each beyond-accuracy metric of ``names``
    (the test NDCG's difference gets, over that metric's own pairs)."""
    for name in names:
        test = paired_t_test(
            record[f"{name}_pairs"], record[f"mean_{name}_difference"], record[f"std_{name}_difference"]
        )
        record[f"{name}_difference_ci_low"] = test["difference_ci_low"]
        record[f"{name}_difference_ci_high"] = test["difference_ci_high"]
        record[f"{name}_p_value"] = test["p_value"]
    return record


def pair_evaluations(
    baseline: EvaluationResult, candidate: EvaluationResult, opts: EvaluationOptions
) -> ComparisonResult:
    """The comparison of two models' evaluations, from their figures for every user
    (:meth:`EvaluationResult.every_user <ndcg_spark.EvaluationResult.every_user>`)."""
    keys = [*opts.group_by, opts.user_col, "k"]
    beyond = tuple(n for n in baseline.beyond if n in beyond_per_user() and n in candidate.beyond)
    sides = []
    for name, result in (("baseline", baseline), ("candidate", candidate)):
        sides.append(
            result.every_user().select(
                *[F.col(ident(c)) for c in keys],
                F.col("ndcg").alias(f"ndcg_{name}"),
                F.col("n_recommended").alias(f"__n_recommended_{name}"),
                F.col("n_relevant").alias(f"__n_relevant_{name}"),
                F.col("has_relevance").alias(f"__judged_{name}"),
                F.lit(True).alias(f"__present_{name}"),
                *[F.col(n).alias(f"{n}_{name}") for n in beyond],
            )
        )
    # Null-safe: k is null for the whole list, and a segment value may be null.
    paired = join_null_safe(sides[0], sides[1], keys, "full")
    n_relevant = "coalesce(__n_relevant_baseline, __n_relevant_candidate)"
    judged = "coalesce(__judged_baseline, __judged_candidate)"
    # A side without the user is a side without recommendations for it.
    either_excluded = " OR ".join(
        excluded(f"coalesce(__n_recommended_{name}, 0)", n_relevant, opts, judged) for name in ("baseline", "candidate")
    )
    per_user = paired.select(
        *[F.col(ident(c)) for c in keys],
        F.coalesce(F.col("ndcg_baseline"), F.lit(0.0)).alias("ndcg_baseline"),
        F.coalesce(F.col("ndcg_candidate"), F.lit(0.0)).alias("ndcg_candidate"),
        F.expr(either_excluded).alias(EXCLUDED),
        F.col("__present_baseline").isNull().alias("__only_candidate"),
        F.col("__present_candidate").isNull().alias("__only_baseline"),
        *[F.col(f"{n}_{side}") for n in beyond for side in ("baseline", "candidate")],
    ).withColumn("difference", F.col("ndcg_candidate") - F.col("ndcg_baseline"))
    per_user = per_user.select(
        "*", *[(F.col(f"{n}_candidate") - F.col(f"{n}_baseline")).alias(f"{n}_difference") for n in beyond]
    )
    kept = ~F.col(EXCLUDED)
    ndcg_columns = ("ndcg_baseline", "ndcg_candidate", "difference")
    shown = [F.col(c) for c in ndcg_columns]
    if beyond:
        # A pair the NDCG policies leave out still pairs its beyond-accuracy figures: its row
        # stays, NDCG's columns null, as evaluate's per_user shows such a user.
        kept = functools.reduce(lambda a, b: a | b, [F.col(f"{n}_difference").isNotNull() for n in beyond], kept)
        shown = [F.when(~F.col(EXCLUDED), F.col(c)).alias(c) for c in ndcg_columns]
    return ComparisonResult(
        per_user=per_user.filter(kept).select(
            *[F.col(ident(c)) for c in keys],
            *shown,
            *[F.col(f"{n}_{part}") for n in beyond for part in ("baseline", "candidate", "difference")],
        ),
        summary=_summarize_pairs(per_user, opts, beyond),
        options=opts,
        beyond=beyond,
    )


def _summarize_pairs(per_user: DataFrame, opts: EvaluationOptions, beyond: Sequence[str] = ()) -> DataFrame:
    """Per segment and k: means, mean difference and its spread, wins / ties / losses, counts;
    and for each beyond-accuracy metric of ``beyond``, over the users with its value on both sides,
    their number, both means, the mean difference and its spread."""
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
            *[a for n in beyond for a in _beyond_pair_figures(n)],
        )
        .orderBy(*[F.col(ident(c)).asc_nulls_last() for c in (*opts.group_by, "k")])
    )


def _beyond_pair_figures(name: str) -> List[Column]:
    """Aggregates of one beyond-accuracy metric's pairs (rows with its difference)."""
    both = F.col(f"{name}_difference").isNotNull()
    return [
        F.sum(F.when(both, 1).otherwise(0)).cast("long").alias(f"{name}_pairs"),
        F.avg(F.when(both, F.col(f"{name}_baseline"))).alias(f"mean_{name}_baseline"),
        F.avg(F.when(both, F.col(f"{name}_candidate"))).alias(f"mean_{name}_candidate"),
        F.avg(f"{name}_difference").alias(f"mean_{name}_difference"),
        F.stddev_samp(f"{name}_difference").alias(f"std_{name}_difference"),
    ]
