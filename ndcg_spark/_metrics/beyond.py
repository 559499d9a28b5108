"""The built-in beyond-accuracy metrics, each declared once and registered
(:mod:`ndcg_spark._metrics.registry`): the per-user ones (novelty, surprisal, unseen share,
popularity, long tail share, diversity, category diversity, serendipity, unexpectedness), each with
what it reads, its SQL at a cutoff and how the summary aggregates it; then the global figures
(catalog coverage, distributional coverage, Gini index), computed by
:mod:`ndcg_spark._beyond.exposure`.

A per-user metric's SQL reads ``top``, the list's structs within the cutoff, one per position:
position ``p``, item ``i``, self-information ``si``, surprisal weight ``sw``, popularity ``pop``,
head flag ``h``, category ``c``, normalised features ``f`` and judged relevance ``r`` (those its
``parts`` ask for; the others are null or 0), and the row's columns of
:mod:`ndcg_spark._metrics.per_user_sql`. A new metric is one declaration here (or one :func:`register`
anywhere). Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""

from __future__ import annotations

from typing import Optional, Tuple

from ndcg_spark._metrics.per_user_sql import (
    BASELINE,
    HISTORY,
    HISTORY_CATS,
    HISTORY_SIZE,
    HISTORY_VECTOR,
    PAIR_SUMS,
    SEREN_SUMS,
    array_sum,
    share_of,
)
from ndcg_spark._metrics.registry import MEAN, Aggregation, EvaluationOptions, Global, PerUser, register


def _n(top: str) -> str:
    return f"size({top})"


def _by_k(opts: EvaluationOptions) -> bool:
    return opts.short_lists == "k"


def _interactions(opts: EvaluationOptions) -> Tuple[str, ...]:
    return ("interactions",)


def _similarity(opts: EvaluationOptions) -> Tuple[str, ...]:
    """What the item similarity of diversity and serendipity reads."""
    return {
        "cooccurrence": ("interactions",),
        "features": ("items", "item_features_col"),
        "category": ("items", "item_category_col"),
    }[opts.similarity]


def _similar_part(opts: EvaluationOptions, sums: str) -> Tuple[str, ...]:
    """The part the similarity reads: the item's category, its features, or the co-occurrence ``sums``."""
    return {"cooccurrence": (sums,), "features": ("features",), "category": ("category",)}[opts.similarity]


# ----------------------------------------------------------------------------- popularity


