"""Per-user CG, DCG, IDCG and NDCG@k, and their summary, as lazy DataFrames.

The plan, chosen so that the recommendations are shuffled once and only their top k, and so
that the per-element work runs as generated code:

1. Recommendations get a 1-based position per user from ``row_number()`` (score descending or
   rank ascending, then the item as the documented tie-break) and are cut at the largest k in a
   window of their own, which Spark turns into a per-partition top-k before the shuffle.
2. Each table is grouped per user into arrays of primitives: the ranked items (with their
   positions, to check the order), and the judged items with their relevance. The two are
   joined on the user key alone (full outer, so no user is lost).
3. Each user's row is exploded into one row per position 1..n; the relevance lookup, gain,
   discount and every cutoff test are column expressions, and one aggregation per user sums all
   cutoffs at once (no higher-order function in the default mode).
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
    discount,
    first_occurrence_only,
    gain,
)
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.validation import (
    INTEGRAL_TYPES,
    check_key_types,
    check_schema,
    guard_rows,
    quote,
    split_rows,
)

# Internal column names; the inputs are narrowed to the configured columns first, so these
# cannot collide with the caller's own columns (other than the user key, which keeps its name).
POSITION = "__ndcg_position"
ITEM = "__ndcg_item"
ORDER = "__ndcg_order"
REL = "__ndcg_relevance"
RANKED = "__ndcg_ranked"
ITEMS = "__ndcg_items"
JUDGED = "__ndcg_judged"
JUDGED_ITEMS = "__ndcg_judged_items"
JUDGED_RELEVANCE = "__ndcg_judged_relevance"
IDEAL = "__ndcg_ideal"
GAINS = "__ndcg_gains"
HAS_JUDGED = "__ndcg_has_relevance_rows"
DUP_RECS = "__ndcg_duplicate_recommendations"
DUP_REL = "__ndcg_duplicate_relevance"
JUDGED_ROWS = "__ndcg_relevance_rows"
EXCLUDED = "__ndcg_excluded"
ORDERS = "__ndcg_orders"
HITS = "__ndcg_hit_positions"
N_REL_BINARY = "__ndcg_relevant_binary"
ARRAY_RANK = "__ndcg_array_rank"
TIE_RANK = "__ndcg_tie_rank"

#: Companion metrics (``companion_metrics=True``), in per_user and (as means) in summary.
COMPANION_COLUMNS = ("precision", "recall", "ap", "rr", "hit")

#: Columns of ``EvaluationResult.per_user`` after the user column.
PER_USER_COLUMNS = ("k", "cg", "dcg", "idcg", "ndcg", "n_recommended", "n_relevant")


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
        """Long form: segment columns, user, ``k`` (null for the whole list), cg, dcg, idcg, ndcg,
        n_recommended, n_relevant (and the companion metrics when asked for)."""
        extra = COMPANION_COLUMNS if self.options.companion_metrics else ()
        columns = [*self.options.group_by, self.options.user_col, *PER_USER_COLUMNS, *extra]
        return self.scored.filter(~F.col(EXCLUDED)).select(*[F.col(quote(c)) for c in columns])

    @property
    def summary(self) -> DataFrame:
        """One row per segment and k (k ascending, the whole-list cutoff last): means with their
        95% confidence interval, and policy counts."""
        return summarize(self.scored, self.options)

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


def evaluate(
    recommendations: DataFrame,
    relevance: DataFrame,
    *,
    user_attributes: Optional[DataFrame] = None,
    **options: Any,
) -> EvaluationResult:
    """Per-user and mean NDCG@k of ranked recommendations against graded relevance.

    Parameters
    ----------
    recommendations : DataFrame
        One row per recommended (user, item) with a score (higher is better) or a rank column.
    relevance : DataFrame
        Ground truth: one row per judged (user, item) with a numeric relevance.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by`` (joined on the user column).
    **options
        Any field of :class:`ndcg_spark.options.EvaluationOptions`, e.g. ``k=[5, 10]``,
        ``gain="exponential"``, ``user_col="query"``, ``group_by=["model"]``. Unknown names
        raise ``ConfigError``.

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
    recommendations, opts = recommendations_as_rows(recommendations, opts)
    check_segments(recommendations, user_attributes, opts)
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
        .transform(with_user_attributes, user_attributes, opts)
    )
    return EvaluationResult(scored=per_user, options=opts, rejected=rejected)


