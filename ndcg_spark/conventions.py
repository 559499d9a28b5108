"""Presets: every convention switch set to what one library does, by the library's name.

``convention = "sklearn"`` (an :class:`~ndcg_spark.EvaluationOptions` field, a TOML key, the job's
``--convention`` flag and an ``evaluate`` keyword) sets the switches below to scikit-learn's
choices; any option given explicitly still overrides its preset value. Each value was read from
the library's NDCG source; ``docs/conventions.md`` has the table with the file each comes from and
what a preset cannot reproduce. The switches a preset does not name keep their defaults.

A preset sets only conventions (how the figure is defined), never columns, cutoffs or policies of
the run itself (segments, intervals, quarantine).

Examples
--------
>>> preset_values("sklearn")["ideal"], preset_values("lenskit")["discount"]
('candidates', 'lenskit')
>>> preset_values(None)
{}
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

# Libraries that read a ground-truth row as relevant (binary relevance) score it 1: the linear gain
# of a relevance of 1. Their presets keep the linear gain, so graded input keeps its grades.
_BINARY_TOP_K = {"zero_idcg": "exclude"}

# trec_eval's settings, which ir_measures runs too.
_TREC_EVAL = {
    "gain": "linear",
    "tie_break": "item_descending",
    "whole_list": "all_judged",
    "no_recommendations": "exclude",
    "no_relevance": "exclude",
    "negative_relevance": "unjudged",
}

#: name -> {option: value}. The keys are EvaluationOptions fields.
PRESETS: Dict[str, Dict[str, Any]] = {
    # RankingMetrics.ndcgAt with relevance values: (2^rel - 1) / ln(i + 2), ideal from the labels,
    # a user without labels scores 0 and counts.
    "spark": {"gain": "exponential"},
    # m_ndcg.c / m_ndcg_cut.c: linear gain (relevance level), ties by docno descending, ideal
    # over every judged document (ndcg without a cutoff), only topics in both the run and the
    # qrels averaged (without -c), a grade below 0 not judged (form_res_rels.c), so unmapped.
    "trec_eval": _TREC_EVAL,
    # ir_measures' nDCG and nDCG@k run on pytrec_eval (trec_eval's ndcg and ndcg_cut).
    "ir_measures": _TREC_EVAL,
    # sklearn.metrics.ndcg_score: y_true as the gain, tied scores averaged, the ideal from the
    # same row's y_true (the candidates), all-zero rows score 0.
    "sklearn": {"gain": "linear", "ties": "average", "ideal": "candidates"},
    # retrieval_normalized_dcg / RetrievalNormalizedDCG: a port of scikit-learn's; queries with
    # no positive target score 0 (empty_target_action="neg").
    "torchmetrics": {"gain": "linear", "ties": "average", "ideal": "candidates"},
    # ranx "ndcg" (Jarvelin): linear gain; k = 0 (no cutoff) compares the run with every
    # relevant judgement; judgements below rel_lvl = 1 are dropped.
    "ranx": {"gain": "linear", "whole_list": "all_judged", "negative_relevance": "clip"},
    # recommenders.evaluation.python_evaluation.ndcg_at_k: natural-log discount (discfun_type
    # "loge"), ideal from rating_true; only users in both tables are averaged.
    # Beyond accuracy, SparkDiversityEvaluation (recommenders/evaluation/spark_evaluation.py):
    # catalog_coverage is every distinct recommended item over the training items, an item absent
    # from training adds 0 to novelty (an inner join) but counts in its denominator, novelty() is
    # weighted by recommendation. It refuses a list that repeats the user's training items: the
    # seen items are dropped from the lists (remove_seen, as its recommenders return them).
    "recommenders": {
        "gain": "linear",
        "log_base": math.e,
        "zero_idcg": "exclude",
        "no_recommendations": "exclude",
        "coverage_catalog": "recommended_over_interactions",
        "cold_items": "zero",
        "novelty_weighting": "recommendation",
        "seen_items": "drop",
    },
    # rectools.metrics.NDCG: the Rank column is the position, the ideal is k relevant positions
    # (divide_by_achievable=False), users without interactions are not scored.
    "rectools": {"gain": "linear", "positions": "as_given", "ideal": "k_relevant", "zero_idcg": "exclude"},
    # lenskit.metrics.NDCG: 1/max(log2(rank), 1), ideal over every test item when n is None,
    # negative gains clipped to 0, an ideal of 0 scores 0.0, an empty truth list gives NaN
    # (not averaged).
    "lenskit": {
        "gain": "linear",
        "discount": "lenskit",
        "whole_list": "all_judged",
        "negative_relevance": "clip",
        "no_relevance": "exclude",
    },
    # replay.metrics.NDCG: binary, ideal min(k, |ground truth|); a user with an empty ground
    # truth (or no recommendations) scores 0; only ground-truth users are evaluated. Its
    # DataFrame paths sort by (score, item) descending (base_metric.py), so ties go item
    # descending. Beyond accuracy (replay/metrics/*.py): Coverage counts the recommended items
    # seen in training over the training items; Surprisal, Unexpectedness and
    # CategoricalDiversity divide by k; Novelty scores a training user without a list 1.0;
    # Unexpectedness is 0.0 for a user the baseline lacks.
    "replay": {
        "gain": "linear",
        "no_relevance": "exclude",
        "tie_break": "item_descending",
        "coverage_catalog": "interacted_over_interactions",
        "short_lists": "k",
        "without_list": "scored",
        "without_baseline": "expected",
    },
    # cornac.metrics.NDCG: gain 2^r - 1 on binary r, k = -1 ranks everything against every
    # positive; users without test positives are skipped.
    "cornac": {"gain": "exponential", "whole_list": "all_judged", **_BINARY_TOP_K},
    # recbole.evaluator.metrics.NDCG: binary, ideal min(k, positives); users with test positives.
    "recbole": {"gain": "linear", **_BINARY_TOP_K},
    # implicit.evaluation.ndcg_at_k: binary, ideal min(K, liked test items); users without test
    # items are skipped.
    "implicit": {"gain": "linear", **_BINARY_TOP_K},
    # LightGBM's ndcg@k (src/metric/rank_metric.hpp, dcg_calculator.cpp): label_gain 2^i - 1, the
    # ideal from the query's own labels, a query without a relevant document scores 1.
    "lightgbm": {"gain": "exponential", "ideal": "candidates", "zero_idcg": "one"},
    # XGBoost's ndcg@k (src/metric/rank_metric.cc): ndcg_exp_gain (2^rel - 1), the ideal from the
    # group's labels, a group without a relevant document scores 1 (0 for ndcg@k-).
    "xgboost": {"gain": "exponential", "ideal": "candidates", "zero_idcg": "one"},
    # CatBoost's NDCG (catboost/libs/metrics/dcg.cpp): type=Base (the label), ties least relevant
    # first (doc_comparator.h), the ideal from the query's own targets, an IDCG of 0 scores 1.
    "catboost": {"gain": "linear", "ideal": "candidates", "zero_idcg": "one", "ties": "worst"},
}


def preset_values(name: Optional[str]) -> Dict[str, Any]:
    """The options a preset sets (empty for ``None``; an unknown name is left to the options' check)."""
    if name is None:
        return {}
    return dict(PRESETS.get(name, {}))
