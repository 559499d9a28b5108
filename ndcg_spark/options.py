"""The evaluation options: one typed, validated object shared by the library and the job.

Every field of :class:`EvaluationOptions` is a keyword argument of :func:`ndcg_spark.evaluate`,
a key of the job's TOML config and a ``--flag`` of the job (underscores become dashes), so the
three cannot drift apart.
"""

from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, Tuple

from ndcg_spark.errors import ConfigError

#: Default column names, in one place.
USER_COL = "user_id"
ITEM_COL = "item_id"
SCORE_COL = "score"
RELEVANCE_COL = "relevance"

GAINS = ("linear", "exponential")
ZERO_IDCG_POLICIES = ("zero", "exclude")
NO_RECOMMENDATIONS_POLICIES = ("include", "exclude")
DUPLICATE_RELEVANCE_POLICIES = ("error", "max")
TIE_BREAKS = ("item_ascending", "item_descending")
NEGATIVE_RELEVANCE_POLICIES = ("error", "clip")
TIES = ("item", "average")
CONFIDENCE_INTERVALS = ("normal", "bootstrap")
LAYOUTS = ("rows", "array")
ARRAY_RANKINGS = ("score", "order")
INVALID_ROWS_POLICIES = ("error", "quarantine")
TOP_K_METHODS = ("window", "heap")

#: Spelling of the "whole list" cutoff in configs and flags (``k = None`` in Python).
WHOLE_LIST = "all"


def _opt(default: Any, help: str, choices: Optional[Tuple[str, ...]] = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True)
class EvaluationOptions:
    """What to compute and how; validated on construction.

    Build it with :meth:`from_mapping` to accept config-file spellings (``k = "5,10"``).
    """

    k: Optional[Tuple[Optional[int], ...]] = _opt(
        None,
        "Cutoffs, e.g. 5,10,20. 'all' (or omitting k) means each user's own list length.",
    )
    gain: str = _opt("linear", "Gain of a relevance value: linear (rel) or exponential (2^rel - 1).", GAINS)
    user_col: str = _opt(USER_COL, "User (or query) column of both tables.")
    item_col: str = _opt(ITEM_COL, "Item (or document) column of both tables.")
    score_col: str = _opt(SCORE_COL, "Score column of the recommendations; higher ranks first.")
    rank_col: Optional[str] = _opt(
        None, "Rank column of the recommendations (1 = first); when set, it is used instead of the score."
    )
    relevance_col: str = _opt(RELEVANCE_COL, "Relevance column of the ground-truth table.")
    tie_break: str = _opt(
        "item_ascending",
        "Order of recommendations with equal score (or rank): item_ascending, or item_descending as trec_eval.",
        TIE_BREAKS,
    )
    zero_idcg: str = _opt(
        "zero",
        "Users with no positive relevance (IDCG = 0): 'zero' scores them NDCG 0.0, 'exclude' leaves them out.",
        ZERO_IDCG_POLICIES,
    )
    no_recommendations: str = _opt(
        "include",
        "Users with relevance rows but no recommendations: 'include' with DCG 0, or 'exclude'.",
        NO_RECOMMENDATIONS_POLICIES,
    )
    duplicate_relevance: str = _opt(
        "error",
        "A (user, item) repeated in the relevance table: 'error', or 'max' keeps the largest relevance.",
        DUPLICATE_RELEVANCE_POLICIES,
    )
    negative_relevance: str = _opt(
        "error",
        "Negative relevance: 'error' (trec_eval would silently treat it as unjudged), or 'clip' it to 0.",
        NEGATIVE_RELEVANCE_POLICIES,
    )
    on_invalid_rows: str = _opt(
        "error",
        "Rows with a null, NaN, infinite, negative or out-of-range value, a bad rank or a repeated judgement: "
        "'error' stops the run; 'quarantine' sets them aside with a reason (the job writes them to DIR/rejected/).",
        INVALID_ROWS_POLICIES,
    )
    cap_ideal_at_list_length: bool = _opt(
        False,
        "Cut the ideal list at min(k, list length) instead of k (seed 004's calc_ndcg); off penalises short lists.",
    )
    ties: str = _opt(
        "item",
        "Equal scores: 'item' orders them by the tie_break rule; 'average' gives each tied group the mean gain "
        "of its positions (the expected DCG over all orderings, as scikit-learn's ndcg_score).",
        TIES,
    )
    group_by: Tuple[str, ...] = _opt(
        (),
        "Segment columns (of the recommendations, or of the user_attributes table): every summary figure per segment.",
    )
    companion_metrics: bool = _opt(
        False, "Also compute precision@k, recall@k, MAP@k, MRR@k and hit rate@k from the same ranked lists."
    )
    relevance_threshold: Optional[float] = _opt(
        None, "Binary relevance for the companion metrics: relevance >= threshold (default: relevance > 0)."
    )
    confidence_interval: str = _opt(
        "normal",
        "95% interval of each mean NDCG: 'normal' (mean +- 1.96 std/sqrt(n)) or 'bootstrap' (Poisson bootstrap in Spark).",
        CONFIDENCE_INTERVALS,
    )
    bootstrap_samples: int = _opt(200, "Replicates of the Poisson bootstrap.")
    seed: int = _opt(42, "Seed of the bootstrap (same input, same interval).")
    recommendations_layout: str = _opt(
        "rows",
        "'rows': one row per (user, item); 'array': one row per user with an array of structs in array_col "
        "(Spark ML ALSModel.recommendForAllUsers output), item_col and score_col naming the struct fields.",
        LAYOUTS,
    )
    top_k_method: str = _opt(
        "window",
        "How each user's top k recommendations are found: 'window' (row_number() over a sort of every row), or "
        "'heap': a bounded heap per user where it applies (Spark 4.2+, finite k, no rank column, "
        "ties = 'item'), a little less task CPU on continuous scores; users whose k-th and (k+1)-th best "
        "scores tie are recomputed by the window, which makes tie-heavy scores slower (see the README).",
        TOP_K_METHODS,
    )
    array_col: str = _opt("recommendations", "Array column of the 'array' layout.")
    array_ranking: str = _opt(
        "score", "In the 'array' layout, rank by the score field ('score') or by position in the array ('order').",
        ARRAY_RANKINGS,
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _parse_k(self.k))
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if choices and value not in choices:
                raise ConfigError(f"{f.name} = {value!r} is not one of {', '.join(choices)}")
        for name in ("user_col", "item_col", "score_col", "relevance_col", "rank_col"):
            value = getattr(self, name)
            if value is None and name == "rank_col":
                continue
            if not isinstance(value, str) or not value:
                raise ConfigError(f"{name} must be a non-empty column name, got {value!r}")
        for name in ("cap_ideal_at_list_length", "companion_metrics"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        object.__setattr__(self, "group_by", _parse_names(self.group_by, "group_by"))
        if self.user_col in self.group_by:
            raise ConfigError("group_by cannot hold the user column")
        for name in ("bootstrap_samples", "seed"):
            value = getattr(self, name)
            if isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
                object.__setattr__(self, name, value)
            if isinstance(value, bool) or not isinstance(value, int) or (name == "bootstrap_samples" and value < 2):
                raise ConfigError(f"{name} must be an integer{' >= 2' if name == 'bootstrap_samples' else ''}, got {value!r}")
        if self.relevance_threshold is not None:
            try:
                threshold = float(self.relevance_threshold)
            except (TypeError, ValueError):
                raise ConfigError(f"relevance_threshold must be a number, got {self.relevance_threshold!r}") from None
            object.__setattr__(self, "relevance_threshold", threshold)
        if len({self.user_col, self.item_col}) < 2:
            raise ConfigError("user_col and item_col must be different columns")

    @property
    def cutoffs(self) -> Tuple[Optional[int], ...]:
        """The cutoffs to compute; ``None`` stands for each user's whole list."""
        return self.k if self.k else (None,)

    @property
    def largest_k(self) -> Optional[int]:
        """The largest finite cutoff, or ``None`` when the whole list is needed."""
        return None if None in self.cutoffs else max(self.cutoffs)  # type: ignore[type-var]

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, values: dict) -> "EvaluationOptions":
        """Build options from a config mapping, refusing unknown keys with a suggestion."""
        check_known_keys(values, cls.names(), "option")
        return cls(**values)


