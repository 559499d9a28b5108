"""Similarity and what reads it: each user's history (:func:`history_table`), the co-occurrence
cosines a list needs (:func:`cooccurrence`, :func:`cooccurrence_sums`), and
the per-user metrics' sums over them (diversity's and serendipity's SQL is
:mod:`ndcg_spark._metrics.beyond`'s).

Similarity is computed only where a metric reads it: a category or feature cosine from the
list's own arrays (the sum of the normalised vectors gives every pair's cosine at once), a
co-occurrence cosine for the item pairs some list or some user's history pairs with a
recommended item only (never every pair of every long history: those grow with the squares of the
histories), counted from the short histories' own pairs and, for the long ones, over the users of the
pair's less popular item. A history is one array of
one row: at most ``max_history`` distinct items per user (a longer one stops the run, naming the user).
"""

from __future__ import annotations

from typing import Collection, List, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond.columns import (
    ATTRS,
    CATEGORY,
    FEATURES,
    HI,
    HISTORY,
    HISTORY_CATS,
    HISTORY_SIZE,
    HISTORY_VECTOR,
    LO,
    PAIR_SUMS,
    SEREN_SUMS,
    SIM,
    UNIT,
    USERS,
)
from ndcg_spark._spark.sql import ident, string_literal
from ndcg_spark._stages.column_contract import ITEM
from ndcg_spark.errors import input_check
from ndcg_spark.options import EvaluationOptions


def unit(features: str) -> str:
    """SQL: a feature vector divided by its norm (null for a zero vector: it is similar to nothing)."""
    norm = f"sqrt(aggregate({features}, 0.0D, (a, x) -> a + x * x))"
    return f"(CASE WHEN {norm} > 0.0D THEN transform({features}, x -> x / {norm}) END)"


def history_table(
    seen: DataFrame, items: Optional[DataFrame], opts: EvaluationOptions, bounded: bool = True
) -> DataFrame:
    """Per user: the distinct items of its interactions (``HISTORY``), their number, and what the
    similarity reads of them: their categories, or the sum of their normalised feature vectors.

    ``seen``: the distinct (user, ``ITEM``) of the interactions (:func:`ndcg_spark._beyond.novelty.seen_items`).
    Under ``similarity = "cooccurrence"`` and ``bounded`` (serendipity is asked) a user with more
    than ``max_history`` distinct items stops the run, naming the user: its history is one array of
    one row, paired with the user's relevant recommended items.
    """
    user = ident(opts.user_col)
    distinct = seen.select(user, ITEM)
    if opts.similarity in ("features", "category") and items is not None:
        distinct = distinct.join(items.selectExpr(ITEM, CATEGORY, f"{unit(FEATURES)} AS {UNIT}"), on=ITEM, how="left")
    else:
        distinct = distinct.selectExpr(
            "*", f"CAST(NULL AS STRING) AS {CATEGORY}", f"CAST(NULL AS array<double>) AS {UNIT}"
        )
    grouped = distinct.groupBy(user).agg(
        F.collect_list(ITEM).alias(HISTORY),
        F.collect_list(CATEGORY).alias(HISTORY_CATS),
        F.collect_list(UNIT).alias("__nb_units"),
    )
    summed = (
        "aggregate(__nb_units, CAST(NULL AS array<double>), (acc, v) -> CASE WHEN acc IS NULL THEN v "
        "ELSE zip_with(acc, v, (a, b) -> a + b) END)"
    )
    out = grouped.selectExpr(
        user, HISTORY, f"size({HISTORY}) AS {HISTORY_SIZE}", HISTORY_CATS, f"{summed} AS {HISTORY_VECTOR}"
    )
    message = (
        f"concat({string_literal(f'interactions: {opts.user_col}=')}, CAST({user} AS STRING), ' has ', "
        f"CAST({HISTORY_SIZE} AS STRING), {string_literal(f' distinct items, more than max_history = {opts.max_history}; raise max_history or trim the history')})"
    )
    if opts.similarity != "cooccurrence" or not bounded:
        return out
    return out.filter(input_check(f"{HISTORY_SIZE} > {int(opts.max_history)}", message))


