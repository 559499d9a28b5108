"""Per-user CG, DCG, IDCG and NDCG@k, and their summary, as lazy DataFrames.

The plan, chosen so that the recommendations are shuffled once and only their top k:

1. Recommendations get a 1-based position per user from ``row_number()`` (score descending or
   rank ascending, then the item as the documented tie-break) and are cut at the largest k in a
   window of their own, which Spark turns into a per-partition top-k before the shuffle.
2. Each table is grouped per user into arrays: the ranked items, and the judged (item, relevance)
   pairs. The two are joined on the user key alone (full outer, so no user is lost).
3. Gains, discounts, and every cutoff come from higher-order array functions on those arrays:
   one ranked pass serves all k.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.window import Window

from ndcg_spark.errors import INPUT_ERROR_TAG, InputDataError
from ndcg_spark.functions import (
    array_size,
    discounted_gains,
    first_occurrence_only,
    gain,
    sum_first,
)
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.validation import check_key_types, check_schema, guard_rows, quote, split_rows

# Internal column names; the inputs are narrowed to the configured columns first, so these
# cannot collide with the caller's own columns (other than the user key, which keeps its name).
POSITION = "__ndcg_position"
ITEM = "__ndcg_item"
ORDER = "__ndcg_order"
REL = "__ndcg_relevance"
RANKED = "__ndcg_ranked"
ITEMS = "__ndcg_items"
JUDGED = "__ndcg_judged"
REL_MAP = "__ndcg_relevance_map"
IDEAL = "__ndcg_ideal"
GAINS = "__ndcg_gains"
DGAINS = "__ndcg_discounted_gains"
IDGAINS = "__ndcg_ideal_discounted_gains"
CUTOFFS = "__ndcg_cutoffs"
HAS_RECS = "__ndcg_has_recommendations"
HAS_JUDGED = "__ndcg_has_relevance_rows"
DUP_RECS = "__ndcg_duplicate_recommendations"
DUP_REL = "__ndcg_duplicate_relevance"
JUDGED_ROWS = "__ndcg_relevance_rows"
EXCLUDED = "__ndcg_excluded"

#: Columns of ``EvaluationResult.per_user`` after the user column.
PER_USER_COLUMNS = ("k", "cg", "dcg", "idcg", "ndcg", "n_recommended", "n_relevant")

#: Columns of ``EvaluationResult.summary``.
SUMMARY_COLUMNS = (
    "k",
    "users",
    "mean_ndcg",
    "mean_dcg",
    "std_ndcg",
    "users_zero_idcg",
    "users_without_recommendations",
    "users_without_relevance",
    "users_excluded",
    "duplicate_recommendations",
    "duplicate_relevance",
)

_INTEGRAL = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)


@dataclass(frozen=True)
class EvaluationResult:
    """The outcome of :func:`evaluate`: lazy DataFrames, computed when an action runs.

    Attributes
    ----------
    scored : DataFrame
        One row per (user, k) for every user, excluded ones included, with the policy flags.
        ``per_user`` and ``summary`` are both derived from it.
    options : EvaluationOptions
        The options the figures were computed with.
    """

    scored: DataFrame
    options: EvaluationOptions
    rejected: Optional[Dict[str, DataFrame]] = None

    @property
    def per_user(self) -> DataFrame:
        """Long form: user, ``k`` (null for the whole list), cg, dcg, idcg, ndcg, n_recommended, n_relevant."""
        return self.scored.filter(~F.col(EXCLUDED)).select(self.options.user_col, *PER_USER_COLUMNS)

    @property
    def summary(self) -> DataFrame:
        """One row per k, ascending (the whole-list cutoff last), with means and policy counts."""
        return summarize(self.scored)

    @property
    def accounting(self) -> DataFrame:
        """One row of per-user sums that account for the input rows that reached the metric.

        ``recommendations_evaluated``: rows within the largest k; ``recommendations_repeated``:
        repeats among them (slot kept, no gain); ``recommendations_excluded``: first occurrences
        of users left out by a policy; ``recommendations_used`` the rest. Likewise for relevance,
        where ``relevance_collapsed`` counts rows merged by ``duplicate_relevance = "max"``.
        """
        one_k = self.scored.filter(F.col("k").eqNullSafe(F.lit(self.options.cutoffs[0])))
        excluded = F.col(EXCLUDED)
        firsts = F.col("n_recommended") - F.col(DUP_RECS)
        judged = F.col(JUDGED_ROWS) - F.col(DUP_REL)

        def total(c: Column) -> Column:
            return F.coalesce(F.sum(c), F.lit(0)).cast("long")

        return one_k.agg(
            total(F.col("n_recommended")).alias("recommendations_evaluated"),
            total(F.when(~excluded, firsts)).alias("recommendations_used"),
            total(F.col(DUP_RECS)).alias("recommendations_repeated"),
            total(F.when(excluded, firsts)).alias("recommendations_excluded"),
            total(F.when(~excluded, judged)).alias("relevance_used"),
            total(F.col(DUP_REL)).alias("relevance_collapsed"),
            total(F.when(excluded, judged)).alias("relevance_excluded"),
            F.count(F.lit(1)).alias("users"),
            total(F.when(excluded, 1)).alias("users_excluded"),
        )

    def persist(self) -> "EvaluationResult":
        """Cache the per-user figures so ``per_user`` and ``summary`` share one computation."""
        return replace(self, scored=self.scored.persist())

    def unpersist(self) -> None:
        self.scored.unpersist()


def evaluate(recommendations: DataFrame, relevance: DataFrame, **options: Any) -> EvaluationResult:
    """Per-user and mean NDCG@k of ranked recommendations against graded relevance.

    Parameters
    ----------
    recommendations : DataFrame
        One row per recommended (user, item) with a score (higher is better) or a rank column.
    relevance : DataFrame
        Ground truth: one row per judged (user, item) with a numeric relevance.
    **options
        Any field of :class:`ndcg_spark.options.EvaluationOptions`, e.g. ``k=[5, 10]``,
        ``gain="exponential"``, ``user_col="query"``. Unknown names raise ``ConfigError``.

    Returns
    -------
    EvaluationResult
        With lazy ``per_user`` and ``summary`` DataFrames.

    Examples
    --------
    >>> recs = spark.createDataFrame([(1, "A", 0.9), (1, "B", 0.8)], "user_id int, item_id string, score double")
    >>> rel = spark.createDataFrame([(1, "B", 1.0)], "user_id int, item_id string, relevance double")
    >>> round(evaluate(recs, rel, k=[2]).summary.first().mean_ndcg, 4)
    0.6309
    """
    opts = EvaluationOptions.from_mapping(options)
    check_schema(recommendations, "recommendations", opts)
    check_schema(relevance, "relevance", opts)
    check_key_types(recommendations, relevance, opts)
    rejected = None
    if opts.on_invalid_rows == "quarantine":
        recommendations, rejected_recs = split_rows(recommendations, "recommendations", opts)
        relevance, rejected_rel = split_rows(relevance, "relevance", opts)
        rejected = {"recommendations": rejected_recs, "relevance": rejected_rel}
    else:
        recommendations = guard_rows(recommendations, "recommendations", opts)
        relevance = guard_rows(relevance, "relevance", opts)
    recs = select_recommendations(recommendations, opts)
    rel = select_relevance(relevance, opts, item_type=recs.schema[ITEM].dataType)
    ranked = recs.transform(with_position, opts).transform(filter_top_k, opts.largest_k)
    per_user = (
        ranked.transform(recommendation_lists, opts)
        .join(rel.transform(relevance_lists, opts), on=opts.user_col, how="full")
        .transform(with_gains, opts)
        .transform(with_cutoffs, opts)
        .transform(with_exclusions, opts)
    )
    return EvaluationResult(scored=per_user, options=opts, rejected=rejected)


def select_recommendations(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Narrow the recommendations to user, item and the ordering key (smaller ranks first)."""
    if opts.rank_col:
        order = F.col(quote(opts.rank_col)).cast("double")
    else:
        order = -F.col(quote(opts.score_col)).cast("double")
    return df.select(
        F.col(quote(opts.user_col)).alias(opts.user_col),
        F.col(quote(opts.item_col)).alias(ITEM),
        order.alias(ORDER),
    )