def recommendations_as_rows(df: DataFrame, opts: EvaluationOptions):
    """The 'array' layout (ALS ``recommendForAllUsers``: user, array<struct<item, score>>) as rows.

    With ``array_ranking = "order"`` the array position becomes the rank column.
    """
    if opts.recommendations_layout == "rows":
        return df, opts
    if opts.array_col not in df.columns:
        raise InputDataError(
            f"recommendations table has no column {opts.array_col!r} (it has: {', '.join(df.columns)})"
        )
    element = df.schema[opts.array_col].dataType
    if not isinstance(element, T.ArrayType) or not isinstance(element.elementType, T.StructType):
        raise InputDataError(
            f"recommendations column {opts.array_col!r} has type {element.simpleString()}; "
            "the 'array' layout needs array<struct<item, score>>"
        )
    fields = element.elementType.fieldNames()
    wanted = [opts.item_col] + ([opts.score_col] if opts.array_ranking == "score" else [])
    for name in wanted:
        if name not in fields:
            raise InputDataError(
                f"recommendations array {opts.array_col!r} has no field {name!r} (it has: {', '.join(fields)})"
            )
    keep = [F.col(quote(c)) for c in df.columns if c != opts.array_col]
    exploded = df.select(*keep, F.posexplode(F.col(quote(opts.array_col))).alias("__pos", "__rec"))
    values = [F.col("__rec")[f].alias(f) for f in wanted]
    if opts.array_ranking == "order":
        values.append((F.col("__pos") + 1).alias(ARRAY_RANK))
        opts = replace(opts, rank_col=ARRAY_RANK)
    return exploded.select(*keep, *values), replace(opts, recommendations_layout="rows")


