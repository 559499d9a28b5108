"""The summary's beyond-accuracy columns: per segment and k, ``mean_<name>`` with its normal 95%
interval for each per-user metric (the interval :mod:`ndcg_spark._summary` gives NDCG's), then
the global figures."""

from __future__ import annotations

from typing import Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._sql import ident
from ndcg_spark._summary import join_null_safe, normal_interval
from ndcg_spark.options import BEYOND_PER_USER, EvaluationOptions


def summary(
    summary_rows: DataFrame,
    scored: DataFrame,
    globals_: Optional[DataFrame],
    names: Sequence[str],
    opts: EvaluationOptions,
) -> DataFrame:
    """The summary with, per segment and k, ``mean_<name>`` and ``<name>_ci_low`` / ``<name>_ci_high``
    (normal 95% interval, null under two users) for each per-user metric, over the users with a
    value; then the global figures. ``mean_novelty`` under ``novelty_weighting = "recommendation"``
    is the mean over every recommendation (no interval)."""
    keys = [c for c in (*opts.group_by, "k")]
    aggregates = []
    for name in [n for n in names if n in BEYOND_PER_USER]:
        if name == "novelty" and opts.novelty_weighting == "recommendation":
            length = "CAST(CASE WHEN k IS NULL THEN n_recommended ELSE least(k, n_recommended) END AS DOUBLE)"
            den = length if opts.short_lists == "list_length" else "CAST(coalesce(k, n_recommended) AS DOUBLE)"
            aggregates += [
                f"sum(novelty * {den}) / sum(CASE WHEN novelty IS NOT NULL THEN {length} END) AS mean_novelty",
                "CAST(NULL AS DOUBLE) AS novelty_ci_low",
                "CAST(NULL AS DOUBLE) AS novelty_ci_high",
            ]
            continue
        low, high = normal_interval(f"avg({name})", f"stddev_samp({name})", f"count({name})")
        aggregates += [f"avg({name}) AS mean_{name}", f"{low} AS {name}_ci_low", f"{high} AS {name}_ci_high"]
    out = summary_rows
    if aggregates:
        means = scored.groupBy(*[F.col(ident(c)) for c in keys]).agg(*[F.expr(a) for a in aggregates])
        out = join_null_safe(out, means, keys, "left")
    if globals_ is not None:
        out = join_null_safe(out, globals_, keys, "left")
    ordered = [F.col(ident(c)).asc_nulls_last() for c in keys]
    return out.coalesce(1).sortWithinPartitions(*ordered)
