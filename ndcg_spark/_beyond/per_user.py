"""The per-user metrics: one row per (list, k) with each asked metric (:func:`per_list`), joined
onto the scored rows (:func:`attach`).

Each list is exploded once to meet the per-item table (:func:`ndcg_spark._beyond.novelty.item_table`)
and regrouped as one array of structs, position by position; the per-user tables (history,
baseline list) meet the lists on the user, as they are partitioned already. Each metric is
Spark SQL over that array (higher-order functions, no UDF), as its declaration writes it
(:mod:`ndcg_spark._metrics.beyond`); the array's fields and the row's columns are computed as the
declarations' ``parts`` ask.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._beyond import novelty, similarity
from ndcg_spark._beyond.columns import (
    ATTRS,
    BASELINE,
    CATEGORY,
    HAS_HISTORY,
    HEAD,
    POP,
    POS,
    UNIT,
    cutoff_sql,
    unpacked,
)
from ndcg_spark._metrics import registry
from ndcg_spark._spark.sql import ident, join_null_safe, string_literal
from ndcg_spark._stages.column_contract import EXCLUDED, ITEM, ITEMS, JUDGED_ITEMS, JUDGED_RELEVANCE, SEGMENT, list_keys
from ndcg_spark.options import EvaluationOptions


def _metrics_at(k: Optional[int], names: Sequence[str], opts: EvaluationOptions) -> Dict[str, str]:
    """SQL of each per-user metric of ``names`` at cutoff ``k``, as declared
    (:attr:`~ndcg_spark._metrics.registry.PerUser.sql`), from the row's arrays (``ATTRS``: one struct
    per position; ``HISTORY``; ``BASELINE``; the co-occurrence sums ``PAIR_SUMS`` / ``SEREN_SUMS``)."""
    top = ATTRS if k is None else f"slice({ATTRS}, 1, {int(k)})"
    return {m.name: m.sql(top, k, opts) for m in registry.per_user() if m.name in names}


def per_list(
    lists: DataFrame,
    judged: DataFrame,
    stats: Optional[DataFrame],
    totals: Optional[DataFrame],
    history: Optional[DataFrame],
    baseline: Optional[DataFrame],
    names: Sequence[str],
    opts: EvaluationOptions,
    per_item: Optional[DataFrame] = None,
) -> DataFrame:
    """One row per (list, k): the list's keys (``SEGMENT`` packed, or the segment columns), ``k``
    and each per-user metric of ``names``.

    ``lists``: the ranked lists (keys, ``ITEMS``); ``judged``: the judged lists on the same keys;
    ``history``: :func:`history_table`; ``baseline``: the baseline's ranked lists on the user;
    ``per_item``: each item's users, for co-occurrence (with the histories:
    :func:`ndcg_spark._beyond.similarity.cooccurrence`).
    """
    names = [n for n in names if n in registry.per_user_names()]
    parts = registry.parts(names, opts)
    keys = list_keys(lists.columns, opts)  # quoted, for SQL text
    raw = [c for c in (SEGMENT, *opts.group_by, opts.user_col) if c in lists.columns]  # for joins
    user = ident(opts.user_col)
    k_max = opts.largest_k
    items = ITEMS if k_max is None else f"slice({ITEMS}, 1, {int(k_max)})"
    exploded = lists.selectExpr(*keys, f"posexplode({items}) AS ({POS}, {ITEM})")
    if totals is not None:
        exploded = exploded.crossJoin(F.broadcast(totals))
    if stats is not None:
        exploded = exploded.join(stats, on=ITEM, how="left")
    cols = set(exploded.columns)

    def col(name: str, default: str) -> str:
        return name if name in cols else default

    # A cold item (in no interaction): popularity 0, its self-information as if seen once (or 0
    # under cold_items = "zero", as Recommenders' inner join), surprisal 1 (RePlay), in the tail.
    # Self-information and surprisal are computed here, from the one row of totals joined once.
    attrs = (
        f"named_struct('p', {POS}, 'i', {ITEM}, "
        f"'si', {novelty.self_info(opts) if totals is not None else 'CAST(NULL AS DOUBLE)'}, "
        f"'sw', {novelty.surprisal() if totals is not None else '1.0D'}, "
        f"'pop', coalesce({col(POP, 'CAST(NULL AS BIGINT)')}, 0L), "
        f"'h', coalesce({col(HEAD, 'CAST(NULL AS BOOLEAN)')}, false), "
        f"'c', {col(CATEGORY, 'CAST(NULL AS STRING)')}, "
        f"'f', {col(UNIT, 'CAST(NULL AS array<double>)')}, "
        "'r', 0.0D)"
    )
    grouped = exploded.groupBy(*[F.col(c) for c in keys]).agg(
        F.expr(
            f"array_sort(collect_list({attrs}), (a, b) -> CASE WHEN a.p < b.p THEN -1 WHEN a.p > b.p THEN 1 ELSE 0 END)"
        ).alias(ATTRS)
    )
    rows = grouped
    if "relevance" in parts:
        # The item's judged relevance (the largest, were it judged twice), 0 when not judged.
        relevance = (
            f"coalesce(array_max(transform({JUDGED_ITEMS}, (j, n) -> CASE WHEN j = x.i THEN "
            f"{JUDGED_RELEVANCE}[n] END)), 0.0D)"
        )
        rows = rows.join(judged.select(*[F.col(c) for c in keys], JUDGED_ITEMS, JUDGED_RELEVANCE), on=raw, how="left")
        rows = rows.selectExpr(
            *keys,
            f"transform({ATTRS}, x -> named_struct('p', x.p, 'i', x.i, 'si', x.si, 'sw', x.sw, 'pop', x.pop, 'h', x.h, 'c', x.c, 'f', x.f, 'r', {relevance})) AS {ATTRS}",
        )
    if history is not None and "history" in parts:
        rows = rows.join(history, on=opts.user_col, how="left")
    if baseline is not None:
        rows = rows.join(baseline.selectExpr(user, f"{ITEMS} AS {BASELINE}"), on=opts.user_col, how="left")
    if {"pair_sums", "serendipity_sums"} & parts:
        sums = similarity.cooccurrence_sums(rows, history, per_item, keys, parts, opts)
        rows = rows.join(sums, on=raw, how="left")
    per_k = [
        f"named_struct('k', {cutoff_sql(k)}, "
        + ", ".join(
            f"{string_literal(name)}, CAST({sql} AS DOUBLE)" for name, sql in _metrics_at(k, names, opts).items()
        )
        + ")"
        for k in opts.cutoffs
    ]
    return rows.selectExpr(*keys, f"inline(array({', '.join(per_k)}))")


def attach(
    scored: DataFrame, metrics: DataFrame, history: Optional[DataFrame], names: Sequence[str], opts: EvaluationOptions
) -> DataFrame:
    """The scored rows with each per-user metric of ``names`` (null for a user without a list).

    Under ``without_list = "scored"`` (RePlay's Novelty, which scores every training user),
    ``unseen_share`` is 1.0 for a user with interactions and no list; a user with interactions
    only (neither a list nor relevance rows) gets rows of its own, left out of NDCG (``EXCLUDED``)
    as a user NDCG never saw. Without segments of the recommendations only: with them, such a
    user belongs to no segment.
    """
    names = [n for n in names if n in registry.per_user_names()]
    metrics = unpacked(metrics)
    keys = [c for c in (*opts.group_by, opts.user_col) if c in metrics.columns] + ["k"]
    out = join_null_safe(scored, metrics, keys, "left")
    if "unseen_share" in names and opts.without_list == "scored" and history is not None:
        user = ident(opts.user_col)
        users = history.selectExpr(user, f"true AS {HAS_HISTORY}")
        if len(keys) == 2:
            seen = out.select(user).distinct()
            cutoffs = ", ".join(cutoff_sql(k) for k in opts.cutoffs)
            only = users.join(seen, on=opts.user_col, how="left_anti").selectExpr(
                user, f"explode(array({cutoffs})) AS k"
            )
            out = out.unionByName(only.selectExpr(*[_filler(f, opts) for f in out.schema.fields]))
        out = out.join(users, on=opts.user_col, how="left").selectExpr(
            *[ident(c) for c in out.columns if c != "unseen_share"],
            f"CASE WHEN unseen_share IS NULL AND {HAS_HISTORY} THEN 1.0D ELSE unseen_share END AS unseen_share",
        )
    return out


def _filler(field: T.StructField, opts: EvaluationOptions) -> str:
    """SQL: a scored column's value for a user with interactions only (no list, no relevance)."""
    if field.name in (opts.user_col, "k"):
        return ident(field.name)
    if field.name == EXCLUDED:
        return f"true AS {EXCLUDED}"
    kind = field.dataType
    if isinstance(kind, T.BooleanType):
        value = "false"
    elif isinstance(kind, (T.IntegerType, T.LongType)):
        value = "0"
    elif field.name in ("cg", "dcg", "idcg", "ndcg"):
        value = "0.0D"
    else:
        value = "NULL"
    return f"CAST({value} AS {kind.simpleString()}) AS {ident(field.name)}"