def check_segments(recs: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> None:
    """Every group_by column must come from the recommendations or the user attributes."""
    available = set(recs.columns) | (set(attributes.columns) if attributes is not None else set())
    for name in opts.group_by:
        if name not in available:
            where = "the recommendations" + (" or the user attributes" if attributes is not None else "")
            raise InputDataError(f"group_by column {name!r} is not a column of {where}")
    if attributes is not None and opts.user_col not in attributes.columns:
        raise InputDataError(f"user attributes table has no column {opts.user_col!r}")


def _recommendation_segments(opts: EvaluationOptions, recs_columns) -> list:
    return [c for c in opts.group_by if c in recs_columns]


def select_recommendations(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Narrow the recommendations to user, item and the ordering key (smaller ranks first)."""
    if opts.rank_col:
        order = F.col(quote(opts.rank_col)).cast("double")
    else:
        order = -F.col(quote(opts.score_col)).cast("double")
    segments = [F.col(quote(c)).alias(c) for c in _recommendation_segments(opts, df.columns)]
    return df.select(
        *segments,
        F.col(quote(opts.user_col)).alias(opts.user_col),
        F.col(quote(opts.item_col)).alias(ITEM),
        order.alias(ORDER),
    )


def select_relevance(df: DataFrame, opts: EvaluationOptions, item_type: T.DataType) -> DataFrame:
    """Narrow the ground truth to user, item and relevance (as double), item typed as in the recommendations."""
    item = F.col(quote(opts.item_col))
    rel_item_type = df.schema[opts.item_col].dataType if opts.item_col in df.columns else None
    if rel_item_type is not None and rel_item_type != item_type:
        both_integral = isinstance(rel_item_type, INTEGRAL_TYPES) and isinstance(item_type, INTEGRAL_TYPES)
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
    keys = [*_recommendation_segments(opts, df.columns), opts.user_col]
    by_user = Window.partitionBy(*[F.col(quote(c)) for c in keys])
    ranked = df.withColumn(POSITION, F.row_number().over(by_user.orderBy(F.col(ORDER).asc_nulls_last(), item_order)))
    if opts.ties == "average":
        # rank() over the score alone keeps a whole tied group at the cutoff: its mean gain needs every member.
        ranked = ranked.withColumn(TIE_RANK, F.rank().over(by_user.orderBy(F.col(ORDER).asc_nulls_last())))
    return ranked


def filter_top_k(df: DataFrame, k: Optional[int]) -> DataFrame:
    """Keep positions 1..k (everything when ``k`` is None); with tie averaging, whole tied groups."""
    if k is None:
        return df
    by = TIE_RANK if TIE_RANK in df.columns else POSITION
    return df.filter(F.col(by) <= F.lit(k))


def recommendation_lists(ranked: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: the recommended items in position order, and how many repeat.

    The lists are collected as arrays of primitives (a list of structs costs about twice as
    much to aggregate). collect_list order is not defined after a shuffle, so the positions are
    collected alongside and checked against 1..n; only a list that arrives out of order pays
    for an explicit sort by position.
    """
    keep_order = bool(opts.rank_col) or opts.ties == "average"
    positions, items, orders = F.col("__ndcg_positions"), F.col("__ndcg_items_raw"), F.col("__ndcg_orders_raw")
    in_order = positions == F.sequence(F.lit(1), F.size(positions))
    collected = [F.collect_list(POSITION).alias("__ndcg_positions"), F.collect_list(ITEM).alias("__ndcg_items_raw")]
    if keep_order:
        collected.append(F.collect_list(ORDER).alias("__ndcg_orders_raw"))
    sorted_structs = F.sort_array(F.arrays_zip(positions, items, *([orders] if keep_order else [])))
    ordered_items = F.when(in_order, items).otherwise(sorted_structs.getField("__ndcg_items_raw"))
    ordered = [F.when(in_order, orders).otherwise(sorted_structs.getField("__ndcg_orders_raw")).alias(ORDERS)] if keep_order else []
    if opts.rank_col and opts.on_invalid_rows == "error":
        ranks = F.col(ORDERS)
        message = F.concat(
            F.lit(
                f"{INPUT_ERROR_TAG}: recommendations column {opts.rank_col!r} has two items at the same rank "
                f"for one user, e.g. {opts.user_col}="
            ),
            F.col(opts.user_col).cast("string"),
        )
        checked_items = F.when(F.size(F.array_distinct(ranks)) < F.size(ranks), F.raise_error(message)).otherwise(
            F.col(ITEMS)
        )
    else:
        checked_items = F.col(ITEMS)
    keys = [F.col(quote(c)) for c in (*_recommendation_segments(opts, ranked.columns), opts.user_col)]
    return (
        ranked.groupBy(*keys)
        .agg(*collected)
        .select(*keys, ordered_items.alias(ITEMS), *ordered)
        .select(*keys, checked_items.alias(ITEMS), *([F.col(ORDERS)] if keep_order else []))
        .withColumn(DUP_RECS, F.size(F.col(ITEMS)) - F.size(F.array_distinct(F.col(ITEMS))))
    )


def relevance_lists(rel: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: judged items and their relevance (parallel arrays), the ideal list, counts.

    With ``duplicate_relevance = "max"`` repeated (user, item) rows are first merged by an
    aggregation (their largest relevance); otherwise a repeat raises an input error.
    """
    items, rels = F.col("__ndcg_judged_items"), F.col("__ndcg_judged_relevance")
    if opts.duplicate_relevance == "max":
        rel = rel.groupBy(opts.user_col, ITEM).agg(F.max(REL).alias(REL), F.count(F.lit(1)).alias("__ndcg_rows"))
        rows = F.col("__ndcg_rows")
    else:
        rows = F.lit(1)
    per_user = rel.groupBy(opts.user_col).agg(
        F.collect_list(ITEM).alias("__ndcg_judged_items"),
        F.collect_list(REL).alias("__ndcg_judged_relevance"),
        F.sum(rows).cast("int").alias(JUDGED_ROWS),
        F.count(F.when(F.col(REL) > 0, F.lit(1))).cast("int").alias("n_relevant"),
        F.count(F.when(is_relevant(F.col(REL), opts), F.lit(1))).cast("int").alias(N_REL_BINARY),
    )
    if opts.duplicate_relevance == "max":
        n_repeats = F.col(JUDGED_ROWS) - F.size(items)
        checked_items = items
    else:
        n_repeats = F.size(items) - F.size(F.array_distinct(items))
        message = F.concat(
            F.lit(
                f"{INPUT_ERROR_TAG}: relevance table has more than one row for a ({opts.user_col}, "
                f"{opts.item_col}) pair, e.g. {opts.user_col}="
            ),
            F.col(opts.user_col).cast("string"),
            F.lit("; set duplicate_relevance = \"max\" to keep the largest relevance"),
        )
        checked_items = F.when(n_repeats > 0, F.raise_error(message)).otherwise(items)
    return per_user.select(
        opts.user_col,
        checked_items.alias(JUDGED_ITEMS),
        rels.alias(JUDGED_RELEVANCE),
        _top(F.sort_array(rels, asc=False), opts).alias(IDEAL),
        "n_relevant",
        N_REL_BINARY,
        F.lit(True).alias(HAS_JUDGED),
        n_repeats.cast("int").alias(DUP_REL),
        JUDGED_ROWS,
    )


def is_relevant(relevance: Column, opts: EvaluationOptions) -> Column:
    """Binary relevance of the companion metrics: >= threshold, or > 0 without one."""
    if opts.relevance_threshold is None:
        return relevance > F.lit(0.0)
    return relevance >= F.lit(opts.relevance_threshold)


def with_gains(joined: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Per user: the list length, policy counts, and the arrays the per-position rows come from.

    Only the optional modes compute gain arrays here, with higher-order functions (interpreted
    per element): tie averaging needs every gain of a tied group, and the companion metrics the
    positions of the hits. In the default mode the gains are computed per position in
    :func:`with_cutoffs`, as generated code.
    """
    items = F.col(ITEMS)
    n = array_size(items)
    if opts.ties == "average" and opts.largest_k is not None:
        # Tied rows past the largest k were kept for their gains only; they are not recommendations.
        n = F.least(n, F.lit(opts.largest_k))
    extra = []
    if opts.ties == "average":
        gains = first_occurrence_only(F.transform(items, lambda item: gain(relevance_of(item), opts.gain)), items)
        extra.append(F.coalesce(tie_averaged(gains, F.col(ORDERS)), F.array().cast("array<double>")).alias(GAINS))
    if opts.companion_metrics:
        hits = first_occurrence_only(
            F.transform(items, lambda item: is_relevant(relevance_of(item), opts).cast("double")), items
        )
        positions = F.transform(hits, lambda h, i: F.when(h > 0, i + F.lit(1)))
        extra += [
            F.filter(positions, lambda p: p.isNotNull()).alias(HITS),
            F.coalesce(F.col(N_REL_BINARY), F.lit(0)).alias(N_REL_BINARY),
        ]
    keys = [F.col(quote(c)) for c in (*_recommendation_segments(opts, joined.columns), opts.user_col)]
    return joined.select(
        *keys,
        n.alias("n_recommended"),
        F.coalesce(F.col("n_relevant"), F.lit(0)).alias("n_relevant"),
        F.col(HAS_JUDGED).isNotNull().alias(HAS_JUDGED),
        F.coalesce(F.col(DUP_RECS), F.lit(0)).alias(DUP_RECS),
        F.coalesce(F.col(DUP_REL), F.lit(0)).alias(DUP_REL),
        F.coalesce(F.col(JUDGED_ROWS), F.lit(0)).alias(JUDGED_ROWS),
        F.coalesce(items, F.array().cast(joined.schema[ITEMS].dataType)).alias(ITEMS),
        F.col(JUDGED_ITEMS),
        F.col(JUDGED_RELEVANCE),
        F.coalesce(F.col(IDEAL), F.array().cast("array<double>")).alias(IDEAL),
        *extra,
    )


def relevance_of(item: Column) -> Column:
    """The judged relevance of ``item`` for the row's user, 0.0 when it was not judged."""
    # array_position is 0 when the item was not judged (and null when the user has no judgements).
    at = F.array_position(F.col(JUDGED_ITEMS), item).cast("int")
    return F.when(at > 0, F.try_element_at(F.col(JUDGED_RELEVANCE), at)).otherwise(F.lit(0.0))


def tie_averaged(gains: Column, orders: Column) -> Column:
    """Each gain replaced by the mean gain of its tied group (equal ordering key).

    Summed with the positional discounts this is the expected DCG over all orderings of each
    tie (scikit-learn's ``ndcg_score`` default). Only lists that hold a tie pay the quadratic scan.
    """
    pairs = F.transform(orders, lambda o, i: F.struct(o.alias("o"), gains[i].alias("g")))

    def group_mean(i: Column) -> Column:
        same = F.filter(pairs, lambda p: p["o"] == orders[i])
        return F.aggregate(same, F.lit(0.0), lambda acc, p: acc + p["g"]) / F.size(same)

    averaged = F.transform(gains, lambda g, i: group_mean(i))
    has_tie = F.size(F.array_distinct(orders)) < F.size(orders)
    return F.when(has_tie, averaged).otherwise(gains)


def with_cutoffs(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per (user, k) with cg, dcg, idcg and ndcg; the arrays are dropped.

    Each user's list and ideal list are exploded into one row per position; every gain, discount
    and cutoff test is then a plain column expression (generated code, where a higher-order
    function over the arrays is interpreted per element), and one aggregation per user sums all
    cutoffs at once. The rows of a user stay in one task, so the sums run in position order and
    the figures are the same on every run.
    """
    n = F.col("n_recommended")
    position = F.col("__ndcg_position")
    item = F.try_element_at(F.col(ITEMS), position)
    if opts.ties == "average":
        slot_gain = F.try_element_at(F.col(GAINS), position)
    else:
        first = F.when(F.col(DUP_RECS) > 0, F.array_position(F.col(ITEMS), item) == position).otherwise(F.lit(True))
        slot_gain = F.when(first, gain(relevance_of(item), opts.gain)).otherwise(F.lit(0.0))
    ideal_relevance = F.try_element_at(F.col(IDEAL), position)
    # Positions 1 .. the longer of the two lists; a user with neither keeps one row (explode_outer).
    length = F.greatest(F.size(F.col(ITEMS)), F.size(F.col(IDEAL)))
    positions = F.when(length > 0, F.sequence(F.lit(1), length))
    arrays = (ITEMS, JUDGED_ITEMS, JUDGED_RELEVANCE, IDEAL, GAINS, HITS, N_REL_BINARY)
    keys = [c for c in df.columns if c not in arrays]
    if opts.companion_metrics:
        # Computed per user (higher-order functions on the hit positions), before the explode.
        companion_columns = []
        for j, k in enumerate(opts.cutoffs):
            cut = n if k is None else F.lit(k)
            for metric, name in zip(companion_metrics(F.col(HITS), F.col(N_REL_BINARY), cut), COMPANION_COLUMNS):
                companion_columns.append(metric.alias(f"__ndcg_{name}_{j}"))
        df = df.select(*[c for c in df.columns if c not in (HITS, N_REL_BINARY)], *companion_columns)
        keys = [c for c in df.columns if c not in arrays]
    carried = [c for c in (ITEMS, JUDGED_ITEMS, JUDGED_RELEVANCE, IDEAL, GAINS) if c in df.columns]
    rows = df.select(*keys, *carried, F.explode_outer(positions).alias("__ndcg_position"))
    discounted = discount(position)
    g = F.when(item.isNotNull(), slot_gain)
    # Gains in a projection of their own, so each is computed once per position, not once per cutoff.
    rows = rows.select(
        *keys,
        position.alias("__ndcg_position"),
        g.alias("__ndcg_g"),
        (g * discounted).alias("__ndcg_dg"),
        (gain(ideal_relevance, opts.gain) * discounted).alias("__ndcg_idg"),
    )
    position = F.col("__ndcg_position")
    sums = []
    for j, k in enumerate(opts.cutoffs):
        cut = n if k is None else F.lit(k)
        ideal_cut = F.least(cut, n) if opts.cap_ideal_at_list_length else cut
        within = position <= cut
        sums += [
            F.sum(F.when(within, F.col("__ndcg_g"))).alias(f"__ndcg_cg_{j}"),
            F.sum(F.when(within, F.col("__ndcg_dg"))).alias(f"__ndcg_dcg_{j}"),
            F.sum(F.when(position <= ideal_cut, F.col("__ndcg_idg"))).alias(f"__ndcg_idcg_{j}"),
        ]
    per_user = rows.groupBy(*[F.col(quote(c)) for c in keys]).agg(*sums)
    index = F.col("__ndcg_k_index") + F.lit(1)

    def pick(name: str) -> Column:
        return F.element_at(F.array(*[F.col(f"__ndcg_{name}_{j}") for j in range(len(opts.cutoffs))]), index)

    cutoffs = F.array(*[F.lit(k).cast("int") for k in opts.cutoffs])
    exploded = per_user.select("*", F.posexplode(cutoffs).alias("__ndcg_k_index", "k"))
    base = [c for c in keys if not c.startswith("__ndcg_") or c in (HAS_JUDGED, DUP_RECS, DUP_REL, JUDGED_ROWS)]
    dcg, idcg = F.coalesce(pick("dcg"), F.lit(0.0)), F.coalesce(pick("idcg"), F.lit(0.0))
    return exploded.select(
        *[F.col(quote(c)) for c in base],
        "k",
        F.coalesce(pick("cg"), F.lit(0.0)).alias("cg"),
        dcg.alias("dcg"),
        idcg.alias("idcg"),
        *[pick(name).alias(name) for name in (COMPANION_COLUMNS if opts.companion_metrics else ())],
        F.when(idcg > 0, dcg / idcg).otherwise(F.lit(0.0)).alias("ndcg"),
    )


def companion_metrics(hit_positions: Column, n_relevant: Column, cut: Column) -> list:
    """precision, recall, AP, RR and hit at cutoff ``cut`` from the 1-based positions of the hits.

    As trec_eval: precision divides by k even for a shorter list (P_k), recall and AP by the
    number of relevant judged items (recall_k, map_cut_k); RR is 1/rank of the first hit within k.
    """
    within = F.filter(hit_positions, lambda p: p <= cut)
    hits = F.size(within).cast("double")
    safe_r = F.when(n_relevant > 0, n_relevant.cast("double"))
    ap_terms = F.transform(within, lambda p, j: (j + F.lit(1)).cast("double") / p)
    ap_sum = F.aggregate(ap_terms, F.lit(0.0), lambda acc, x: acc + x)
    first = F.try_element_at(within, F.lit(1))
    return [
        F.coalesce(hits / F.when(cut > 0, cut.cast("double")), F.lit(0.0)).alias("precision"),
        F.coalesce(hits / safe_r, F.lit(0.0)).alias("recall"),
        F.coalesce(ap_sum / safe_r, F.lit(0.0)).alias("ap"),
        F.coalesce(F.lit(1.0) / first, F.lit(0.0)).alias("rr"),
        F.when(hits > 0, F.lit(1.0)).otherwise(F.lit(0.0)).alias("hit"),
    ]


def with_user_attributes(df: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> DataFrame:
    """Join the segment columns that live in the user attributes table (left join on user)."""
    if attributes is None:
        return df
    wanted = [c for c in opts.group_by if c in attributes.columns and c not in df.columns]
    if not wanted:
        return df
    attrs = attributes.select(F.col(quote(opts.user_col)).alias(opts.user_col), *[F.col(quote(c)).alias(c) for c in wanted])
    return df.join(attrs, on=opts.user_col, how="left")


def with_exclusions(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Flag the users the policies leave out of ``per_user`` and the means (they stay counted)."""
    excluded = F.lit(False)
    if opts.zero_idcg == "exclude":
        excluded = excluded | (F.col("n_relevant") == 0)
    if opts.no_recommendations == "exclude":
        excluded = excluded | (F.col("n_recommended") == 0)
    return df.withColumn(EXCLUDED, excluded)


def summarize(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Means over included users and policy counts over all users, one row per segment and k."""
    included = ~F.col(EXCLUDED)

    def count_if(cond: Column) -> Column:
        return F.sum(F.when(cond, 1).otherwise(0)).cast("long")

    def mean(name: str) -> Column:
        return F.avg(F.when(included, F.col(name)))

    companions = []
    if opts.companion_metrics:
        companions = [
            mean("precision").alias("mean_precision"),
            mean("recall").alias("mean_recall"),
            mean("ap").alias("mean_ap"),
            mean("rr").alias("mean_rr"),
            mean("hit").alias("hit_rate"),
        ]
    keys = [F.col(quote(c)) for c in (*opts.group_by, "k")]
    summary = scored.groupBy(*keys).agg(
        count_if(included).alias("users"),
        mean("ndcg").alias("mean_ndcg"),
        mean("dcg").alias("mean_dcg"),
        F.stddev_samp(F.when(included, F.col("ndcg"))).alias("std_ndcg"),
        *companions,
        count_if(F.col("n_relevant") == 0).alias("users_zero_idcg"),
        count_if(F.col("n_recommended") == 0).alias("users_without_recommendations"),
        count_if(~F.col(HAS_JUDGED)).alias("users_without_relevance"),
        count_if(F.col(EXCLUDED)).alias("users_excluded"),
        F.sum(DUP_RECS).cast("long").alias("duplicate_recommendations"),
        F.sum(DUP_REL).cast("long").alias("duplicate_relevance"),
    )
    if opts.confidence_interval == "bootstrap":
        summary = summary.join(bootstrap_interval(scored, opts), on=[*opts.group_by, "k"], how="left")
    else:
        half = F.lit(1.959963984540054) * F.col("std_ndcg") / F.sqrt(F.col("users").cast("double"))
        # NDCG lives in [0, 1]; the normal approximation does not know it.
        summary = summary.withColumn("ndcg_ci_low", F.greatest(F.col("mean_ndcg") - half, F.lit(0.0))).withColumn(
            "ndcg_ci_high", F.least(F.col("mean_ndcg") + half, F.lit(1.0))
        )
    ordered = [*[F.col(quote(c)).asc_nulls_last() for c in opts.group_by], F.col("k").asc_nulls_last()]
    columns = [c for c in summary.columns if c not in ("ndcg_ci_low", "ndcg_ci_high")]
    at = columns.index("std_ndcg") + 1
    columns = columns[:at] + ["ndcg_ci_low", "ndcg_ci_high"] + columns[at:]
    # A handful of rows: one partition sorted in place, where orderBy would sample the input in a job of its own.
    return summary.select(*[F.col(quote(c)) for c in columns]).coalesce(1).sortWithinPartitions(*ordered)


def bootstrap_interval(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """95% percentile interval of mean NDCG from a Poisson bootstrap computed inside Spark.

    Each (user, replicate) gets a Poisson(1) weight drawn from a hash of the user key, the
    segment, the replicate number and the seed, so the interval depends on the input only,
    not on partitioning or on the order of rows.
    """
    keys = [*opts.group_by, opts.user_col]
    replicate = F.explode(F.sequence(F.lit(0), F.lit(opts.bootstrap_samples - 1))).alias("__b")
    included = scored.filter(~F.col(EXCLUDED)).select(*[F.col(quote(c)) for c in keys], "k", "ndcg", replicate)
    hashed = F.xxhash64(*[F.col(quote(c)) for c in keys], F.col("__b"), F.lit(opts.seed))
    uniform = F.shiftrightunsigned(hashed, 11).cast("double") / F.lit(float(2**53))
    weights = included.withColumn("__w", poisson_one(uniform))
    per_replicate = weights.groupBy(*[F.col(quote(c)) for c in opts.group_by], "k", "__b").agg(
        (F.sum(F.col("__w") * F.col("ndcg")) / F.sum("__w")).alias("__mean")
    )
    return per_replicate.groupBy(*[F.col(quote(c)) for c in opts.group_by], "k").agg(
        F.percentile(F.col("__mean"), F.lit(0.025)).alias("ndcg_ci_low"),
        F.percentile(F.col("__mean"), F.lit(0.975)).alias("ndcg_ci_high"),
    )


def poisson_one(uniform: Column) -> Column:
    """Poisson(1) draw by inverting its CDF at ``uniform`` in [0, 1) (capped at 12: P < 1e-9)."""
    import math

    draw = F.lit(12)
    cdf = 0.0
    thresholds = []
    for n in range(12):
        cdf += math.exp(-1.0) / math.factorial(n)
        thresholds.append((n, cdf))
    for n, c in reversed(thresholds):
        draw = F.when(uniform < F.lit(c), F.lit(n)).otherwise(draw)
    return draw


def _top(values: Column, opts: EvaluationOptions) -> Column:
    """The first ``largest_k`` values (all of them when a whole-list cutoff is asked for)."""
    k = opts.largest_k
    return values if k is None else F.slice(values, 1, k)
