"""Summary: who the policies leave out, the means and their intervals, and the row accounting.

Reads the scored rows (one per (list, k), segment columns of the user attributes joined; their
internal columns are the contract's, :mod:`ndcg_spark._stages.column_contract`) and adds ``EXCLUDED``, true
for a user the policies leave out of ``per_user`` and the means (such users are still counted).
"""

from __future__ import annotations

import math
from typing import List, Optional, Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from ndcg_spark._metrics.accuracy import COMPANIONS, CORE
from ndcg_spark._spark.sql import alias_of, ident, join_null_safe, normal_interval, string_literal, when_spread
from ndcg_spark._stages.column_contract import (
    EXCLUDED,
    HAS_ATTRIBUTES,
    HAS_JUDGEMENTS,
    JUDGED_REPEATS,
    JUDGED_ROWS,
    RANKED_REPEATS,
)
from ndcg_spark.errors import input_check
from ndcg_spark.options import EvaluationOptions


def excluded(n_recommended: str, n_relevant: str, opts: EvaluationOptions, has_judgements: str = "true") -> str:
    """SQL: the exclusion policies (``zero_idcg``, ``no_recommendations``, ``no_relevance``) for
    one user's counts; ``has_judgements`` is SQL, true when the user has relevance rows.

    The one statement of who is left out, for ``evaluate`` and ``compare`` alike.
    """
    conditions = ["false"]
    if opts.zero_idcg == "exclude":
        conditions.append(f"{n_relevant} = 0")
    if opts.no_recommendations == "exclude":
        conditions.append(f"{n_recommended} = 0")
    if opts.no_relevance == "exclude":
        conditions.append(f"NOT {has_judgements}")
    return "(" + " OR ".join(conditions) + ")"


