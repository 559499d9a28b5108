"""Exposure and the global figures: how often each item is recommended within each cutoff
(:func:`exposure`), the catalog it is measured against (:func:`catalog_flags`), and per
segment and k ``catalog_coverage``, ``distributional_coverage`` and ``gini_index``
(:func:`global_figures`).
"""

from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond.columns import COUNT, POS, cutoff_sql
from ndcg_spark._metrics import registry
from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.column_contract import ITEM, ITEMS
from ndcg_spark.options import EvaluationOptions


def exposure(lists: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """How often each item is recommended within each cutoff: segment columns, ``k``, ``ITEM``, ``COUNT``.

    ``lists``: the ranked lists, segments unpacked (user attributes joined when segments live there).
    """
    segments = [ident(c) for c in opts.group_by if c in lists.columns]
    k_max = opts.largest_k
    items = ITEMS if k_max is None else f"slice({ITEMS}, 1, {int(k_max)})"
    cutoffs = ", ".join(cutoff_sql(k) for k in opts.cutoffs)
    rows = lists.selectExpr(*segments, f"posexplode({items}) AS ({POS}, {ITEM})").selectExpr(
        *segments, ITEM, f"explode(filter(array({cutoffs}), c -> c IS NULL OR {POS} < c)) AS k"
    )
    return rows.groupBy(*[F.col(c) for c in segments], F.col("k"), F.col(ITEM)).agg(F.count(F.lit(1)).alias(COUNT))


def catalog_flags(listed: DataFrame, interacted: Optional[DataFrame], items: Optional[DataFrame]) -> DataFrame:
    """Per item that any table names: ``__nb_in_catalog`` (the catalog: the items table, else the
    items of the interactions and of the lists) and ``__nb_interacted``.

    ``interacted``: the interactions' items, one row each (:func:`ndcg_spark._beyond.novelty.item_table`).
    """
    inter = interacted.selectExpr(ITEM, "true AS __nb_interacted") if interacted is not None else None
    if items is not None:
        catalog = items.selectExpr(ITEM, "true AS __nb_in_catalog")
    else:
        parts = [listed.select(ITEM)] + ([interacted.select(ITEM)] if interacted is not None else [])
        union = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        catalog = union.distinct().selectExpr(ITEM, "true AS __nb_in_catalog")
    flags = catalog if inter is None else catalog.join(inter, on=ITEM, how="full")
    if inter is None:
        flags = flags.selectExpr("*", "false AS __nb_interacted")
    return flags.selectExpr(
        ITEM,
        "coalesce(__nb_in_catalog, false) AS __nb_in_catalog",
        "coalesce(__nb_interacted, false) AS __nb_interacted",
    )


def global_figures(exposed: DataFrame, flags: DataFrame, names: Sequence[str], opts: EvaluationOptions) -> DataFrame:
    """Per segment and k: ``catalog_coverage``, ``distributional_coverage`` (bits) and ``gini_index``
    (over the whole catalog, the items never recommended included; Shani and Gunawardana)."""
    segments = [ident(c) for c in opts.group_by if c in exposed.columns]
    sizes = flags.agg(
        F.sum(F.col("__nb_in_catalog").cast("long")).cast("double").alias("__nb_catalog"),
        F.sum(F.col("__nb_interacted").cast("long")).cast("double").alias("__nb_interacted_items"),
    )
    group = ", ".join([*segments, "k"])
    rows = (
        exposed.join(flags, on=ITEM, how="left")
        .crossJoin(F.broadcast(sizes))
        .selectExpr(
            *segments,
            "k",
            COUNT,
            "coalesce(__nb_in_catalog, false) AS __nb_in_catalog",
            "coalesce(__nb_interacted, false) AS __nb_interacted",
            "__nb_catalog",
            "__nb_interacted_items",
            f"CAST(sum({COUNT}) OVER (PARTITION BY {group}) AS DOUBLE) AS __nb_total",
        )
        .selectExpr(
            "*",
            f"CAST(sum(CASE WHEN __nb_in_catalog THEN {COUNT} END) OVER (PARTITION BY {group}) AS DOUBLE) AS __nb_catalog_total",
            f"count(CASE WHEN __nb_in_catalog THEN 1 END) OVER (PARTITION BY {group}) AS __nb_catalog_exposed",
            f"CASE WHEN __nb_in_catalog THEN row_number() OVER (PARTITION BY {group}, __nb_in_catalog ORDER BY {COUNT} ASC) END AS __nb_rank",
        )
    )
    coverage = {
        # An empty catalog (no interaction rows) has no coverage: null, not a division by zero.
        "catalog": "count(CASE WHEN __nb_in_catalog THEN 1 END) / nullif(first(__nb_catalog), 0.0D)",
        "recommended_over_interactions": "count(1) / nullif(first(__nb_interacted_items), 0.0D)",
        "interacted_over_interactions": "count(CASE WHEN __nb_interacted THEN 1 END) / nullif(first(__nb_interacted_items), 0.0D)",
    }[opts.coverage_catalog]
    # j = the item's place among the whole catalog sorted by exposure ascending: the items never
    # recommended (exposure 0) come first.
    j = "(__nb_catalog - __nb_catalog_exposed + __nb_rank)"
    gini = (
        f"sum(CASE WHEN __nb_in_catalog THEN (2.0D * {j} - __nb_catalog - 1.0D) * ({COUNT} / __nb_catalog_total) END) "
        "/ (first(__nb_catalog) - 1.0D)"
    )
    figures = {
        "catalog_coverage": coverage,
        "distributional_coverage": f"-sum(({COUNT} / __nb_total) * log2({COUNT} / __nb_total))",
        "gini_index": f"CASE WHEN first(__nb_catalog) > 1 THEN {gini} END",
    }
    wanted = [n for n in registry.global_names() if n in names]
    return rows.groupBy(*[F.col(c) for c in segments], F.col("k")).agg(
        *[F.expr(f"CAST({figures[n]} AS DOUBLE)").alias(n) for n in wanted]
    )


#: The most points of the report's exposure curve: popularity ranks are put in at most this many bins.
CURVE_BINS = 100


def exposure_curve(exposed: DataFrame, flags: DataFrame, per_item: DataFrame, k: Optional[int]) -> DataFrame:
    """The exposure curve at cutoff ``k``, catalog-wide (every segment's lists together): the
    catalog's items ranked by popularity in the interactions (rows, most first; ties by item
    ascending; a cold item has 0), the ranks cut in at most :data:`CURVE_BINS` equal bins, and
    per bin its ranks, items, share of the recommendations within k (``exposure_share``) and
    share of the interactions (``interaction_share``).

    At most :data:`CURVE_BINS` rows, whatever the catalog's size: what the report draws. The
    ranking is one window over the catalog's items (one row each, never per user).

    ``exposed``: :func:`exposure`; ``flags``: :func:`catalog_flags` (the catalog: the items
    table, else the items of the interactions and of the lists); ``per_item``: each interacted
    item's rows ``__nb_pop`` (:func:`ndcg_spark._beyond.novelty.item_table`).
    """
    at_k = exposed.filter(F.col("k").eqNullSafe(F.lit(k))).groupBy(ITEM).agg(F.sum(COUNT).alias(COUNT))
    popularity = per_item.select(ITEM, "__nb_pop")
    catalog = flags.filter("__nb_in_catalog").select(ITEM).unionByName(at_k.select(ITEM)).distinct()
    ranked = (
        catalog.join(popularity, on=ITEM, how="left")
        .join(at_k, on=ITEM, how="left")
        .selectExpr(
            "coalesce(__nb_pop, 0L) AS __nb_pop",
            f"coalesce({COUNT}, 0L) AS {COUNT}",
            f"row_number() OVER (ORDER BY coalesce(__nb_pop, 0L) DESC, {ITEM} ASC) AS rank",
        )
        .selectExpr(
            "*",
            "count(1) OVER () AS __nb_items",
            f"sum({COUNT}) OVER () AS __nb_exposure",
            "sum(__nb_pop) OVER () AS __nb_rows",
        )
    )
    bin_of = f"CAST(floor((rank - 1) * {CURVE_BINS} / __nb_items) AS INT)"
    return (
        ranked.selectExpr("*", f"{bin_of} AS bin")
        .groupBy("bin")
        .agg(
            F.min("rank").alias("first_rank"),
            F.max("rank").alias("last_rank"),
            F.count(F.lit(1)).alias("items"),
            F.expr(f"CAST(sum({COUNT}) AS DOUBLE) / nullif(first(__nb_exposure), 0)").alias("exposure_share"),
            F.expr("CAST(sum(__nb_pop) AS DOUBLE) / nullif(first(__nb_rows), 0)").alias("interaction_share"),
        )
        .coalesce(1)
        .sortWithinPartitions("bin")
    )
