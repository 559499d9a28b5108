"""Popularity and what reads it: each item's popularity, self-information, surprisal weight and
head (:func:`item_table`), as the per-user metrics' declarations ask for them (their ``parts``;
their SQL is :mod:`ndcg_spark._metrics.beyond`'s).

Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""

from __future__ import annotations

from typing import Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond.columns import CATEGORY, FEATURES, HEAD, POP, TIMES, UNIT, USERS
from ndcg_spark._beyond.similarity import unit
from ndcg_spark._metrics import registry
from ndcg_spark._spark.counts import RowCount, counted
from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.column_contract import ITEM
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
    seen: Optional[DataFrame], items: Optional[DataFrame], names: Sequence[str], opts: EvaluationOptions
) -> Tuple[Optional[DataFrame], Optional[DataFrame], Optional[DataFrame]]:
    """Per item, what the per-user metrics ``names`` read of it (their declared ``parts``): ``POP`` (interaction rows) and
    ``USERS`` (distinct users), ``HEAD``, and the items table's ``CATEGORY`` and ``UNIT`` (the
    normalised features); one row of totals (``__nb_rows``, ``__nb_all_users``: self-information
    and surprisal read them, :func:`self_info` and :func:`surprisal`, where the lists meet the
    items); and the interacted items alone (``ITEM``, ``POP``, ``USERS``: co-occurrence, exposure
    and the row accounting read them).

    ``seen``: :func:`seen_items`. The head: the fewest most popular items whose rows reach
    ``head_share`` of all, the items tied with the last of them included: every item at least as
    popular as that last one. The interactions are aggregated per item once and for the totals
    once; the head's threshold is read from the distinct popularity values of the per-item rows, not
    from aggregates crossJoined, each re-reading the interactions. A part no metric of ``names`` reads
    is left out, so Spark neither plans nor runs it.
    """
    stats = totals = per_item = None
    wanted = registry.parts(names, opts)
    if seen is not None:
        per_item = seen.groupBy(ITEM).agg(F.sum(TIMES).alias(POP), F.count(F.lit(1)).alias(USERS))
    if per_item is not None and {"self_information", "surprisal_weight"} & wanted:
        # One aggregate of the interactions' rows, one row: joined once, onto the lists' items.
        totals = seen.agg(
            F.sum(TIMES).cast("double").alias("__nb_rows"),
            F.countDistinct(F.col(ident(opts.user_col))).cast("double").alias("__nb_all_users"),
        )
    if per_item is not None and {"self_information", "surprisal_weight", "popularity", "head"} & wanted:
        stats = per_item
    if stats is not None and "head" in wanted:
        # The head's threshold from the distinct popularity values (a handful, where a window
        # over the items would sort the whole catalog in one task), largest first: the least
        # popularity whose running sum of rows reaches head_share of all (tied items together).
        by_value = per_item.groupBy(POP).agg((F.col(POP) * F.count(F.lit(1))).alias("__nb_mass"))
        threshold = (
            by_value.selectExpr(
                POP,
                f"sum(__nb_mass) OVER (ORDER BY {POP} DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __nb_run",
                "CAST(sum(__nb_mass) OVER () AS DOUBLE) AS __nb_all_rows",
            )
            .filter(f"__nb_run >= {float(opts.head_share)!r}D * __nb_all_rows")
            .agg(F.max(F.col(POP)).alias("__nb_head_pop"))
        )
        stats = per_item.crossJoin(F.broadcast(threshold)).selectExpr(
            ITEM, POP, USERS, f"{POP} >= __nb_head_pop AS {HEAD}"
        )
    if items is not None and {"category", "features"} & wanted:
        catalog = items.selectExpr(ITEM, CATEGORY, f"{unit(FEATURES)} AS {UNIT}")
        if stats is None:
            stats = catalog
        else:
            stats = stats.join(catalog, on=ITEM, how="full")
    return stats, totals, per_item


def self_info(opts: EvaluationOptions) -> str:
    """SQL: an item's self-information, -log2 of its share of the interaction rows (``POP`` over
    ``__nb_rows``); a cold item's (no ``POP``) as if seen once, or 0 under ``cold_items = "zero"``
    (Recommenders' inner join)."""
    cold = "-log2(1.0D / nullif(__nb_rows, 0.0D))" if opts.cold_items == "once" else "0.0D"
    return f"coalesce(-log2(CAST({POP} AS DOUBLE) / __nb_rows), {cold})"


def surprisal() -> str:
    """SQL: an item's surprisal weight, RePlay's log2(users / its ``USERS``) / log2(users); a cold
    item's 1."""
    # One user in all: log2(1) = 0 over 0, no surprisal (RePlay's NaN); 0, not a division by
    # zero under ANSI.
    weight = f"CASE WHEN __nb_all_users > 1 THEN log2(__nb_all_users / {USERS}) / log2(__nb_all_users) ELSE 0.0D END"
    return f"CASE WHEN {USERS} IS NULL THEN 1.0D ELSE {weight} END"