def check_known_keys(values: Iterable[str], known: Iterable[str], what: str) -> None:
    known = list(known)
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(known)}"
            raise ConfigError(f"unknown {what} {key!r}{hint}")


def _parse_names(value: Any, name: str) -> Tuple[str, ...]:
    """Accept "a,b", ["a", "b"] or () for a list of column names."""
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else list(value)
    names = tuple(i.strip() if isinstance(i, str) else i for i in items)
    if any(not isinstance(n, str) or not n for n in names):
        raise ConfigError(f"{name} must be a list of column names, got {value!r}")
    return tuple(n for n in names if n)


def _parse_k(value: Any) -> Optional[Tuple[Optional[int], ...]]:
    """Accept 10, "5,10,all", [5, 10], None; return a sorted tuple without repeats, or None."""
    if value is None:
        return None
    if isinstance(value, str):
        items: list = [v.strip() for v in value.split(",")]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    parsed = []
    for item in items:
        if item is None or (isinstance(item, str) and item.lower() in (WHOLE_LIST, "none", "list")):
            parsed.append(None)
            continue
        if isinstance(item, bool):
            raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}', got {item!r}")
        if isinstance(item, str):
            if not item.strip().lstrip("+").isdigit():
                raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}', got {item!r}")
            item = int(item)
        if not isinstance(item, int) or item < 1:
            raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}', got {item!r}")
        parsed.append(item)
    if not parsed:
        raise ConfigError("k is empty")
    finite = sorted({p for p in parsed if p is not None})
    return tuple(finite) + ((None,) if None in parsed else ())
