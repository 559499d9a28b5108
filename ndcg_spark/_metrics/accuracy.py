"""The accuracy metrics: each figure of a user's list declared once, and what every output calls it.

A :class:`~ndcg_spark._metrics.registry.Metric` names its per-user column, its column in the
summary (the mean over the included users), and its header in the job's console table. The companion metrics (``companion_metrics =
True``) also carry their per-user SQL, written from the hits within the cutoff; scoring,
the summary, the report pages, the console and the MLflow metrics all iterate :data:`COMPANIONS`,
so a new companion metric is one entry here. NDCG, DCG and CG are summed term by term in
:mod:`ndcg_spark._stages.scoring`, so they carry no SQL of their own.

:data:`COMPARISON_COLUMNS` is the same for ``compare``: its figures per segment and k, in the order
the report and the console show them.
"""

from __future__ import annotations

from typing import Dict

from ndcg_spark._metrics import registry
from ndcg_spark._metrics.registry import Cut, EvaluationOptions, Metric


def _precision(c: Cut) -> str:
    # As trec_eval's P_k: divided by k even for a shorter list.
    return f"coalesce({c.hits} / CASE WHEN {c.cut} > 0 THEN CAST({c.cut} AS DOUBLE) END, 0.0D)"


def _recall(c: Cut) -> str:
    return f"coalesce({c.hits} / {c.relevant}, 0.0D)"


def _average_precision(c: Cut) -> str:
    # As trec_eval's map_cut_k: the precisions at the hits, over every relevant judged item.
    return f"coalesce({c.precisions} / {c.relevant}, 0.0D)"


def _reciprocal_rank(c: Cut) -> str:
    return f"coalesce(1.0D / {c.first}, 0.0D)"


def _hit(c: Cut) -> str:
    return f"CASE WHEN {c.hits} > 0 THEN 1.0D ELSE 0.0D END"


#: The metrics every evaluation computes, in the summary's order.
CORE = (
    Metric("ndcg", "mean_ndcg", "mean_ndcg"),
    Metric("dcg", "mean_dcg", "mean_dcg"),
    Metric("cg", None, "cg"),
)

#: The companion metrics (``companion_metrics = True``), per (list, k), in every output's order.
COMPANIONS = (
    Metric("precision", "mean_precision", "precision", _precision),
    Metric("recall", "mean_recall", "recall", _recall),
    Metric("ap", "mean_ap", "ap", _average_precision),
    Metric("rr", "mean_rr", "rr", _reciprocal_rank),
    Metric("hit", "hit_rate", "hit_rate", _hit),
)

#: The summary's figures per segment and k after ``k``, as the console and the report show
#: them: (column, header); the companions' columns follow when they were computed.
SUMMARY_COLUMNS = (
    ("users", "users"),
    ("mean_ndcg", "mean_ndcg"),
    ("ndcg_ci_low", "ci_low"),
    ("ndcg_ci_high", "ci_high"),
    ("mean_dcg", "mean_dcg"),
    ("std_ndcg", "std_ndcg"),
    ("users_zero_idcg", "zero_idcg"),
    ("users_without_recommendations", "no_recs"),
    ("users_without_relevance", "no_relevance"),
    ("users_excluded", "excluded"),
)

#: compare's figures per segment and k after ``k``: (column, console header).
COMPARISON_COLUMNS = (
    ("pairs", "pairs"),
    ("mean_ndcg_baseline", "baseline"),
    ("mean_ndcg_candidate", "candidate"),
    ("mean_difference", "difference"),
    ("difference_ci_low", "ci_low"),
    ("difference_ci_high", "ci_high"),
    ("p_value", "p_value"),
    ("p_value_adjusted", "p_adjusted"),
    ("wins", "wins"),
    ("ties", "ties"),
    ("losses", "losses"),
)


def beyond_comparison_columns(row: Dict[str, object]) -> tuple:
    """compare's paired figures of each beyond-accuracy metric present in a report row (its
    ``<name>_pairs`` there), after :data:`COMPARISON_COLUMNS`: (column, console header)."""
    return tuple(
        (column.format(n), header.format(n))
        for n in registry.per_user_names()
        if f"{n}_pairs" in row
        for column, header in (
            ("{}_pairs", "{}_pairs"),
            ("mean_{}_baseline", "{}_baseline"),
            ("mean_{}_candidate", "{}_candidate"),
            ("mean_{}_difference", "{}_difference"),
            ("{}_difference_ci_low", "{}_ci_low"),
            ("{}_difference_ci_high", "{}_ci_high"),
            ("{}_p_value", "{}_p_value"),
        )
    )


def companion_metrics(hits: str, precisions: str, first_hit: str, n_relevant: str, cut: str) -> Dict[str, str]:
    """SQL of each companion metric at cutoff ``cut``, by name.

    ``hits``: the hits within the cutoff (double); ``precisions``: the sum of the precisions at
    them; ``first_hit``: the position of the list's first hit (null when none). Recall and AP
    divide by ``n_relevant``, the number of relevant judged items; RR is 1/rank of the first hit
    within the cutoff.
    """
    first = f"(CASE WHEN {first_hit} <= {cut} THEN {first_hit} END)"
    relevant = f"(CASE WHEN {n_relevant} > 0 THEN CAST({n_relevant} AS DOUBLE) END)"
    at = Cut(hits=hits, precisions=precisions, first=first, relevant=relevant, cut=cut)
    return {m.name: m.sql(at) for m in COMPANIONS}


def is_relevant(relevance: str, opts: EvaluationOptions) -> str:
    """SQL: binary relevance of the companion metrics: >= threshold, or > 0 without one."""
    if opts.relevance_threshold is None:
        return f"({relevance} > 0.0D)"
    return f"({relevance} >= CAST({float(opts.relevance_threshold)!r} AS DOUBLE))"
