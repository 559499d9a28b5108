"""Ranked lists: each user's top k recommendations, in position order.

Reads the narrowed recommendations (segments, user, ``ITEM``, ``ORDER``) and gives one row per
list (segments, user) with these columns of the contract (:mod:`ndcg_spark._stages.column_contract`):

=====================  ==================================================================
``ITEMS``              array: the items in position order, the first largest k (with ties
                       not broken by item, whole tied groups past it)
``ORDERS``             array: their ordering keys (with a rank column, or ties not broken by item)
``RANKED_REPEATS``     int: how many of the items repeat an earlier one
=====================  ==================================================================

Positions come from ``row_number()`` over the ordering key, then the item (ascending, or
descending with ``tie_break = "item_descending"``, as trec_eval): the documented tie-break, so
the same input gives the same lists on any partitioning. The window holds ``row_number()`` alone
and is cut at the largest k, which Spark turns into a per-partition top k (``WindowGroupLimit``)
before the shuffle: only the top k of each list is shuffled.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._spark.counts import RowCount, counted
from ndcg_spark._spark.sql import has_repeats, repeat_count
from ndcg_spark._stages.column_contract import ITEM, ITEMS, ORDER, ORDERS, RANKED_REPEATS, list_keys, positions_as_given
from ndcg_spark._stages.rules import RANK_TIE, guard_lists
from ndcg_spark.options import EvaluationOptions

# Columns of the rows inside this stage.
POSITION = "__ndcg_position"
TIE_RANK = "__ndcg_tie_rank"


def ranked_lists(recs: DataFrame, opts: EvaluationOptions, entered: Optional[RowCount] = None) -> DataFrame:
    """One row per list: the top-k items in position order, and how many repeat (see the module).

    ``entered`` counts the rows that enter the ranking: those less the rows the lists hold
    are the rows beyond the largest k (the row accounting), counted on this very pass.

    With a rank column and ``on_invalid_rows = "error"`` one row more than the largest k is
    read, so that two items sharing the rank at the cut (one in, one out) stop the run too;
    tie averaging keeps whole tied groups already.
    """
    k = opts.largest_k
    if entered is not None:
        recs, _ = counted(recs, entered)
    if opts.ideal == "candidates":
        # The ideal list is read from every recommended item, so the whole list is kept; the
        # scoring cuts the recommended side at k.
        k = None
    if positions_as_given(opts):
        # The given ranks are the positions: the cut is on the rank itself (gaps count), and every
        # row within it is collected, so a rank tie among them stops the run as usual.
        positioned = recs.transform(with_position, opts)
        cut = positioned if k is None else positioned.filter(f"{ORDER} <= {int(k)}")
        return cut.transform(collect_lists, opts)
    peek = bool(opts.rank_col) and opts.on_invalid_rows == "error" and k is not None and opts.ties == "item"
    return (
        recs.transform(with_position, opts)
        .transform(filter_top_k, k + 1 if peek else k)
        .transform(collect_lists, opts, keep=k if peek else None)
    )


def with_position(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Add each recommendation's 1-based position in its list (:data:`POSITION`).

    With tie averaging (or the worst order of ties) also :data:`TIE_RANK`, ``rank()`` over the
    ordering key alone: a whole tied group stays at the cutoff, since its mean gain (or its order)
    needs every member.
    """
    item_order = "ASC" if opts.tie_break == "item_ascending" else "DESC"
    by_list = "PARTITION BY " + ", ".join(list_keys(df.columns, opts))
    columns = [f"row_number() OVER ({by_list} ORDER BY {ORDER} ASC NULLS LAST, {ITEM} {item_order}) AS {POSITION}"]
    if opts.ties != "item":
        columns.append(f"rank() OVER ({by_list} ORDER BY {ORDER} ASC NULLS LAST) AS {TIE_RANK}")
    return df.selectExpr("*", *columns)


def filter_top_k(df: DataFrame, k: Optional[int]) -> DataFrame:
    """Keep positions 1..k (everything when ``k`` is None); with tie averaging, whole tied groups."""
    if k is None:
        return df
    by = TIE_RANK if TIE_RANK in df.columns else POSITION
    return df.filter(f"{by} <= {int(k)}")


def collect_lists(ranked: DataFrame, opts: EvaluationOptions, keep: Optional[int] = None) -> DataFrame:
    """One row per list from positioned rows: ``ITEMS``, ``ORDERS`` and ``RANKED_REPEATS``.

    The lists are collected as arrays of primitives (a list of structs costs about twice as
    much to aggregate). collect_list order is not defined after a shuffle, so the positions are
    collected alongside and checked against 1..n; only a list that arrives out of order pays
    for an explicit sort by position. With a rank column and ``on_invalid_rows = "error"`` a
    rank held by two of the collected rows stops the run (the rank-tie rule); the lists are then
    cut to their first ``keep`` (all when None).
    """
    keep_order = bool(opts.rank_col) or opts.ties != "item"
    positions, items, orders = "__ndcg_positions", "__ndcg_items_raw", "__ndcg_orders_raw"
    collected = [F.expr(f"collect_list({POSITION}) AS {positions}"), F.expr(f"collect_list({ITEM}) AS {items}")]
    if keep_order:
        collected.append(F.expr(f"collect_list({ORDER}) AS {orders}"))
    in_order = f"{positions} = sequence(1, size({positions}))"
    by_position = f"sort_array(arrays_zip({positions}, {items}{f', {orders}' if keep_order else ''}))"
    ordered = [f"CASE WHEN {in_order} THEN {items} ELSE {by_position}.{items} END AS {ITEMS}"]
    if keep_order:
        ordered.append(f"CASE WHEN {in_order} THEN {orders} ELSE {by_position}.{orders} END AS {ORDERS}")
    keys = list_keys(ranked.columns, opts)
    lists = ranked.groupBy(*[F.col(c) for c in keys]).agg(*collected).selectExpr(*keys, *ordered)
    if opts.rank_col and opts.on_invalid_rows == "error":
        lists = guard_lists(lists, RANK_TIE, has_repeats(ORDERS), opts)
    if keep is None:
        items, orders = ITEMS, ORDERS
    else:
        items, orders = f"slice({ITEMS}, 1, {int(keep)})", f"slice({ORDERS}, 1, {int(keep)})"
    return lists.selectExpr(
        *keys,
        f"{items} AS {ITEMS}",
        *([f"{orders} AS {ORDERS}"] if keep_order else []),
        f"{repeat_count(items)} AS {RANKED_REPEATS}",
    )