def _novelty(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    return share_of(array_sum(top, "x.si"), _n(top), k, _by_k(opts))


def _surprisal(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    return share_of(array_sum(top, "x.sw"), _n(top), k, _by_k(opts))


def _unseen_share(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    unseen = f"CAST(size(filter({top}, x -> NOT coalesce(array_contains({HISTORY}, x.i), false))) AS DOUBLE)"
    value = share_of(unseen, _n(top), k, False)
    if opts.without_list == "scored":
        # RePlay's Novelty: a training user only; without a list, 1.0.
        value = f"(CASE WHEN {HISTORY} IS NOT NULL THEN {value} END)"
    return value


def _popularity(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    return share_of(array_sum(top, "CAST(x.pop AS DOUBLE)"), _n(top), k, _by_k(opts))


def _long_tail_share(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    return share_of(f"CAST(size(filter({top}, x -> NOT x.h)) AS DOUBLE)", _n(top), k, _by_k(opts))


def _unexpectedness(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    n = _n(top)
    base = BASELINE if k is None else f"slice({BASELINE}, 1, {int(k)})"
    missing = "1.0D" if opts.without_baseline == "unexpected" else "0.0D"
    # 1 - the share shared with the baseline's top k: under short_lists = "k" the empty slots
    # of a short list count as unexpected, as RePlay's 1 - |R ∩ B| / k.
    shared = f"CAST(size(filter({top}, x -> array_contains({base}, x.i))) AS DOUBLE)"
    return (
        f"(CASE WHEN {n} = 0 THEN NULL WHEN {BASELINE} IS NULL THEN {missing} "
        f"ELSE 1.0D - {share_of(shared, n, k, _by_k(opts))} END)"
    )


def _novelty_aggregation(opts: EvaluationOptions) -> Aggregation:
    return PER_RECOMMENDATION if opts.novelty_weighting == "recommendation" else MEAN


def _per_recommendation(column: str, opts: EvaluationOptions) -> str:
    length = "CAST(CASE WHEN k IS NULL THEN n_recommended ELSE least(k, n_recommended) END AS DOUBLE)"
    den = length if opts.short_lists == "list_length" else "CAST(coalesce(k, n_recommended) AS DOUBLE)"
    return f"sum({column} * {den}) / sum(CASE WHEN {column} IS NOT NULL THEN {length} END)"


#: ``novelty_weighting = "recommendation"``: the mean over every recommendation (each user's value
#: weighted by its list's length within k, or by k under ``short_lists = "k"``), without an interval.
PER_RECOMMENDATION = Aggregation("per_recommendation", _per_recommendation, interval=False)


# ----------------------------------------------------------------------------- similarity


def _category_diversity(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    distinct = f"CAST(size(array_distinct(filter(transform({top}, x -> x.c), c -> c IS NOT NULL))) AS DOUBLE)"
    return share_of(distinct, _n(top), k, _by_k(opts))


def _diversity(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    n = _n(top)
    pairs = f"(CAST({n} AS DOUBLE) * ({n} - 1) / 2.0D)"
    if opts.similarity == "category":
        cats = f"filter(transform({top}, x -> x.c), c -> c IS NOT NULL)"
        same = f"aggregate(array_distinct({cats}), 0.0D, (s, c) -> s + (CAST(size(filter({cats}, d -> d = c)) AS DOUBLE) * (size(filter({cats}, d -> d = c)) - 1) / 2.0D))"
    elif opts.similarity == "features":
        units = f"filter(transform({top}, x -> x.f), f -> f IS NOT NULL)"
        total = f"aggregate({units}, CAST(NULL AS array<double>), (acc, v) -> CASE WHEN acc IS NULL THEN v ELSE zip_with(acc, v, (a, b) -> a + b) END)"
        squares = f"coalesce(aggregate({total}, 0.0D, (s, v) -> s + v * v), 0.0D)"
        own = f"aggregate({units}, 0.0D, (s, v) -> s + aggregate(v, 0.0D, (t, w) -> t + w * w))"
        same = f"(({squares} - {own}) / 2.0D)"
    else:
        same = f"{PAIR_SUMS}[{opts.cutoffs.index(k)}]"
    return f"(CASE WHEN {n} >= 2 THEN 1.0D - {same} / {pairs} END)"


def _serendipity(top: str, k: Optional[int], opts: EvaluationOptions) -> str:
    n = _n(top)
    if opts.similarity == "cooccurrence":
        relevance = array_sum(top, "x.r")
        index = opts.cutoffs.index(k)
        term = f"({relevance} - coalesce({SEREN_SUMS}[{index}], 0.0D) / CAST({HISTORY_SIZE} AS DOUBLE))"
    else:
        if opts.similarity == "category":
            mean = f"(CAST(size(filter({HISTORY_CATS}, h -> h = x.c)) AS DOUBLE) / {HISTORY_SIZE})"
        else:
            mean = f"coalesce(aggregate(zip_with(x.f, {HISTORY_VECTOR}, (a, b) -> a * b), 0.0D, (s, v) -> s + v) / {HISTORY_SIZE}, 0.0D)"
        term = array_sum(top, f"(1.0D - {mean}) * x.r")
    return f"(CASE WHEN {HISTORY} IS NOT NULL AND {n} > 0 THEN {term} / CAST({n} AS DOUBLE) END)"


# ----------------------------------------------------------------------------- the declarations

#: The per-user metrics, in every output's order.
PER_USER = (
    PerUser("novelty", _interactions, _novelty, lambda o: ("self_information",), _novelty_aggregation),
    PerUser("surprisal", _interactions, _surprisal, lambda o: ("surprisal_weight",)),
    PerUser("unseen_share", _interactions, _unseen_share, lambda o: ("history",)),
    PerUser("popularity", _interactions, _popularity, lambda o: ("popularity",)),
    PerUser("long_tail_share", _interactions, _long_tail_share, lambda o: ("head",)),
    PerUser("diversity", _similarity, _diversity, lambda o: _similar_part(o, "pair_sums")),
    PerUser(
        "category_diversity", lambda o: ("items", "item_category_col"), _category_diversity, lambda o: ("category",)
    ),
    PerUser(
        "serendipity",
        lambda o: tuple(dict.fromkeys(("interactions", *_similarity(o)))),
        _serendipity,
        lambda o: ("relevance", "history", *_similar_part(o, "serendipity_sums")),
    ),
    PerUser("unexpectedness", lambda o: ("baseline_recommendations",), _unexpectedness),
)

#: The figures of a whole segment and k. ``gini_index`` measures concentration: lower is better.
GLOBAL = (
    Global("catalog_coverage", lambda o: () if o.coverage_catalog == "catalog" else ("interactions",)),
    Global("distributional_coverage"),
    Global("gini_index", higher_is_better=False, measures="concentration"),
)

for _metric in (*PER_USER, *GLOBAL):
    register(_metric)