def select_relevance(df: DataFrame, opts: EvaluationOptions, item_type: T.DataType) -> DataFrame:
    """Narrow the ground truth to user, item and relevance (as double), item typed as in the recommendations."""
    item = F.col(quote(opts.item_col))
    rel_item_type = df.schema[opts.item_col].dataType if opts.item_col in df.columns else None
    if rel_item_type is not None and rel_item_type != item_type:
        both_integral = isinstance(rel_item_type, _INTEGRAL) and isinstance(item_type, _INTEGRAL)
        if not both_integral:
            raise InputDataError(
                f"item column {opts.item_col!r} is {item_type.simpleString()} in the recommendations "
                f"but {rel_item_type.simpleString()} in the relevance table; store both with one type"
            )
        item = item.cast(item_type)
    relevance = F.col(quote(opts.relevance_col)).cast("double")
    if opts.negative_relevance == "clip":
        relevance = F.greatest(relevance, F.lit(0.0))
    return df.select(
        F.col(quote(opts.user_col)).alias(opts.user_col),
        item.alias(ITEM),
        relevance.alias(REL),
    )


def with_position(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Add each recommendation's 1-based position in its user's list.

    Order: the ordering key ascending (score descending, or rank ascending), then the item
    (ascending by default, descending with ``tie_break="item_descending"``, as trec_eval). The
    window holds ``row_number()`` alone so that a following ``filter_top_k`` becomes Spark's
    per-partition WindowGroupLimit.
    """
    item_order = F.col(ITEM).asc() if opts.tie_break == "item_ascending" else F.col(ITEM).desc()
    window = Window.partitionBy(opts.user_col).orderBy(F.col(ORDER).asc_nulls_last(), item_order)
    return df.withColumn(POSITION, F.row_number().over(window))


def filter_top_k(df: DataFrame, k: Optional[int]) -> DataFrame:
    """Keep positions 1..k (everything when ``k`` is None)."""
    return df if k is None else df.filter(F.col(POSITION) <= F.lit(k))


def recommendation_lists(ranked: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: the recommended items in position order, and how many repeat."""
    # collect_list order is not defined after a shuffle: sort by position explicitly.
    fields = [F.col(POSITION), F.col(ITEM)] + ([F.col(ORDER)] if opts.rank_col else [])
    in_order = F.array_sort(F.collect_list(F.struct(*fields)))
    items = F.transform(F.col(RANKED), lambda x: x[ITEM])
    if opts.rank_col and opts.on_invalid_rows == "error":
        ranks = F.transform(F.col(RANKED), lambda x: x[ORDER])
        message = F.concat(
            F.lit(
                f"{INPUT_ERROR_TAG}: recommendations column {opts.rank_col!r} has two items at the same rank "
                f"for one user, e.g. {opts.user_col}="
            ),
            F.col(opts.user_col).cast("string"),
        )
        items = F.when(F.size(F.array_distinct(ranks)) < F.size(ranks), F.raise_error(message)).otherwise(items)
    return (
        ranked.groupBy(opts.user_col)
        .agg(in_order.alias(RANKED))
        .select(opts.user_col, items.alias(ITEMS))
        .withColumn(DUP_RECS, F.size(F.col(ITEMS)) - F.size(F.array_distinct(F.col(ITEMS))))
    )


def relevance_lists(rel: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: item -> relevance map, relevance sorted descending (the ideal list), counts."""
    judged = F.col(JUDGED)
    judged_items = F.transform(judged, lambda x: x[ITEM])
    n_repeats = F.size(judged) - F.size(F.array_distinct(judged_items))
    if opts.duplicate_relevance == "max":
        # Sorted by item, then relevance descending: the first entry of each item is its maximum.
        by_item = F.array_sort(
            F.transform(judged, lambda x: F.struct(x[ITEM].alias(ITEM), (-x[REL]).alias("neg"))),
        )
        unique = F.filter(by_item, lambda x, i: (i == 0) | (by_item[i - 1][ITEM] != x[ITEM]))
        resolved = F.transform(unique, lambda x: F.struct(x[ITEM].alias(ITEM), (-x["neg"]).alias(REL)))
    else:
        message = F.concat(
            F.lit(
                f"{INPUT_ERROR_TAG}: relevance table has more than one row for a ({opts.user_col}, "
                f"{opts.item_col}) pair, e.g. {opts.user_col}="
            ),
            F.col(opts.user_col).cast("string"),
            F.lit("; set duplicate_relevance = \"max\" to keep the largest relevance"),
        )
        resolved = F.when(n_repeats > 0, F.raise_error(message)).otherwise(judged)
    resolved_col = F.col("__ndcg_resolved")
    return (
        rel.groupBy(opts.user_col)
        .agg(F.collect_list(F.struct(F.col(ITEM), F.col(REL))).alias(JUDGED))
        .select(
            opts.user_col,
            resolved.alias("__ndcg_resolved"),
            n_repeats.alias(DUP_REL),
            F.size(judged).alias(JUDGED_ROWS),
        )
        .select(
            opts.user_col,
            F.map_from_entries(resolved_col).alias(REL_MAP),
            _top(F.sort_array(F.transform(resolved_col, lambda x: x[REL]), asc=False), opts).alias(IDEAL),
            F.size(F.filter(resolved_col, lambda x: x[REL] > 0)).alias("n_relevant"),
            F.lit(True).alias(HAS_JUDGED),
            DUP_REL,
            JUDGED_ROWS,
        )
    )


def with_gains(joined: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Add per-position gains of the recommended list and discounted gains of both lists."""
    items = F.col(ITEMS)
    rel_of = F.transform(items, lambda item: F.coalesce(F.try_element_at(F.col(REL_MAP), item), F.lit(0.0)))
    gains = first_occurrence_only(F.transform(rel_of, lambda r: gain(r, opts.gain)), items)
    ideal_gains = F.transform(F.col(IDEAL), lambda r: gain(r, opts.gain))
    return joined.select(
        opts.user_col,
        array_size(items).alias("n_recommended"),
        F.coalesce(F.col("n_relevant"), F.lit(0)).alias("n_relevant"),
        F.col(HAS_JUDGED).isNotNull().alias(HAS_JUDGED),
        F.coalesce(F.col(DUP_RECS), F.lit(0)).alias(DUP_RECS),
        F.coalesce(F.col(DUP_REL), F.lit(0)).alias(DUP_REL),
        F.coalesce(F.col(JUDGED_ROWS), F.lit(0)).alias(JUDGED_ROWS),
        gains.alias(GAINS),
        discounted_gains(gains).alias(DGAINS),
        discounted_gains(ideal_gains).alias(IDGAINS),
    )


def with_cutoffs(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per (user, k) with cg, dcg, idcg and ndcg; the gain arrays are dropped."""
    n = F.col("n_recommended")
    rows = []
    for k in opts.cutoffs:
        cut = n if k is None else F.lit(k)
        ideal_cut = F.least(cut, n) if opts.cap_ideal_at_list_length else cut
        dcg = sum_first(F.col(DGAINS), cut)
        idcg = sum_first(F.col(IDGAINS), ideal_cut)
        rows.append(
            F.struct(
                F.lit(k).cast("int").alias("k"),
                sum_first(F.col(GAINS), cut).alias("cg"),
                dcg.alias("dcg"),
                idcg.alias("idcg"),
            )
        )
    keep = [c for c in df.columns if c not in (GAINS, DGAINS, IDGAINS)]
    exploded = df.select(*keep, F.inline(F.array(*rows)))
    ndcg = F.when(F.col("idcg") > 0, F.col("dcg") / F.col("idcg")).otherwise(F.lit(0.0))
    return exploded.withColumn("ndcg", ndcg)


def with_exclusions(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Flag the users the policies leave out of ``per_user`` and the means (they stay counted)."""
    excluded = F.lit(False)
    if opts.zero_idcg == "exclude":
        excluded = excluded | (F.col("n_relevant") == 0)
    if opts.no_recommendations == "exclude":
        excluded = excluded | (F.col("n_recommended") == 0)
    return df.withColumn(EXCLUDED, excluded)


def summarize(scored: DataFrame) -> DataFrame:
    """Means over included users and policy counts over all users, one row per k."""
    included = ~F.col(EXCLUDED)

    def count_if(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    return (
        scored.groupBy("k")
        .agg(
            count_if(included).alias("users"),
            F.avg(F.when(included, F.col("ndcg"))).alias("mean_ndcg"),
            F.avg(F.when(included, F.col("dcg"))).alias("mean_dcg"),
            F.stddev_samp(F.when(included, F.col("ndcg"))).alias("std_ndcg"),
            count_if(F.col("n_relevant") == 0).alias("users_zero_idcg"),
            count_if(F.col("n_recommended") == 0).alias("users_without_recommendations"),
            count_if(~F.col(HAS_JUDGED)).alias("users_without_relevance"),
            count_if(F.col(EXCLUDED)).alias("users_excluded"),
            F.sum(DUP_RECS).cast("long").alias("duplicate_recommendations"),
            F.sum(DUP_REL).cast("long").alias("duplicate_relevance"),
        )
        .orderBy(F.col("k").asc_nulls_last())
    )


def _top(values: Column, opts: EvaluationOptions) -> Column:
    """The first ``largest_k`` values (all of them when a whole-list cutoff is asked for)."""
    k = opts.largest_k
    return values if k is None else F.slice(values, 1, k)
