"""The summary's beyond-accuracy columns: per segment and k, ``mean_<name>`` with its normal 95%
interval for each per-user metric (the interval :mod:`ndcg_spark._stages.summary` gives NDCG's), then
the global figures."""

from __future__ import annotations

from typing import List, Optional, Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._metrics import registry
from ndcg_spark._metrics.registry import PerUser
from ndcg_spark._spark.sql import alias_of, ident, join_null_safe, normal_interval
from ndcg_spark.options import EvaluationOptions


def aggregates(names: Sequence[str], opts: EvaluationOptions) -> List[str]:
    """The aggregates (SQL ``expression AS name``) :func:`summary` reads, per segment and k over
    the per-user rows: NDCG's summary computes them in its own pass (one pass over the per-user
    rows, not two)."""
    out = []
    for metric in _asked(names):
        name, how = metric.name, metric.aggregation(opts)
        out.append(f"{how.mean(name, opts)} AS mean_{name}")
        if how.interval:
            out += [f"stddev_samp({name}) AS __nb_std_{name}", f"count({name}) AS __nb_count_{name}"]
    return out


def _asked(names: Sequence[str]) -> List[PerUser]:
    """The declarations of the per-user metrics of ``names``, in the registry's order."""
    return [m for m in registry.per_user() if m.name in names]


def summary(
    summary_rows: DataFrame,
    globals_: Optional[DataFrame],
    names: Sequence[str],
    opts: EvaluationOptions,
) -> DataFrame:
    """The summary with, per segment and k, ``mean_<name>`` and ``<name>_ci_low`` / ``<name>_ci_high``
    (normal 95% interval, null under two users) for each per-user metric, over the users with a
    value, as its declaration aggregates it (``mean_novelty`` under ``novelty_weighting =
    "recommendation"`` is the mean over every recommendation, without an interval); then the global
    figures.

    ``summary_rows``: NDCG's summary with the columns of :func:`aggregates` last.
    """
    keys = [c for c in (*opts.group_by, "k")]
    own = [alias_of(a) for a in aggregates(names, opts)]
    columns = [ident(c) for c in summary_rows.columns if c not in own]
    for metric in _asked(names):
        name = metric.name
        if not metric.aggregation(opts).interval:
            columns += [
                f"mean_{name}",
                f"CAST(NULL AS DOUBLE) AS {name}_ci_low",
                f"CAST(NULL AS DOUBLE) AS {name}_ci_high",
            ]
            continue
        low, high = normal_interval(f"mean_{name}", f"__nb_std_{name}", f"__nb_count_{name}")
        columns += [f"mean_{name}", f"{low} AS {name}_ci_low", f"{high} AS {name}_ci_high"]
    out = summary_rows.selectExpr(*columns)
    if globals_ is not None:
        out = join_null_safe(out, globals_, keys, "left")
    ordered = [F.col(ident(c)).asc_nulls_last() for c in keys]
    return out.coalesce(1).sortWithinPartitions(*ordered)
