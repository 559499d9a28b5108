"""Per-user CG, DCG, IDCG and NDCG@k, and their summary, as lazy DataFrames.

The plan, chosen so that the recommendations are shuffled once and only their top k, and so
that the per-element work is small (Spark 4 generates code for the higher-order functions too;
the per-item lookups run per hit in the default mode):

1. Recommendations get a 1-based position per user from ``row_number()`` (score descending or
   rank ascending, then the item as the documented tie-break) and are cut at the largest k in a
   window of their own, which Spark turns into a per-partition top-k before the shuffle. With
   ``top_k_method = "heap"`` (:func:`can_use_heap`), a bounded heap per user (``min_by(x, y, k)``)
   finds the same top k without sorting every row, and hands the users it cannot be sure of to
   the window.
2. Each table is grouped per user into arrays of primitives: the ranked items (with their
   positions, to check the order), and the judged items with their relevance. The two are
   joined on the user key alone (full outer, so no user is lost).
3. Cutoffs up to 20 are summed over each user's row (no more rows, no aggregation, no shuffle
   after the join): the recommended side over the user's hits only, the ideal side term by
   term; larger cutoffs and the whole list explode each user's hits and ideal grades into rows
   and sum all cutoffs in one aggregation per user.

Expressions are written as Spark SQL text (see :mod:`ndcg_spark.functions`): the same
built-in functions as the ``Column`` API, with far fewer Python -> JVM calls to build the plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark.errors import INPUT_ERROR_TAG, InputDataError
from ndcg_spark.functions import (
    array_size,
    discount,
    fails_if,
    first_occurrence_only,
    first_occurrences,
    gain,
    has_repeats,
    ident,
    occurrence_order,
    repeat_count,
    string_literal,
)
from ndcg_spark.options import EvaluationOptions
from ndcg_spark.validation import (
    INTEGRAL_TYPES,
    check_key_types,
    check_schema,
    guard_rows,
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
RAW_GAINS = "__ndcg_raw_gains"
HAS_JUDGED = "__ndcg_has_relevance_rows"
DUP_RECS = "__ndcg_duplicate_recommendations"
DUP_REL = "__ndcg_duplicate_relevance"
JUDGED_ROWS = "__ndcg_relevance_rows"
EXCLUDED = "__ndcg_excluded"
ORDERS = "__ndcg_orders"
HITS = "__ndcg_hit_positions"
HIT_TERMS = "__ndcg_hit_terms"
N_REL_BINARY = "__ndcg_relevant_binary"
ARRAY_RANK = "__ndcg_array_rank"
TIE_RANK = "__ndcg_tie_rank"
OCCURRENCES = "__ndcg_occurrences"
FIRSTS = "__ndcg_first_occurrences"

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
        # The two repeat counts (one from each side of the join, never negative) are read so that
        # no action that reads one side only (a count) lets Spark drop the other side and its checks.
        kept = ~F.col(EXCLUDED) & (F.col(DUP_RECS) >= 0) & (F.col(DUP_REL) >= 0)
        return self.scored.filter(kept).select(*[F.col(ident(c)) for c in columns])

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
        With segments a user's judgements serve each of its segments but are counted once: used
        when any of its rows is kept, excluded when all are. ``users`` counts (segment, user) rows.
        """
        one_k = self.scored.filter(F.col("k").eqNullSafe(F.lit(self.options.cutoffs[0])))
        excluded = F.col(EXCLUDED)
        firsts = F.col("n_recommended") - F.col(DUP_RECS)

        def total(c: Column) -> Column:
            return F.coalesce(F.sum(c), F.lit(0)).cast("long")

        per_user = one_k.select(
            F.col(ident(self.options.user_col)),
            F.col("n_recommended").cast("long").alias("evaluated"),
            F.when(~excluded, firsts).cast("long").alias("used"),
            F.col(DUP_RECS).cast("long").alias("repeated"),
            F.when(excluded, firsts).cast("long").alias("excluded"),
            (F.col(JUDGED_ROWS) - F.col(DUP_REL)).cast("long").alias("judged"),
            F.col(DUP_REL).cast("long").alias("collapsed"),
            F.lit(1).cast("long").alias("rows"),
            excluded.cast("long").alias("rows_excluded"),
            excluded.alias("all_excluded"),
        )
        if self.options.group_by:
            # One row per user: its segments' recommendation figures add up, its judgements
            # (the same on each of its rows) are taken once.
            per_user = per_user.groupBy(F.col(ident(self.options.user_col))).agg(
                *[F.sum(c).alias(c) for c in ("evaluated", "used", "repeated", "excluded", "rows", "rows_excluded")],
                F.max("judged").alias("judged"),
                F.max("collapsed").alias("collapsed"),
                F.bool_and("all_excluded").alias("all_excluded"),
            )
        user_excluded = F.col("all_excluded")
        return per_user.agg(
            total(F.col("evaluated")).alias("recommendations_evaluated"),
            total(F.col("used")).alias("recommendations_used"),
            total(F.col("repeated")).alias("recommendations_repeated"),
            total(F.col("excluded")).alias("recommendations_excluded"),
            total(F.when(~user_excluded, F.col("judged"))).alias("relevance_used"),
            total(F.col("collapsed")).alias("relevance_collapsed"),
            total(F.when(user_excluded, F.col("judged"))).alias("relevance_excluded"),
            total(F.col("rows")).alias("users"),
            total(F.col("rows_excluded")).alias("users_excluded"),
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
    recs_item_type = recs.schema[ITEM].dataType
    item_type = common_item_type(recs_item_type, relevance, opts)
    if item_type != recs_item_type:
        recs = recs.withColumn(ITEM, F.col(ITEM).cast(item_type))
    rel = select_relevance(relevance, opts, item_type=item_type)
    per_user = (
        recs.transform(top_k_lists, opts)
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
    keep = [F.col(ident(c)) for c in df.columns if c != opts.array_col]
    exploded = df.select(*keep, F.posexplode(F.col(ident(opts.array_col))).alias("__pos", "__rec"))
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


def user_keys(df: DataFrame, opts: EvaluationOptions) -> list:
    """A user's key in ``df``, quoted: the segment columns of the recommendations it holds, then the user."""
    return [ident(c) for c in (*_recommendation_segments(opts, df.columns), opts.user_col)]


def select_recommendations(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Narrow the recommendations to user, item and the ordering key (smaller ranks first)."""
    if opts.rank_col:
        order = f"CAST({ident(opts.rank_col)} AS DOUBLE)"
    else:
        order = f"-CAST({ident(opts.score_col)} AS DOUBLE)"
    segments = [ident(c) for c in _recommendation_segments(opts, df.columns)]
    return df.selectExpr(
        *segments,
        ident(opts.user_col),
        f"{ident(opts.item_col)} AS {ITEM}",
        f"{order} AS {ORDER}",
    )


def common_item_type(recs_item_type: T.DataType, rel: DataFrame, opts: EvaluationOptions) -> T.DataType:
    """The type both tables' items are compared in: theirs, or the wider of two integer types.

    Widening, never narrowing: a relevance item beyond the range of the recommendations' type
    (a bigint judged against int recommendations) must stay itself, not overflow.
    """
    rel_item_type = rel.schema[opts.item_col].dataType if opts.item_col in rel.columns else None
    if rel_item_type is None or rel_item_type == recs_item_type:
        return recs_item_type
    if not (isinstance(rel_item_type, INTEGRAL_TYPES) and isinstance(recs_item_type, INTEGRAL_TYPES)):
        raise InputDataError(
            f"item column {opts.item_col!r} is {recs_item_type.simpleString()} in the recommendations "
            f"but {rel_item_type.simpleString()} in the relevance table; store both with one type"
        )
    width = {t: i for i, t in enumerate(INTEGRAL_TYPES)}
    return max(recs_item_type, rel_item_type, key=lambda t: width[type(t)])


def select_relevance(df: DataFrame, opts: EvaluationOptions, item_type: T.DataType) -> DataFrame:
    """Narrow the ground truth to user, item (as ``item_type``, see :func:`common_item_type`) and relevance (as double)."""
    item = ident(opts.item_col)
    rel_item_type = df.schema[opts.item_col].dataType if opts.item_col in df.columns else None
    if rel_item_type is not None and rel_item_type != item_type:
        item = f"CAST({item} AS {item_type.simpleString()})"
    relevance = f"CAST({ident(opts.relevance_col)} AS DOUBLE)"
    if opts.negative_relevance == "clip":
        relevance = f"greatest({relevance}, 0.0D)"
    return df.selectExpr(ident(opts.user_col), f"{item} AS {ITEM}", f"{relevance} AS {REL}")


def with_position(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Add each recommendation's 1-based position in its user's list.

    Order: the ordering key ascending (score descending, or rank ascending), then the item
    (ascending by default, descending with ``tie_break="item_descending"``, as trec_eval). The
    window holds ``row_number()`` alone so that a following ``filter_top_k`` becomes Spark's
    per-partition WindowGroupLimit.
    """
    item_order = "ASC" if opts.tie_break == "item_ascending" else "DESC"
    by_user = "PARTITION BY " + ", ".join(user_keys(df, opts))
    columns = [f"row_number() OVER ({by_user} ORDER BY {ORDER} ASC NULLS LAST, {ITEM} {item_order}) AS {POSITION}"]
    if opts.ties == "average":
        # rank() over the score alone keeps a whole tied group at the cutoff: its mean gain needs every member.
        columns.append(f"rank() OVER ({by_user} ORDER BY {ORDER} ASC NULLS LAST) AS {TIE_RANK}")
    return df.selectExpr("*", *columns)


def filter_top_k(df: DataFrame, k: Optional[int]) -> DataFrame:
    """Keep positions 1..k (everything when ``k`` is None); with tie averaging, whole tied groups."""
    if k is None:
        return df
    by = TIE_RANK if TIE_RANK in df.columns else POSITION
    return df.filter(f"{by} <= {int(k)}")


def recommendation_lists(
    ranked: DataFrame, opts: EvaluationOptions, keep_order: bool = False, keep: Optional[int] = None
) -> DataFrame:
    """One row per user: the recommended items in position order, and how many repeat.

    The lists are collected as arrays of primitives (a list of structs costs about twice as
    much to aggregate). collect_list order is not defined after a shuffle, so the positions are
    collected alongside and checked against 1..n; only a list that arrives out of order pays
    for an explicit sort by position. ``keep_order`` also returns the ordering keys (``ORDERS``)
    in position order; rank columns and tie averaging always do. With a rank column and
    ``on_invalid_rows = "error"`` a rank held by two of the collected rows stops the run; the
    lists are then cut to their first ``keep`` (all when None).
    """
    keep_order = keep_order or bool(opts.rank_col) or opts.ties == "average"
    positions, items, orders = "__ndcg_positions", "__ndcg_items_raw", "__ndcg_orders_raw"
    collected = [F.expr(f"collect_list({POSITION}) AS {positions}"), F.expr(f"collect_list({ITEM}) AS {items}")]
    if keep_order:
        collected.append(F.expr(f"collect_list({ORDER}) AS {orders}"))
    in_order = f"{positions} = sequence(1, size({positions}))"
    by_position = f"sort_array(arrays_zip({positions}, {items}{f', {orders}' if keep_order else ''}))"
    ordered = [f"CASE WHEN {in_order} THEN {items} ELSE {by_position}.{items} END AS {ITEMS}"]
    if keep_order:
        ordered.append(f"CASE WHEN {in_order} THEN {orders} ELSE {by_position}.{orders} END AS {ORDERS}")
    keys = user_keys(ranked, opts)
    lists = ranked.groupBy(*[F.col(c) for c in keys]).agg(*collected).selectExpr(*keys, *ordered)
    if opts.rank_col and opts.on_invalid_rows == "error":
        message = string_literal(
            f"{INPUT_ERROR_TAG}: recommendations column {opts.rank_col!r} has two items at the same rank "
            f"for one user, e.g. {opts.user_col}="
        )
        lists = lists.filter(fails_if(has_repeats(ORDERS), f"concat({message}, CAST({ident(opts.user_col)} AS STRING))"))
    items, orders = (ITEMS, ORDERS) if keep is None else (f"slice({ITEMS}, 1, {int(keep)})", f"slice({ORDERS}, 1, {int(keep)})")
    return lists.selectExpr(
        *keys,
        f"{items} AS {ITEMS}",
        *([f"{orders} AS {ORDERS}"] if keep_order else []),
        f"{repeat_count(items)} AS {DUP_RECS}",
    )


def top_k_lists(recs: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: the top-k recommended items in position order, and how many repeat.

    By a bounded heap per user (:func:`heap_top_k_lists`) where :func:`can_use_heap` allows it,
    else by the ``row_number()`` window (:func:`with_position`, :func:`filter_top_k`,
    :func:`recommendation_lists`). Both give the same lists, element for element.
    """
    if can_use_heap(recs, opts):
        return heap_top_k_lists(recs, opts)
    return window_top_k_lists(recs, opts)


def window_top_k_lists(recs: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """:func:`top_k_lists` by the ``row_number()`` window.

    With a rank column and ``on_invalid_rows = "error"`` one row more than the largest k is
    read, so that two items sharing the rank at the cut (one in, one out) stop the run too;
    tie averaging keeps whole tied groups already.
    """
    k = opts.largest_k
    peek = bool(opts.rank_col) and opts.on_invalid_rows == "error" and k is not None and opts.ties == "item"
    return (
        recs.transform(with_position, opts)
        .transform(filter_top_k, k + 1 if peek else k)
        .transform(recommendation_lists, opts, keep=k if peek else None)
    )


#: ``min_by(x, y, n)`` (a bounded heap per group) came with Spark 4.2, for n up to 100,000.
HEAP_MIN_SPARK = (4, 2)
HEAP_MAX_K = 100_000


def spark_version(df: DataFrame) -> tuple:
    """(major, minor) of the Spark that runs ``df`` (the server's, under Spark Connect)."""
    major, minor = df.sparkSession.version.split(".")[:2]
    return int(major), int("".join(ch for ch in minor if ch.isdigit()) or 0)


def can_use_heap(recs: DataFrame, opts: EvaluationOptions) -> bool:
    """Whether :func:`heap_top_k_lists` serves these options and this input.

    It needs ``top_k_method = "heap"``, Spark 4.2+, a finite k, the score (not a
    rank column, whose repeated ranks the window path checks), and ties broken by item (tie
    averaging needs whole tied groups). Anything else takes the window.
    """
    return (
        opts.top_k_method == "heap"
        and opts.largest_k is not None
        and opts.largest_k + 1 <= HEAP_MAX_K
        and not opts.rank_col
        and opts.ties == "item"
        and spark_version(recs) >= HEAP_MIN_SPARK
    )


HEAP_ITEMS = "__ndcg_heap_items"
HEAP_ORDERS = "__ndcg_heap_orders"
HEAP_UNSURE = "__ndcg_heap_unsure"
#: The users the heap hands to the window travel as a bitmap of 2^HEAP_BITMAP_BITS bits (at most
#: 65,536 rows of 64-bit masks, about 1.5 MB, broadcast): bounded, however many users are handed.
HEAP_BITMAP_BITS = 22
HEAP_BITMAP_HI, HEAP_BITMAP_MASK = "__ndcg_bitmap_hi", "__ndcg_bitmap_mask"


def tie_at_cut(orders: str, k: int) -> str:
    """SQL: the k-th and (k+1)-th smallest ordering keys are equal (``orders`` ascending).

    Then a row left out of a user's k + 1 best may tie with the k-th and belong in the top k by
    the item tie-break. The rule reads ordering values only, so the heap (whose tied rows arrive
    in any order) and the window agree on it.
    """
    return f"coalesce(try_element_at({orders}, {k}) = try_element_at({orders}, {k + 1}), false)"


def heap_candidates(recs: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Per user: the k + 1 best items and their ordering keys in key order, and ``HEAP_UNSURE``.

    Two heaps of k + 1 (``min_by(item, key, k + 1)`` and ``min_by(key, key, k + 1)``) over one
    primitive key: a heap of (key, item) structs costs about as much as the window's sort. The
    second gives the k + 1 smallest keys, which do not depend on which of several tied rows the
    first kept, so the i-th item's key is the i-th of them.
    """
    k = int(opts.largest_k)
    keys = user_keys(recs, opts)
    # The flag reads both heaps (sizes always equal) so that no branch that only needs the keys
    # prunes the item heap: both uses of this aggregation then share its one shuffle.
    unsure = f"{tie_at_cut(HEAP_ORDERS, k)} AND size({HEAP_ITEMS}) = size({HEAP_ORDERS})"
    return (
        recs.groupBy(*[F.col(c) for c in keys])
        .agg(
            F.expr(f"min_by({ITEM}, {ORDER}, {k + 1}) AS {HEAP_ITEMS}"),
            F.expr(f"min_by({ORDER}, {ORDER}, {k + 1}) AS {HEAP_ORDERS}"),
        )
        .selectExpr(*keys, HEAP_ITEMS, HEAP_ORDERS, f"{unsure} AS {HEAP_UNSURE}")
    )


def heap_items_in_order(items: str, orders: str, k: int, tie_break: str) -> str:
    """SQL: the first k of a user's heap items in window order (key, then item by ``tie_break``).

    The heap returns its items in key order, but tied ones in arrival order; only a list with a
    tie among its first k is sorted again, by (key, item).
    """
    top = f"slice({items}, 1, {k})"
    if k < 2:
        return top
    # The keys are in order, so a repeated key among the first k is a tie there.
    tied = has_repeats(f"slice({orders}, 1, {k})")
    # The comparator's result when the left item is the smaller / the larger one.
    smaller, larger = ("-1", "1") if tie_break == "item_ascending" else ("1", "-1")
    compare = (
        f"(t_l, t_r) -> CASE WHEN t_l.o < t_r.o THEN -1 WHEN t_l.o > t_r.o THEN 1 "
        f"WHEN t_l.i < t_r.i THEN {smaller} WHEN t_l.i > t_r.i THEN {larger} ELSE 0 END"
    )
    pairs = f"zip_with({orders}, {items}, (t_o, t_x) -> named_struct('o', t_o, 'i', t_x))"
    resorted = f"transform(slice(array_sort({pairs}, {compare}), 1, {k}), t_p -> t_p.i)"
    return f"CASE WHEN {tied} THEN {resorted} ELSE {top} END"


def _heap_bucket(keys: list) -> str:
    return f"pmod(xxhash64({', '.join(keys)}), {1 << HEAP_BITMAP_BITS})"


def unsure_bitmap(candidates: DataFrame, keys: list) -> DataFrame:
    """The flagged users as a bitmap: one row per 64 buckets of the keys' hash, with a mask of the set ones."""
    bucket = _heap_bucket(keys)
    return (
        candidates.filter(HEAP_UNSURE)
        .selectExpr(f"shiftright({bucket}, 6) AS {HEAP_BITMAP_HI}", f"shiftleft(1L, CAST({bucket} & 63 AS INT)) AS __ndcg_bit")
        .groupBy(HEAP_BITMAP_HI)
        .agg(F.expr(f"bit_or(__ndcg_bit) AS {HEAP_BITMAP_MASK}"))
    )


def in_bitmap(keys: list) -> Column:
    """Join condition: the row's user falls in a set bucket of :func:`unsure_bitmap`."""
    bucket = _heap_bucket(keys)
    # Neither side is ever null (xxhash64 hashes nulls too), so <=> means = here; but Spark infers
    # no isnotnull filter from <=>. Such a filter, pushed below the heap aggregation, would make
    # the aggregation's two uses differ, and it would run twice instead of sharing one shuffle.
    return F.expr(
        f"shiftright({bucket}, 6) <=> {HEAP_BITMAP_HI} "
        f"AND (shiftright({HEAP_BITMAP_MASK}, CAST({bucket} & 63 AS INT)) & 1L) = 1L"
    )


def heap_top_k_lists(recs: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """:func:`recommendation_lists` of the top k, found by bounded heaps per user.

    ``min_by(value, key, k + 1)`` keeps each user's k + 1 best rows in a heap during an
    aggregation whose sort is by the user alone (a radix sort), where the window sorts every row
    by (user, key, item) with row comparisons. A user's heap list is exact unless its k-th and
    (k+1)-th keys are equal (:func:`tie_at_cut`): every row left out has a key at least the
    (k+1)-th, so the top k by (key, item) lie among the k + 1 kept, and ties inside them are
    sorted by item (:func:`heap_items_in_order`).

    The users with a tie at the cut are recomputed from their rows by the window. They travel as
    a bitmap of hashed keys (:func:`unsure_bitmap`, at most 2^22 bits whatever their number)
    broadcast to a second read of the recommendations; the window side keeps the users whose
    own lists show the tie at the cut, the heap side the others, so each user comes from one
    side. When no user has such a tie (continuous scores), the bitmap is empty, adaptive
    execution drops the window side before it reads anything, and the heap's one pass is all.
    Scores with many ties make the window side large: ``top_k_method = "window"`` is then faster.
    """
    k = int(opts.largest_k)
    keys = user_keys(recs, opts)
    candidates = heap_candidates(recs, opts)
    bitmap = F.broadcast(unsure_bitmap(candidates, keys))
    items = heap_items_in_order(HEAP_ITEMS, HEAP_ORDERS, k, opts.tie_break)
    sure = candidates.filter(f"NOT {HEAP_UNSURE}").selectExpr(*keys, f"{items} AS {ITEMS}")
    windowed = (
        recs.join(bitmap, in_bitmap(keys), "left_semi")
        .transform(with_position, opts)
        .transform(filter_top_k, k + 1)
        .transform(recommendation_lists, opts, keep_order=True)
        .filter(tie_at_cut(ORDERS, k))
        .selectExpr(*keys, f"slice({ITEMS}, 1, {k}) AS {ITEMS}")
    )
    return sure.unionByName(windowed).selectExpr(*keys, ITEMS, f"{repeat_count(ITEMS)} AS {DUP_RECS}")


def relevance_lists(rel: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per user: judged items and their relevance (parallel arrays), the ideal list (the
    grades above 0, largest first, at most the largest k), counts.

    With ``duplicate_relevance = "max"`` repeated (user, item) rows are first merged by an
    aggregation (their largest relevance); otherwise a repeat raises an input error.
    """
    user = ident(opts.user_col)
    items, rels = "__ndcg_judged_items", "__ndcg_judged_relevance"
    # Only the two lists (and what an option needs) are aggregated: every further aggregate
    # costs a per-row update in the aggregation, while counts over the lists are computed once
    # per user below.
    aggregates = [f"collect_list({ITEM}) AS {items}", f"collect_list({REL}) AS {rels}"]
    if opts.duplicate_relevance == "max":
        rel = rel.groupBy(F.col(user), F.col(ITEM)).agg(F.expr(f"max({REL}) AS {REL}"), F.expr("count(1) AS __ndcg_rows"))
        aggregates.append(f"CAST(sum(__ndcg_rows) AS INT) AS {JUDGED_ROWS}")
        rows = JUDGED_ROWS
    else:
        rows = f"size({items})"
    if opts.companion_metrics:
        aggregates.append(f"CAST(count(CASE WHEN {is_relevant(REL, opts)} THEN 1 END) AS INT) AS {N_REL_BINARY}")
    per_user = rel.groupBy(F.col(user)).agg(*[F.expr(a) for a in aggregates])
    if opts.duplicate_relevance == "max":
        n_repeats = f"{JUDGED_ROWS} - size({items})"
    else:
        n_repeats = repeat_count(items)
        message = string_literal(
            f"{INPUT_ERROR_TAG}: relevance table has more than one row for a ({opts.user_col}, "
            f"{opts.item_col}) pair, e.g. {opts.user_col}="
        )
        hint = string_literal("; set duplicate_relevance = \"max\" to keep the largest relevance")
        per_user = per_user.filter(fails_if(f"{n_repeats} > 0", f"concat({message}, CAST({user} AS STRING), {hint})"))
        # Every row past the filter has none (and the count is not computed a second time).
        n_repeats = "0"
    positive = f"array_remove({rels}, 0.0D)"
    return per_user.selectExpr(
        user,
        f"{items} AS {JUDGED_ITEMS}",
        f"{rels} AS {JUDGED_RELEVANCE}",
        # The relevance reaching here is never negative or NaN (the row rules reject it, or it
        # was clipped to 0), so the grades above 0 are the ones that are not 0. The ideal list
        # holds those only: a 0 grade adds a 0.0 term (x + 0.0 == x, the same bits), and the
        # exploded sums make a row per element (relevance tables are often mostly 0 grades).
        f"{_top(f'sort_array({positive}, false)', opts)} AS {IDEAL}",
        f"size({positive}) AS n_relevant",
        *([N_REL_BINARY] if opts.companion_metrics else []),
        f"true AS {HAS_JUDGED}",
        f"CAST({n_repeats} AS INT) AS {DUP_REL}",
        f"{rows} AS {JUDGED_ROWS}",
    )


def is_relevant(relevance: str, opts: EvaluationOptions) -> str:
    """Binary relevance of the companion metrics: >= threshold, or > 0 without one."""
    if opts.relevance_threshold is None:
        return f"({relevance} > 0.0D)"
    return f"({relevance} >= CAST({float(opts.relevance_threshold)!r} AS DOUBLE))"


def with_gains(joined: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Per user: the list length, policy counts, and the arrays the sums of :func:`with_cutoffs` read.

    Only the optional modes compute gain arrays here, with higher-order functions: tie
    averaging needs every gain of a tied group, and the companion metrics the positions of the
    hits. In the default mode the gains are computed in :func:`with_cutoffs`, per hit.
    """
    n = array_size(ITEMS)
    if opts.ties == "average" and opts.largest_k is not None:
        # Tied rows past the largest k were kept for their gains only; they are not recommendations.
        n = f"least({n}, {int(opts.largest_k)})"
    extra = []
    if opts.ties == "average" or opts.companion_metrics:
        # Which positions hold an item's first occurrence, for the lists with a repeat only
        # (recommendation_lists counted the repeats already; null: the user has no list). Each
        # step in a projection of its own: the next one reads it more than once.
        order = f"CASE WHEN coalesce({DUP_RECS}, 0) > 0 THEN {occurrence_order(ITEMS)} END"
        joined = joined.selectExpr("*", f"{order} AS {OCCURRENCES}").selectExpr(
            "*", f"{first_occurrences(OCCURRENCES)} AS {FIRSTS}"
        )
    if opts.ties == "average":
        gains = first_occurrence_only(f"transform({ITEMS}, g_x -> {gain(relevance_of('g_x'), opts.gain)})", FIRSTS)
        # The gains in a projection of their own: tie_averaged reads them more than once.
        joined = joined.selectExpr("*", f"{gains} AS {RAW_GAINS}")
        averaged = tie_averaged(RAW_GAINS, ORDERS)
        extra.append(f"coalesce({averaged}, CAST(array() AS array<double>)) AS {GAINS}")
    if opts.companion_metrics:
        hits = first_occurrence_only(
            f"transform({ITEMS}, h_x -> CAST({is_relevant(relevance_of('h_x'), opts)} AS DOUBLE))", FIRSTS
        )
        extra += [
            f"filter(transform({hits}, (h_h, h_i) -> CASE WHEN h_h > 0 THEN h_i + 1 END), h_p -> h_p IS NOT NULL) AS {HITS}",
            f"coalesce({N_REL_BINARY}, 0) AS {N_REL_BINARY}",
        ]
    keys = user_keys(joined, opts)
    empty_items = f"CAST(array() AS {joined.schema[ITEMS].dataType.simpleString()})"
    repeats = DUP_RECS
    if opts.ties == "average" and opts.largest_k is not None:
        # The repeats counted for the summary and the row accounting are those among the
        # recommendations evaluated (the first k), not in the tied tail kept for its gains only.
        repeats = repeat_count(f"slice({ITEMS}, 1, {int(opts.largest_k)})")
    return joined.selectExpr(
        *keys,
        f"{n} AS n_recommended",
        "coalesce(n_relevant, 0) AS n_relevant",
        f"{HAS_JUDGED} IS NOT NULL AS {HAS_JUDGED}",
        f"coalesce({repeats}, 0) AS {DUP_RECS}",
        f"coalesce({DUP_REL}, 0) AS {DUP_REL}",
        f"coalesce({JUDGED_ROWS}, 0) AS {JUDGED_ROWS}",
        f"coalesce({ITEMS}, {empty_items}) AS {ITEMS}",
        JUDGED_ITEMS,
        JUDGED_RELEVANCE,
        f"coalesce({IDEAL}, CAST(array() AS array<double>)) AS {IDEAL}",
        *extra,
    )


def relevance_of(item: str) -> str:
    """SQL: the judged relevance of ``item`` for the row's user, 0.0 when it was not judged."""
    # array_position is 0 when the item was not judged (and null when the user has no judgements).
    at = f"array_position({JUDGED_ITEMS}, {item})"
    return f"(CASE WHEN {at} > 0 THEN try_element_at({JUDGED_RELEVANCE}, CAST({at} AS INT)) ELSE 0.0D END)"


def tie_averaged(gains: str, orders: str) -> str:
    """SQL: each gain replaced by the mean gain of its tied group (equal ordering key).

    Summed with the positional discounts this is the expected DCG over all orderings of each
    tie (scikit-learn's ``ndcg_score`` default). The lists are in position order, which sorts
    them by ordering key, so a tied group is a run of adjacent elements. The runs are found from
    their starts (an element whose key differs from the one before), each run's gains are summed
    left to right over its own slice, and the means are repeated over the run and flattened: linear
    in the list's length however many runs it has (growing an array run by run in ``aggregate``
    copies it once per run, which took 21 s for one list of 80,000 with a tie). Only lists that
    hold a tie pay for it. ``gains`` and ``orders`` should be columns: each is read more than once.
    """
    n = f"size({orders})"
    starts = f"filter(sequence(1, {n}), t_i -> t_i = 1 OR {orders}[t_i - 1] <> {orders}[t_i - 2])"
    # Each run as (start, length): it ends where the next one starts, the last at the list's end.
    # (No lambda may refer to ``starts``: a lambda re-evaluates what it refers to, per element.)
    ends = f"concat(slice({starts}, 2, {n}), array({n} + 1))"
    runs = f"zip_with({starts}, {ends}, (t_s, t_e) -> named_struct('s', t_s, 'l', t_e - t_s))"
    mean = f"aggregate(slice({gains}, t_r.s, t_r.l), 0.0D, (t_a, t_g) -> t_a + t_g) / t_r.l"
    averaged = f"flatten(transform({runs}, t_r -> array_repeat({mean}, t_r.l)))"
    return f"(CASE WHEN {has_repeats(orders)} THEN {averaged} ELSE {gains} END)"


def with_cutoffs(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per (user, k) with cg, dcg, idcg and ndcg; the arrays are dropped.

    Small cutoffs (all finite, the largest at most :data:`UNROLLED_CUTOFF_LIMIT`) are summed
    over the user's row (:func:`_sums_unrolled`): no rows multiply and nothing is aggregated, so
    no shuffle follows the join. Otherwise each user's hits and ideal grades are exploded into
    rows and one aggregation per user sums every cutoff (:func:`_sums_exploded`); a full outer
    join's output has no known partitioning, so Spark exchanges its one partial row per user
    before the final aggregation (folding the sums on the row instead, with higher-order
    functions, measured no faster; see the README). Both add the same terms left to right from
    position 1, so they give the same bits, on every run.
    """
    arrays = (ITEMS, JUDGED_ITEMS, JUDGED_RELEVANCE, IDEAL, GAINS, HITS, N_REL_BINARY)
    if opts.companion_metrics:
        # Computed per user (higher-order functions on the hit positions).
        companion_columns = []
        for j, k in enumerate(opts.cutoffs):
            cut = "n_recommended" if k is None else str(int(k))
            for name, metric in companion_metrics(HITS, N_REL_BINARY, cut).items():
                companion_columns.append(f"{metric} AS __ndcg_{name}_{j}")
        df = df.selectExpr(*[ident(c) for c in df.columns if c not in (HITS, N_REL_BINARY)], *companion_columns)
    keys = [ident(c) for c in df.columns if c not in arrays]
    with_hits = df.selectExpr(*keys, f"{hits_of(opts)} AS {HIT_TERMS}", IDEAL)
    if opts.largest_k is not None and opts.largest_k <= UNROLLED_CUTOFF_LIMIT:
        per_user = _sums_unrolled(with_hits, keys, opts)
    else:
        per_user = _sums_exploded(with_hits, keys, opts)

    single = len(opts.cutoffs) == 1

    def pick(name: str) -> str:
        if single:
            return f"__ndcg_{name}_0"
        # A CASE on the cutoff's index, not element_at(array(...)): no array built per row.
        whens = " ".join(f"WHEN {j} THEN __ndcg_{name}_{j}" for j in range(len(opts.cutoffs)))
        return f"CASE __ndcg_k_index {whens} END"

    def as_int(k: Optional[int]) -> str:
        return "CAST(NULL AS INT)" if k is None else f"CAST({int(k)} AS INT)"

    if single:
        per_k, k_column = per_user, f"{as_int(opts.cutoffs[0])} AS k"
    else:
        cutoffs = ", ".join(as_int(k) for k in opts.cutoffs)
        per_k, k_column = per_user.selectExpr("*", f"posexplode(array({cutoffs})) AS (__ndcg_k_index, k)"), "k"
    kept = (HAS_JUDGED, DUP_RECS, DUP_REL, JUDGED_ROWS)
    base = [c for c in keys if not c.strip("`").startswith("__ndcg_") or c.strip("`") in kept]
    dcg, idcg = f"coalesce({pick('dcg')}, 0.0D)", f"coalesce({pick('idcg')}, 0.0D)"
    companions = [f"{pick(name)} AS {name}" for name in (COMPANION_COLUMNS if opts.companion_metrics else ())]
    return per_k.selectExpr(
        *base,
        k_column,
        f"coalesce({pick('cg')}, 0.0D) AS cg",
        f"{dcg} AS dcg",
        f"{idcg} AS idcg",
        *companions,
        f"CASE WHEN {idcg} > 0 THEN {dcg} / {idcg} ELSE 0.0D END AS ndcg",
    )


def ideal_gain(position: str, opts: EvaluationOptions) -> str:
    """SQL: the gain of the ideal list at a 1-based position (null past its end)."""
    return gain(f"try_element_at({IDEAL}, {position})", opts.gain)


def _ideal_cut(cut: str, opts: EvaluationOptions) -> str:
    return f"least({cut}, n_recommended)" if opts.cap_ideal_at_list_length else cut


#: Largest finite cutoff summed by :func:`_sums_unrolled`; each position is a term of its own in
#: the generated code, so larger cutoffs (and the whole list) go through the exploded rows.
UNROLLED_CUTOFF_LIMIT = 20


def _sums_unrolled(with_hits: DataFrame, keys: list, opts: EvaluationOptions) -> DataFrame:
    """Per user: ``__ndcg_{cg,dcg,idcg}_{j}`` without exploding the user's row.

    ``with_hits`` holds each user's keys, hits and ideal list (see :func:`with_cutoffs`). The
    recommended side is summed over the user's hits only (:func:`hits_of`): the judged items of
    the list with their first position and gain, in position order. Each cutoff folds them
    with ``aggregate``, adding a hit's term when its position is within the cutoff. The ideal side
    is written out term by term, ``coalesce(gain(ideal[i]), 0) * 1/log2(i + 1)`` for i in 1..k,
    with the discounts folded to constants when Spark plans the query. Both add their terms left
    to right from position 1 and only skip terms that are 0.0 (``x + 0.0 == x``), so the sums
    equal the exploded rows' aggregation bit for bit.
    """

    def within(cut: int, term: str) -> str:
        # A hit past the cutoff adds nothing; positions only grow along the array.
        return f"aggregate({HIT_TERMS}, 0.0D, (u_acc, u_h) -> CASE WHEN u_h.p <= {cut} THEN u_acc + {term} ELSE u_acc END)"

    def ideal_term(i: int) -> str:
        return f"coalesce({ideal_gain(str(i), opts)}, 0.0D) * {discount(str(i))}"

    sums = []
    for j, k in enumerate(opts.cutoffs):
        positions = range(1, int(k) + 1)
        ideal_cut = _ideal_cut(str(int(k)), opts)
        ideal_terms = [
            f"(CASE WHEN {i} <= {ideal_cut} THEN {ideal_term(i)} ELSE 0.0D END)" if opts.cap_ideal_at_list_length
            else f"({ideal_term(i)})"
            for i in positions
        ]
        sums += [
            f"{within(int(k), 'u_h.g')} AS __ndcg_cg_{j}",
            f"{within(int(k), '(u_h.g * ' + discount('u_h.p') + ')')} AS __ndcg_dcg_{j}",
            " + ".join(ideal_terms) + f" AS __ndcg_idcg_{j}",
        ]
    return with_hits.selectExpr(*keys, *sums)


def hits_of(opts: EvaluationOptions) -> str:
    """SQL: the user's hits as ``array<struct<p: int, g: double>>`` in position order.

    One element per distinct recommended item that was judged: ``p`` the 1-based position of its
    first occurrence (a repeated item gains there only), ``g`` its gain.
    ``array_intersect`` keeps the order of the recommended list and drops repeats, so the
    lookups (a scan of the judged items each) only run for the few items that hit, not for
    every position. With tie averaging the hits are the positions of the nonzero averaged gains.
    """
    empty = "CAST(array() AS array<struct<p: int, g: double>>)"
    if opts.ties == "average":
        terms = f"transform({GAINS}, (h_g, h_i) -> named_struct('p', h_i + 1, 'g', h_g))"
        return f"coalesce(filter({terms}, h_t -> h_t.g <> 0.0D), {empty})"
    # Not relevance_of(): a hit is always judged, so one array_position (not relevance_of's two)
    # finds its grade.
    grade = f"element_at({JUDGED_RELEVANCE}, CAST(array_position({JUDGED_ITEMS}, h_x) AS INT))"
    terms = (
        f"transform(array_intersect({ITEMS}, {JUDGED_ITEMS}), h_x -> named_struct("
        f"'p', CAST(array_position({ITEMS}, h_x) AS INT), 'g', {gain(grade, opts.gain)}))"
    )
    # array_intersect is null for a user without judgements (or without recommendations).
    return f"coalesce({terms}, {empty})"


def _sums_exploded(with_hits: DataFrame, keys: list, opts: EvaluationOptions) -> DataFrame:
    """Per user: ``__ndcg_{cg,dcg,idcg}_{j}`` from exploded rows and one aggregation.

    Row i of a user carries the user's i-th hit (:func:`hits_of`: position and gain, in position
    order) and the i-th grade of the ideal list, so a user has as many rows as the longer of the
    two, not one per position of the list: the positions without a hit would only add 0.0. The
    rows of a user come from one input row, so they stay in one task and the sums run in row
    order, which is position order on both sides.
    """
    row = "__ndcg_row"
    hit = f"try_element_at({HIT_TERMS}, {row})"
    # Rows 1 .. the longer of the two arrays; a user with neither keeps one row (explode_outer).
    length = f"greatest(size({HIT_TERMS}), size({IDEAL}))"
    rows = (
        with_hits.selectExpr(*keys, HIT_TERMS, IDEAL, f"explode_outer(CASE WHEN {length} > 0 THEN sequence(1, {length}) END) AS {row}")
        .selectExpr(
            # Each term in a projection of its own, so it is computed once per row, not once per cutoff.
            *keys,
            row,
            f"{hit}.p AS __ndcg_p",
            f"{hit}.g AS __ndcg_g",
            f"{hit}.g * {discount(f'{hit}.p')} AS __ndcg_dg",
            f"{ideal_gain(row, opts)} * {discount(row)} AS __ndcg_idg",
        )
    )
    sums = []
    for j, k in enumerate(opts.cutoffs):
        cut = "n_recommended" if k is None else str(int(k))
        sums += [
            f"sum(CASE WHEN __ndcg_p <= {cut} THEN __ndcg_g END) AS __ndcg_cg_{j}",
            f"sum(CASE WHEN __ndcg_p <= {cut} THEN __ndcg_dg END) AS __ndcg_dcg_{j}",
            f"sum(CASE WHEN {row} <= {_ideal_cut(cut, opts)} THEN __ndcg_idg END) AS __ndcg_idcg_{j}",
        ]
    return rows.groupBy(*[F.col(c) for c in keys]).agg(*[F.expr(e) for e in sums])


def companion_metrics(hit_positions: str, n_relevant: str, cut: str) -> Dict[str, str]:
    """SQL for precision, recall, AP, RR and hit at cutoff ``cut`` from the 1-based positions of the hits.

    As trec_eval: precision divides by k even for a shorter list (P_k), recall and AP by the
    number of relevant judged items (recall_k, map_cut_k); RR is 1/rank of the first hit within k.
    """
    within = f"filter({hit_positions}, c_p -> c_p <= {cut})"
    hits = f"CAST(size({within}) AS DOUBLE)"
    safe_r = f"(CASE WHEN {n_relevant} > 0 THEN CAST({n_relevant} AS DOUBLE) END)"
    ap_sum = f"aggregate(transform({within}, (c_p, c_j) -> CAST(c_j + 1 AS DOUBLE) / c_p), 0.0D, (c_acc, c_x) -> c_acc + c_x)"
    first = f"try_element_at({within}, 1)"
    return {
        "precision": f"coalesce({hits} / CASE WHEN {cut} > 0 THEN CAST({cut} AS DOUBLE) END, 0.0D)",
        "recall": f"coalesce({hits} / {safe_r}, 0.0D)",
        "ap": f"coalesce({ap_sum} / {safe_r}, 0.0D)",
        "rr": f"coalesce(1.0D / {first}, 0.0D)",
        "hit": f"CASE WHEN {hits} > 0 THEN 1.0D ELSE 0.0D END",
    }


def with_user_attributes(df: DataFrame, attributes: Optional[DataFrame], opts: EvaluationOptions) -> DataFrame:
    """Join the segment columns that live in the user attributes table (left join on user).

    The table must hold one row per user: a repeated user stops the run (an input error).
    """
    if attributes is None:
        return df
    wanted = [c for c in opts.group_by if c in attributes.columns and c not in df.columns]
    if not wanted:
        return df
    user = ident(opts.user_col)
    message = string_literal(
        f"{INPUT_ERROR_TAG}: user attributes table has more than one row for {opts.user_col}="
    )
    # One row per user, checked: a repeated user would repeat that user's figures in the join.
    attrs = (
        attributes.groupBy(F.col(user).alias(opts.user_col))
        .agg(F.count(F.lit(1)).alias("__ndcg_attribute_rows"), *[F.first(F.col(ident(c))).alias(c) for c in wanted])
        .filter(fails_if("__ndcg_attribute_rows > 1", f"concat({message}, CAST({user} AS STRING))"))
        .drop("__ndcg_attribute_rows")
    )
    return df.join(attrs, on=opts.user_col, how="left")


def with_exclusions(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Flag the users the policies leave out of ``per_user`` and the means (they stay counted)."""
    excluded = ["false"]
    if opts.zero_idcg == "exclude":
        excluded.append("n_relevant = 0")
    if opts.no_recommendations == "exclude":
        excluded.append("n_recommended = 0")
    return df.selectExpr("*", f"{' OR '.join(excluded)} AS {EXCLUDED}")


def summarize(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Means over included users and policy counts over all users, one row per segment and k."""
    included = f"NOT {EXCLUDED}"

    def count_if(condition: str) -> str:
        return f"CAST(sum(CASE WHEN {condition} THEN 1 ELSE 0 END) AS BIGINT)"

    def mean(name: str) -> str:
        return f"avg(CASE WHEN {included} THEN {name} END)"

    companions = []
    if opts.companion_metrics:
        companions = [
            f"{mean('precision')} AS mean_precision",
            f"{mean('recall')} AS mean_recall",
            f"{mean('ap')} AS mean_ap",
            f"{mean('rr')} AS mean_rr",
            f"{mean('hit')} AS hit_rate",
        ]
    aggregates = [
        f"{count_if(included)} AS users",
        f"{mean('ndcg')} AS mean_ndcg",
        f"{mean('dcg')} AS mean_dcg",
        f"stddev_samp(CASE WHEN {included} THEN ndcg END) AS std_ndcg",
        *companions,
        f"{count_if('n_relevant = 0')} AS users_zero_idcg",
        f"{count_if('n_recommended = 0')} AS users_without_recommendations",
        f"{count_if(f'NOT {HAS_JUDGED}')} AS users_without_relevance",
        f"{count_if(EXCLUDED)} AS users_excluded",
        f"CAST(sum({DUP_RECS}) AS BIGINT) AS duplicate_recommendations",
        f"CAST(sum({DUP_REL}) AS BIGINT) AS duplicate_relevance",
    ]
    keys = [ident(c) for c in (*opts.group_by, "k")]
    summary = scored.groupBy(*[F.col(c) for c in keys]).agg(*[F.expr(a) for a in aggregates])
    names = [a.rsplit(" AS ", 1)[1] for a in aggregates]
    at = names.index("std_ndcg") + 1
    if opts.confidence_interval == "bootstrap":
        summary = join_null_safe(summary, bootstrap_interval(scored, opts), [*opts.group_by, "k"], "left")
        interval = ["ndcg_ci_low", "ndcg_ci_high"]
    else:
        half = "(1.959963984540054D * std_ndcg / sqrt(CAST(users AS DOUBLE)))"
        # NDCG lives in [0, 1]; the normal approximation does not know it.
        interval = [f"greatest(mean_ndcg - {half}, 0.0D) AS ndcg_ci_low", f"least(mean_ndcg + {half}, 1.0D) AS ndcg_ci_high"]
    columns = [*keys, *names[:at], *interval, *names[at:]]
    ordered = [F.col(c).asc_nulls_last() for c in keys]
    # A handful of rows: one partition sorted in place, where orderBy would sample the input in a job of its own.
    return summary.selectExpr(*columns).coalesce(1).sortWithinPartitions(*ordered)


def join_null_safe(left: DataFrame, right: DataFrame, keys: list, how: str) -> DataFrame:
    """``left.join(right, on=keys, how=how)`` (``how`` "left" or "full") where a null key matches a null key.

    ``k`` is null for the whole-list cutoff and a segment value may be null: a plain equi-join
    on such keys would never pair those rows. One column per key, as with ``on=keys``
    (for a full join, the value of whichever side has the row).
    """
    if how not in ("left", "full"):
        raise ValueError(f"join_null_safe joins 'left' or 'full', not {how!r}")
    renamed = right.select(
        *[F.col(ident(c)).alias(f"__ndcg_right_{i}") for i, c in enumerate(keys)],
        *[F.col(ident(c)) for c in right.columns if c not in keys],
    )
    condition = None
    for i, c in enumerate(keys):
        equal = F.col(ident(c)).eqNullSafe(F.col(f"__ndcg_right_{i}"))
        condition = equal if condition is None else condition & equal
    joined = left.join(renamed, on=condition, how=how)
    if how == "full":
        key_columns = [F.coalesce(F.col(ident(c)), F.col(f"__ndcg_right_{i}")).alias(c) for i, c in enumerate(keys)]
    else:
        key_columns = [F.col(ident(c)) for c in keys]
    rest = [F.col(ident(c)) for c in joined.columns if c not in keys and not c.startswith("__ndcg_right_")]
    return joined.select(*key_columns, *rest)


def bootstrap_interval(scored: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """95% percentile interval of mean NDCG from a Poisson bootstrap computed inside Spark.

    Each (user, replicate) gets a Poisson(1) weight drawn from a hash of the user key, the
    segment, the replicate number and the seed, so the interval depends on the input only,
    not on partitioning or on the order of rows.
    """
    keys = [*opts.group_by, opts.user_col]
    replicate = F.explode(F.sequence(F.lit(0), F.lit(opts.bootstrap_samples - 1))).alias("__b")
    included = scored.filter(~F.col(EXCLUDED)).select(*[F.col(ident(c)) for c in keys], "k", "ndcg", replicate)
    hashed = F.xxhash64(*[F.col(ident(c)) for c in keys], F.col("__b"), F.lit(opts.seed))
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


def _top(values: str, opts: EvaluationOptions) -> str:
    """SQL: the first ``largest_k`` values (all of them when a whole-list cutoff is asked for)."""
    k = opts.largest_k
    return values if k is None else f"slice({values}, 1, {int(k)})"
