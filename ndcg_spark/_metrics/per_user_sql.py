"""The row columns a per-user beyond-accuracy metric's SQL reads besides its list's structs, and the
SQL helpers the declarations share (:mod:`ndcg_spark._metrics.beyond`).

The beyond-accuracy stage writes these columns (:mod:`ndcg_spark._beyond.columns` names them with
its own); they live here so that the declarations never import the stage.
"""

from __future__ import annotations

from typing import Optional

#: The user's distinct interacted items (null without interactions), their number, their
#: categories, and the sum of their normalised feature vectors.
HISTORY = "__nb_history"
HISTORY_SIZE = "__nb_history_size"
HISTORY_CATS = "__nb_history_categories"
HISTORY_VECTOR = "__nb_history_vector"
#: The baseline's ranked list of the user (null when it has none).
BASELINE = "__nb_baseline"
#: The co-occurrence sums, one per cutoff in the order of ``opts.cutoffs``: the cosines of the
#: list's item pairs (diversity), and relevance x cosine to the history (serendipity).
PAIR_SUMS = "__nb_pair_sums"
SEREN_SUMS = "__nb_serendipity_sums"


def share_of(count: str, n: str, k: Optional[int], by_k: bool) -> str:
    """SQL: ``count`` over the list's length within k, or over k (``by_k``, a finite k)."""
    den = f"CAST({int(k)} AS DOUBLE)" if (by_k and k is not None) else f"CAST({n} AS DOUBLE)"
    return f"(CASE WHEN {n} > 0 THEN {count} / {den} END)"


def array_sum(array: str, term: str) -> str:
    """SQL: the sum of ``term`` (over ``x``, each element) across ``array``."""
    return f"aggregate({array}, 0.0D, (s, x) -> s + {term})"
