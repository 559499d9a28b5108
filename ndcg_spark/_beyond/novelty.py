"""Popularity and what reads it: each item's popularity, self-information, surprisal weight and
head (:func:`item_table`), and the per-user metrics over them and over the user's history and
baseline: ``novelty``, ``popularity``, ``long_tail_share``, ``surprisal``, ``unseen_share`` and
``unexpectedness`` (:func:`metrics_at`).

Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond.columns import (
    BASELINE,
    CATEGORY,
    FEATURES,
    HEAD,
    HISTORY,
    POP,
    SELF_INFO,
    SURPRISAL,
    TIMES,
    UNIT,
    USERS,
    array_sum,
    share_of,
)
from ndcg_spark._beyond.similarity import unit
from ndcg_spark._columns import ITEM
from ndcg_spark._counts import RowCount, counted
from ndcg_spark._sql import ident
from ndcg_spark.options import EvaluationOptions


def seen_items(interactions: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """The interactions grouped once: per distinct (user, ``ITEM``), its rows ``TIMES``. Popularity,
    the histories and co-occurrence all read these rows (one shuffle of the interactions)."""
    user = ident(opts.user_col)
    return interactions.groupBy(F.col(user), F.col(ITEM)).agg(F.count(F.lit(1)).alias(TIMES))


def without_seen(recs: DataFrame, seen: DataFrame, opts: EvaluationOptions) -> Tuple[DataFrame, RowCount]:
    """The recommendations' rows (user, ``ITEM``, ...) less those whose item the user has in
    ``seen`` (:func:`seen_items`), and the rows before (counted as they pass): ``seen_items =
    "drop"``, the row accounting's rows set aside as seen."""
    before, count = counted(recs)
    kept = before.join(seen.select(F.col(ident(opts.user_col)), F.col(ITEM)), on=[opts.user_col, ITEM], how="left_anti")
    return kept, count


def item_table(
    seen: Optional[DataFrame], items: Optional[DataFrame], opts: EvaluationOptions
) -> Tuple[Optional[DataFrame], Optional[DataFrame], Optional[DataFrame]]:
    """Per item: ``POP`` (interaction rows), ``USERS`` (distinct users), ``SELF_INFO`` (-log2 of its
    share of the rows), ``SURPRISAL`` (RePlay's: log2(users / its users) / log2(users)), ``HEAD``, and
    the items table's ``CATEGORY`` and ``UNIT`` (the normalised features); one row of totals
    (``__nb_rows``, ``__nb_all_users``: the cold items' values read them); and the interacted
    items alone (``ITEM``, ``POP``, ``USERS``).

    ``seen``: :func:`seen_items`. The head: the fewest most popular items whose rows reach
    ``head_share`` of all, the items tied with the last of them included: every item at least as
    popular as that last one.
    """
    stats = totals = per_item = None
    if seen is not None:
        per_item = seen.groupBy(ITEM).agg(F.sum(TIMES).alias(POP), F.count(F.lit(1)).alias(USERS))
        totals = per_item.agg(F.sum(POP).cast("double").alias("__nb_rows")).crossJoin(
            seen.agg(F.countDistinct(F.col(ident(opts.user_col))).cast("double").alias("__nb_all_users"))
        )
        # The head's threshold from the distinct popularity values (a handful), largest first.
        by_value = per_item.groupBy(POP).agg((F.col(POP) * F.count(F.lit(1))).alias("__nb_mass"))
        running = by_value.selectExpr(
            POP,
            f"sum(__nb_mass) OVER (ORDER BY {POP} DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __nb_run",
        )
        threshold = (
            running.crossJoin(totals)
            .filter(f"__nb_run >= {float(opts.head_share)!r}D * __nb_rows")
            .agg(F.max(F.col(POP)).alias("__nb_head_pop"))
        )
        stats = per_item.crossJoin(F.broadcast(totals.crossJoin(threshold))).selectExpr(
            ITEM,
            POP,
            USERS,
            f"-log2(CAST({POP} AS DOUBLE) / __nb_rows) AS {SELF_INFO}",
            # One user in all: log2(1) = 0 over 0, no surprisal (RePlay's NaN); null, not a
            # division by zero under ANSI.
            f"CASE WHEN __nb_all_users > 1 THEN log2(__nb_all_users / {USERS}) / log2(__nb_all_users) ELSE 0.0D END AS {SURPRISAL}",
            f"{POP} >= __nb_head_pop AS {HEAD}",
        )
    if items is not None:
        catalog = items.selectExpr(ITEM, CATEGORY, f"{unit(FEATURES)} AS {UNIT}")
        if stats is None:
            stats = catalog
        else:
            stats = stats.join(catalog, on=ITEM, how="full")
    return stats, totals, per_item


def metrics_at(top: str, k: Optional[int], names: Sequence[str], opts: EvaluationOptions) -> Dict[str, str]:
    """SQL of each popularity metric of ``names`` at cutoff ``k``, from ``top`` (the list's
    positions within k, one struct each: the item ``i``, its self-information ``si``, surprisal
    weight ``sw``, popularity ``pop`` and head flag ``h``), ``HISTORY`` and ``BASELINE``."""
    n = f"size({top})"
    by_k = opts.short_lists == "k"
    out: Dict[str, str] = {}
    if "novelty" in names:
        out["novelty"] = share_of(array_sum(top, "x.si"), n, k, by_k)
    if "popularity" in names:
        out["popularity"] = share_of(array_sum(top, "CAST(x.pop AS DOUBLE)"), n, k, by_k)
    if "long_tail_share" in names:
        out["long_tail_share"] = share_of(f"CAST(size(filter({top}, x -> NOT x.h)) AS DOUBLE)", n, k, by_k)
    if "surprisal" in names:
        out["surprisal"] = share_of(array_sum(top, "x.sw"), n, k, by_k)
    if "unseen_share" in names:
        unseen = f"CAST(size(filter({top}, x -> NOT coalesce(array_contains({HISTORY}, x.i), false))) AS DOUBLE)"
        value = share_of(unseen, n, k, False)
        if opts.without_list == "scored":
            # RePlay's Novelty: a training user only; without a list, 1.0.
            value = f"(CASE WHEN {HISTORY} IS NOT NULL THEN {value} END)"
        out["unseen_share"] = value
    if "unexpectedness" in names:
        base = BASELINE if k is None else f"slice({BASELINE}, 1, {int(k)})"
        missing = "1.0D" if opts.without_baseline == "unexpected" else "0.0D"
        # 1 - the share shared with the baseline's top k: under short_lists = "k" the empty slots
        # of a short list count as unexpected, as RePlay's 1 - |R ∩ B| / k.
        shared = f"CAST(size(filter({top}, x -> array_contains({base}, x.i))) AS DOUBLE)"
        out["unexpectedness"] = (
            f"(CASE WHEN {n} = 0 THEN NULL WHEN {BASELINE} IS NULL THEN {missing} "
            f"ELSE 1.0D - {share_of(shared, n, k, by_k)} END)"
        )
    return out