def with_exclusions(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Add ``EXCLUDED`` from each row's counts."""
    rule = excluded("n_recommended", "n_relevant", opts, HAS_JUDGEMENTS)
    return df.selectExpr("*", f"{rule} AS {EXCLUDED}")


def summarize(scored: DataFrame, opts: EvaluationOptions, extra: Sequence[str] = ()) -> DataFrame:
    """Means over included users and policy counts over all users, one row per segment and k.

    ``extra``: more aggregates (SQL ``expression AS name``), their columns last: the
    beyond-accuracy means ride on this one pass over the per-user rows.
    """
    aggregates = summary_aggregates(scored.columns, opts)
    keys = [ident(c) for c in (*opts.group_by, "k")]
    summary = scored.groupBy(*[F.col(c) for c in keys]).agg(*[F.expr(a) for a in [*aggregates, *extra]])
    return finish_summary(summary, scored, opts, aggregates, extra)


def summary_aggregates(columns: Sequence[str], opts: EvaluationOptions, where: Optional[str] = None) -> List[str]:
    """The summary's aggregates (SQL ``expression AS name``) over the scored rows with ``columns``;
    with ``where`` (SQL), over the rows it holds for only (one k's, when the rows are not grouped by k)."""
    included = f"NOT {EXCLUDED}"

    def scoped(condition: str) -> str:
        return condition if where is None else f"{where} AND {condition}"

    def count_if(condition: str) -> str:
        return f"CAST(sum(CASE WHEN {scoped(condition)} THEN 1 ELSE 0 END) AS BIGINT)"

    def mean(name: str) -> str:
        return f"avg(CASE WHEN {scoped(included)} THEN {name} END)"

    def total(name: str) -> str:
        return f"CAST(sum({name if where is None else f'CASE WHEN {where} THEN {name} END'}) AS BIGINT)"

    companions = [f"{mean(m.name)} AS {m.summary}" for m in COMPANIONS] if opts.companion_metrics else []
    return [
        f"{count_if(included)} AS users",
        *[f"{mean(m.name)} AS {m.summary}" for m in CORE if m.summary],
        f"stddev_samp(CASE WHEN {scoped(included)} THEN ndcg END) AS std_ndcg",
        *companions,
        f"{count_if('n_relevant = 0')} AS users_zero_idcg",
        f"{count_if('n_recommended = 0')} AS users_without_recommendations",
        f"{count_if(f'NOT {HAS_JUDGEMENTS}')} AS users_without_relevance",
        *([f"{count_if(f'NOT {HAS_ATTRIBUTES}')} AS users_without_attributes"] if HAS_ATTRIBUTES in columns else []),
        f"{count_if(EXCLUDED)} AS users_excluded",
        f"{total(RANKED_REPEATS)} AS duplicate_recommendations",
        f"{total(JUDGED_REPEATS)} AS duplicate_relevance",
    ]


def finish_summary(
    summary: DataFrame, scored: DataFrame, opts: EvaluationOptions, aggregates: Sequence[str], extra: Sequence[str] = ()
) -> DataFrame:
    """The summary from its aggregates' frame (segment columns, ``k``, then each aggregate's
    column): the interval, the overflow check, the columns in order, the rows sorted in one
    partition. ``scored`` is read again only for the bootstrap interval."""
    keys = [ident(c) for c in (*opts.group_by, "k")]
    names = [alias_of(a) for a in aggregates]
    at = names.index("std_ndcg") + 1
    if opts.confidence_interval == "bootstrap":
        summary = join_null_safe(summary, bootstrap_interval(scored, opts), [*opts.group_by, "k"], "left")
        interval = [f"{when_spread('users', c)} AS {c}" for c in ("ndcg_ci_low", "ndcg_ci_high")]
    else:
        # NDCG lives in [0, 1]; the normal approximation does not know it.
        low, high = normal_interval("mean_ndcg", "std_ndcg", "users", clip=(0.0, 1.0))
        interval = [f"{low} AS ndcg_ci_low", f"{high} AS ndcg_ci_high"]
    columns = [*keys, *names[:at], *interval, *names[at:], *map(alias_of, extra)]
    # Each user's DCG is finite (the lists' sums are guarded), but a mean adds them up first.
    overflow = "isnan(mean_dcg) OR abs(mean_dcg) = CAST('Infinity' AS DOUBLE)"
    message = (
        f"concat({string_literal('relevance too large to add up: the mean DCG@')}, "
        "coalesce(CAST(k AS STRING), 'all'), ' overflows a double (the DCGs of its users add up past 1.8e308)')"
    )
    summary = summary.filter(input_check(overflow, message))
    ordered = [F.col(c).asc_nulls_last() for c in keys]
    # A handful of rows: one partition sorted in place, where orderBy would sample the input in a job of its own.
    return summary.selectExpr(*columns).coalesce(1).sortWithinPartitions(*ordered)


def bootstrap_interval(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """95% percentile interval of mean NDCG from a Poisson bootstrap computed inside Spark.

    Each (user, replicate) gets a Poisson(1) weight drawn from a hash of the user key, the
    replicate number and the seed, so the interval depends on the input only, not on
    partitioning or on the order of rows. The segment is not hashed: a segment's interval is
    the one a separate run of that segment gives, and two models' replicates draw the same
    users (common random numbers).
    """
    keys = [*opts.group_by, opts.user_col]
    replicate = F.explode(F.sequence(F.lit(0), F.lit(opts.bootstrap_samples - 1))).alias("__b")
    included = scored.filter(~F.col(EXCLUDED)).select(*[F.col(ident(c)) for c in keys], "k", "ndcg", replicate)
    hashed = F.xxhash64(F.col(ident(opts.user_col)), F.col("__b"), F.lit(opts.seed))
    uniform = F.shiftrightunsigned(hashed, 11).cast("double") / F.lit(float(2**53))
    weights = included.withColumn("__w", poisson_one(uniform))
    per_replicate = weights.groupBy(*[F.col(ident(c)) for c in opts.group_by], "k", "__b").agg(
        # A replicate can draw weight 0 for every user of a small group: no mean (null, which
        # percentile skips) rather than a division by zero.
        F.try_divide(F.sum(F.col("__w") * F.col("ndcg")), F.sum("__w")).alias("__mean")
    )
    return per_replicate.groupBy(*[F.col(ident(c)) for c in opts.group_by], "k").agg(
        F.percentile(F.col("__mean"), F.lit(0.025)).alias("ndcg_ci_low"),
        F.percentile(F.col("__mean"), F.lit(0.975)).alias("ndcg_ci_high"),
    )


def poisson_one(uniform: Column) -> Column:
    """Poisson(1) draw by inverting its CDF at ``uniform`` in [0, 1) (capped at 12: P < 1e-9)."""
    draw = F.lit(12)
    cdf = 0.0
    thresholds = []
    for n in range(12):
        cdf += math.exp(-1.0) / math.factorial(n)
        thresholds.append((n, cdf))
    for n, c in reversed(thresholds):
        draw = F.when(uniform < F.lit(c), F.lit(n)).otherwise(draw)
    return draw


def accounting_aggregates(opts: EvaluationOptions) -> Sequence[str]:
    """SQL aggregates (``expression AS name``) over every scored row of an evaluation without
    segments: :func:`accounting`'s sums, with the same names and values, as one aggregation (an
    ``Observation`` of a pass that reads the rows anyway)."""
    if opts.group_by:
        raise ValueError("with segments the accounting takes each user once: use accounting()")
    one_k = f"k <=> {int(opts.cutoffs[0])}" if opts.cutoffs[0] is not None else "k IS NULL"
    firsts = f"CAST(n_recommended - {RANKED_REPEATS} AS BIGINT)"
    judged = f"CAST({JUDGED_ROWS} - {JUDGED_REPEATS} AS BIGINT)"
    sums = {
        "recommendations_used": (f"NOT {EXCLUDED}", firsts),
        "recommendations_repeated": ("true", f"CAST({RANKED_REPEATS} AS BIGINT)"),
        "recommendations_excluded": (EXCLUDED, firsts),
        "recommendations_listed": ("true", "CAST(n_recommended AS BIGINT)"),
        "relevance_used": (f"NOT {EXCLUDED}", judged),
        "relevance_collapsed": ("true", f"CAST({JUDGED_REPEATS} AS BIGINT)"),
        "relevance_excluded": (EXCLUDED, judged),
        "users": ("true", "1L"),
        "users_excluded": ("true", f"CAST({EXCLUDED} AS BIGINT)"),
    }
    return [
        f"CAST(coalesce(sum(CASE WHEN {one_k} AND {when} THEN {value} END), 0) AS BIGINT) AS {name}"
        for name, (when, value) in sums.items()
    ]


def accounting(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row of sums over the lists that account for the input rows that reached the metric.

    ``recommendations_used``: first occurrences of included users' lists;
    ``recommendations_repeated``: repeats among the rows evaluated (slot kept, no gain);
    ``recommendations_excluded``: first occurrences of users left out by a policy;
    ``recommendations_listed``: the rows the lists hold up to the largest k (the three above
    together; the ranking's input less these are the rows beyond the largest k, see
    :meth:`ndcg_spark.EvaluationResult.row_accounting`). Likewise for relevance, where
    ``relevance_collapsed`` counts rows merged by ``duplicate_relevance = "max"``. With segments
    a user's judgements serve each of its segments but are counted once: used when any of its
    rows is kept, excluded when all are. ``users`` counts (segment, user) rows.
    """
    one_k = scored.filter(F.col("k").eqNullSafe(F.lit(opts.cutoffs[0])))
    is_excluded = F.col(EXCLUDED)
    firsts = F.col("n_recommended") - F.col(RANKED_REPEATS)
    user = F.col(ident(opts.user_col))

    def total(c: Column) -> Column:
        return F.coalesce(F.sum(c), F.lit(0)).cast("long")

    per_user = one_k.select(
        user,
        F.when(~is_excluded, firsts).cast("long").alias("used"),
        F.col(RANKED_REPEATS).cast("long").alias("repeated"),
        F.when(is_excluded, firsts).cast("long").alias("excluded"),
        (F.col(JUDGED_ROWS) - F.col(JUDGED_REPEATS)).cast("long").alias("judged"),
        F.col(JUDGED_REPEATS).cast("long").alias("collapsed"),
        F.col("n_recommended").cast("long").alias("listed"),
        F.lit(1).cast("long").alias("rows"),
        is_excluded.cast("long").alias("rows_excluded"),
        is_excluded.alias("all_excluded"),
    )
    if opts.group_by:
        # One row per user: its segments' recommendation figures add up, its judgements
        # (the same on each of its rows) are taken once.
        per_user = per_user.groupBy(user).agg(
            *[F.sum(c).alias(c) for c in ("used", "repeated", "excluded", "listed", "rows", "rows_excluded")],
            F.max("judged").alias("judged"),
            F.max("collapsed").alias("collapsed"),
            F.bool_and("all_excluded").alias("all_excluded"),
        )
    user_excluded = F.col("all_excluded")
    sums = per_user.agg(
        total(F.col("used")).alias("recommendations_used"),
        total(F.col("repeated")).alias("recommendations_repeated"),
        total(F.col("excluded")).alias("recommendations_excluded"),
        total(F.col("listed")).alias("recommendations_listed"),
        total(F.when(~user_excluded, F.col("judged"))).alias("relevance_used"),
        total(F.col("collapsed")).alias("relevance_collapsed"),
        total(F.when(user_excluded, F.col("judged"))).alias("relevance_excluded"),
        total(F.col("rows")).alias("users"),
        total(F.col("rows_excluded")).alias("users_excluded"),
    )
    return sums