#: Histories of at most this many distinct items are paired within themselves to count
#: co-occurrence; a longer one is counted through its items' users instead. Pairing a history costs
#: its length squared over 2 rows; looking a needed pair up costs one row per user of its less
#: popular item among the long histories. Measured (rows): 100,000 users of 20 items each, 1.8
#: million needed pairs of ~64 users each: 19 M pairing, 115 M looking up; MovieLens-small (610
#: users, up to 2,158 items): 19.4 M pairing, 0.70 M looking up, 0.75 M with this bound.
PAIRED_HISTORY = 50


def cooccurrence(needed: DataFrame, history: DataFrame, per_item: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Cosine of two items' user sets, ``SIM`` = |U_a ∩ U_b| / sqrt(|U_a| |U_b|), for each pair of
    ``needed`` (``LO`` < ``HI``) that some user's history holds together (any other pair is 0).

    Only the pairs a metric reads are counted, never every pair of every long history (those grow
    with the square of the histories). A short history (at most :data:`PAIRED_HISTORY` items) gives
    its own pairs, kept where needed; for the long ones, each needed pair meets the long histories'
    users of its less popular item, and those users' other item is looked up among the same rows
    (min(|U_a|, |U_b|) rows a pair at most). ``history``: :func:`history_table`; ``per_item``:
    ``ITEM`` and its users ``USERS`` (a row per item: joined as Spark sees fit). The sides that grow
    with the pairs are shuffled, never broadcast, whatever Spark estimates their size to be.
    """
    user = ident(opts.user_col)
    counts = per_item.select(ITEM, USERS)
    sized = (
        needed.join(counts.selectExpr(f"{ITEM} AS {LO}", f"{USERS} AS __nb_lo_users"), on=LO)
        .join(counts.selectExpr(f"{ITEM} AS {HI}", f"{USERS} AS __nb_hi_users"), on=HI)
        .selectExpr(
            LO,
            HI,
            "__nb_lo_users",
            "__nb_hi_users",
            f"CASE WHEN __nb_lo_users <= __nb_hi_users THEN {LO} ELSE {HI} END AS {ITEM}",
            f"CASE WHEN __nb_lo_users <= __nb_hi_users THEN {HI} ELSE {LO} END AS __nb_other",
        )
    )
    keys = [LO, HI, "__nb_lo_users", "__nb_hi_users"]
    # Short histories: their own pairs, each as (least, greatest) of the sorted array.
    short = history.filter(f"{HISTORY_SIZE} <= {PAIRED_HISTORY}").selectExpr(f"array_sort({HISTORY}) AS __nb_h")
    own_pairs = short.selectExpr(
        "explode(flatten(transform(__nb_h, (a, n) -> transform(slice(__nb_h, n + 2, size(__nb_h) - n - 1), "
        "b -> named_struct('lo', a, 'hi', b))))) AS __nb_pair"
    ).selectExpr(f"__nb_pair.lo AS {LO}", f"__nb_pair.hi AS {HI}")
    from_short = sized.select(*keys).hint("merge").join(own_pairs.hint("merge"), on=[LO, HI])
    # Long histories: the needed pair's less popular item's users among them, then their other item.
    long_rows = history.filter(f"{HISTORY_SIZE} > {PAIRED_HISTORY}").selectExpr(user, f"explode({HISTORY}) AS {ITEM}")
    from_long = (
        sized.hint("merge")
        .join(long_rows.hint("merge"), on=ITEM)
        .selectExpr(*keys, user, f"__nb_other AS {ITEM}")
        .join(long_rows.hint("merge"), on=[opts.user_col, ITEM])
        .select(*keys)
    )
    # The sizes ride along as grouping keys: the needed pairs are read once.
    return (
        from_short.unionByName(from_long)
        .groupBy(*keys)
        .agg(F.count(F.lit(1)).alias("__nb_both"))
        .selectExpr(LO, HI, f"__nb_both / sqrt(CAST(__nb_lo_users AS DOUBLE) * __nb_hi_users) AS {SIM}")
    )


def _cut_sums(position: str, value: str, opts: EvaluationOptions) -> List[str]:
    """Aggregates: the sum of ``value`` over the rows at ``position`` within each cutoff, in order."""
    return [
        f"coalesce(sum(CASE WHEN {position} <= {int(k)} THEN {value} END), 0.0D)"
        if k is not None
        else f"coalesce(sum(CASE WHEN {position} IS NOT NULL THEN {value} END), 0.0D)"
        for k in opts.cutoffs
    ]


def cooccurrence_sums(
    rows: DataFrame,
    history: DataFrame,
    per_item: DataFrame,
    keys: List[str],
    parts: Collection[str],
    opts: EvaluationOptions,
) -> DataFrame:
    """Per list, the sums over co-occurrence cosines within each cutoff: ``PAIR_SUMS`` (diversity:
    the cosines of the list's item pairs) and ``SEREN_SUMS`` (serendipity: Σ relevance × cosine(item,
    history item) over the list's items and the user's history; an item of the history is its own
    cosine 1), as ``parts`` ask (``pair_sums``, ``serendipity_sums``: the metrics' declared parts).

    Both kinds of pair meet the cosines in one join and are summed in one aggregation (a tag
    ``__nb_kind`` tells them apart). Only the items with a relevance other than 0 are paired with
    the history: the others add exactly 0.0 to every sum. A list without a pair of a kind gets 0.0
    for that kind's sums.
    """
    struct = "named_struct('kind', {kind}, 'p', {p}, 'w', {w}, 'lo', least({a}, {b}), 'hi', greatest({a}, {b}), 'same', {a} = {b})"
    kinds = []
    arrays = []
    if "pair_sums" in parts:
        pair = struct.format(kind=0, p="b.p", w="1.0D", a="a.i", b="b.i")
        kinds.append(0)
        arrays.append(f"flatten(transform({ATTRS}, a -> transform(filter({ATTRS}, b -> b.p > a.p), b -> {pair})))")
    if "serendipity_sums" in parts:
        pair = struct.format(kind=1, p="x.p", w="x.r", a="x.i", b="h")
        kinds.append(1)
        # A user without a history has no pair of this kind (an empty array, never a null one).
        arrays.append(
            f"flatten(transform(filter({ATTRS}, x -> x.r <> 0.0D AND {HISTORY} IS NOT NULL), "
            f"x -> transform({HISTORY}, h -> {pair})))"
        )
    # Both kinds from one pass over the lists: one array, exploded once.
    both = arrays[0] if len(arrays) == 1 else f"concat({', '.join(arrays)})"
    pairs = rows.selectExpr(*keys, f"explode({both}) AS __nb_pair").selectExpr(
        *keys,
        "__nb_pair.kind AS __nb_kind",
        "__nb_pair.p + 1 AS __nb_last",
        "__nb_pair.w AS __nb_w",
        f"__nb_pair.lo AS {LO}",
        f"__nb_pair.hi AS {HI}",
        "__nb_pair.same AS __nb_same",
    )
    needed = pairs.filter("NOT __nb_same").select(LO, HI).distinct()
    sims = cooccurrence(needed, history, per_item, opts)
    joined = pairs.hint("merge").join(sims.hint("merge"), on=[LO, HI], how="left")
    value = f"(__nb_w * CASE WHEN __nb_same THEN 1.0D ELSE coalesce({SIM}, 0.0D) END)"
    sums = []
    for kind, name in ((0, PAIR_SUMS), (1, SEREN_SUMS)):
        if kind in kinds:
            cut = ", ".join(_cut_sums(f"(CASE WHEN __nb_kind = {kind} THEN __nb_last END)", value, opts))
            sums.append(F.expr(f"array({cut})").alias(name))
    return joined.groupBy(*[F.col(c) for c in keys]).agg(*sums)
