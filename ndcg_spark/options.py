"""The evaluation options: one typed, validated object, built once and passed as itself.

Every field of :class:`EvaluationOptions` is a keyword argument of :func:`ndcg_spark.evaluate`,
a key of the job's TOML config and a ``--flag`` of the job (underscores become dashes), so the
three cannot drift apart. The object holds Python values only (``k=(5, 10)``, ``k=None`` for
the whole list); config spellings such as ``"5,10"`` or ``"all"`` are read by the job
(:mod:`ndcg_spark.job.config`).
"""

from __future__ import annotations

import dataclasses
import difflib
import math
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Optional, Tuple

from ndcg_spark._metrics import registry
from ndcg_spark.conventions import PRESETS, preset_values
from ndcg_spark.errors import ConfigError

GAINS = ("linear", "exponential")
ZERO_IDCG_POLICIES = ("zero", "exclude", "one")
NO_RECOMMENDATIONS_POLICIES = ("include", "exclude")
NO_RELEVANCE_POLICIES = ("include", "exclude")
DUPLICATE_RELEVANCE_POLICIES = ("error", "max")
TIE_BREAKS = ("item_ascending", "item_descending")
NEGATIVE_RELEVANCE_POLICIES = ("error", "clip", "unjudged")
TIES = ("item", "average", "worst")
CONFIDENCE_INTERVALS = ("normal", "bootstrap")
LAYOUTS = ("rows", "array")
ARRAY_RANKINGS = ("score", "order")
INVALID_ROWS_POLICIES = ("error", "quarantine")
DISCOUNTS = ("log2", "lenskit", "position")
IDEALS = ("relevance", "candidates", "k_relevant")
POSITIONS = ("renumber", "as_given")
WHOLE_LIST_MEANINGS = ("list_length", "all_judged")
SIMILARITIES = ("cooccurrence", "features", "category")
COVERAGE_CATALOGS = ("catalog", "recommended_over_interactions", "interacted_over_interactions")
COLD_ITEMS = ("once", "zero")
SEEN_ITEMS = ("keep", "drop")
NOVELTY_WEIGHTINGS = ("user", "recommendation")
SHORT_LISTS = ("list_length", "k")
WITHOUT_LIST = ("null", "scored")
WITHOUT_BASELINE = ("unexpected", "expected")

# The beyond-accuracy metrics are declared in the metric registry (:mod:`ndcg_spark._metrics.registry`)
# and read from it when used, so one declared at run time counts.


def beyond_per_user() -> Tuple[str, ...]:
    """The beyond-accuracy metrics of each user's list (``per_user`` columns, ``mean_<name>`` and its
    interval in the summary), as declared now, in every output's order."""
    return registry.per_user_names()


def beyond_global() -> Tuple[str, ...]:
    """The beyond-accuracy figures of a whole segment and k (summary columns), as declared now."""
    return registry.global_names()


def beyond_metric_names() -> Tuple[str, ...]:
    """Every beyond-accuracy metric's name: :func:`beyond_per_user`, then :func:`beyond_global`."""
    return registry.names()


def higher_is_better(metric: str) -> bool:
    """Whether a higher value of beyond-accuracy ``metric`` is the better one (``gini_index``, a
    measure of concentration, is lower-is-better: no gate may hold it)."""
    return registry.declared(metric).higher_is_better


def measured_by(metric: str) -> str:
    """What beyond-accuracy ``metric`` measures, in a word (declared for a lower-is-better one)."""
    return registry.declared(metric).measures


#: Per table other than the recommendations and relevance, the options naming its user and item
#: columns where they differ from ``user_col`` / ``item_col`` (those tables come from other systems).
TABLE_COLUMNS = {
    "interactions": {"user_col": "interactions_user_col", "item_col": "interactions_item_col"},
    "items": {"item_col": "items_item_col"},
    "baseline_recommendations": {"user_col": "baseline_user_col", "item_col": "baseline_item_col"},
    "user_attributes": {"user_col": "user_attributes_user_col"},
}

#: How the whole-list cutoff (``None`` in Python) is written in configs, flags and tables.
WHOLE_LIST = "all"

Cutoff = Optional[int]

#: The largest cutoff: Spark's ranks are 32-bit integers, so a larger k would fail at the end
#: of the evaluation rather than at once.
MAX_K = 2**31 - 1


def k_label(k: Cutoff) -> str:
    """A cutoff as users write it: ``"10"``, or ``"all"`` for the whole list (``None``).

    Examples
    --------
    >>> k_label(10), k_label(None)
    ('10', 'all')
    """
    return WHOLE_LIST if k is None else str(k)


def parse_cutoff(value: Any) -> Cutoff:
    """One cutoff as written anywhere (``EvaluationOptions(k=...)``, a config, a flag, a gate):
    a positive integer, or the whole list (``None``, ``"all"``); digits as text count as the integer.

    Raises
    ------
    ConfigError
        One line naming the value.

    Examples
    --------
    >>> parse_cutoff(10), parse_cutoff("5"), parse_cutoff("all"), parse_cutoff(None)
    (10, 5, None, None)
    >>> parse_cutoff("+5")
    Traceback (most recent call last):
    ...
    ndcg_spark.errors.ConfigError: k must hold positive integers or 'all' (None: the whole list), got '+5'
    """
    if value is None:
        return None
    if isinstance(value, str):
        text = value.strip()
        if text.lower() == WHOLE_LIST:
            return None
        value = int(text) if text.isascii() and text.isdigit() else value
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"k must hold positive integers or '{WHOLE_LIST}' (None: the whole list), got {value!r}")
    if value > MAX_K:
        raise ConfigError(f"k = {value} is larger than {MAX_K}, the largest k Spark can rank to; use '{WHOLE_LIST}'")
    return value


def _opt(default: Any, help: str, choices: Optional[Tuple[str, ...]] = None) -> Any:
    return field(default=default, metadata={"help": help, "choices": choices})


@dataclass(frozen=True, init=False)
class EvaluationOptions:
    """What to compute and how; validated on construction.

    Parameters
    ----------
    k : int, sequence of int or None, or None
        Cutoffs. ``None`` (alone or in the sequence) is each user's whole list. Stored sorted,
        without repeats, the whole list last.
    gain : {"linear", "exponential"}
        ``rel`` or ``2^rel - 1``.
    user_col, item_col, score_col, rank_col, relevance_col : str
        Column names; ``rank_col`` (1 = first), when set, is used instead of the score.
    tie_break, ties, zero_idcg, no_recommendations, no_relevance, duplicate_relevance, \
negative_relevance, on_invalid_rows, cap_ideal_at_list_length
        Conventions and policies (see each field's help and ``docs/conventions.md``).
    group_by : sequence of str
        Segment columns, of the recommendations or of a user attributes table.
    companion_metrics : bool
        Also precision, recall, AP, RR and hit rate at each k.
    relevance_threshold : float, optional
        Binary relevance of the companion metrics (default: relevance > 0).
    confidence_interval, bootstrap_samples, seed
        The 95% interval of each mean NDCG.
    recommendations_layout, array_col, array_ranking
        Rows, or Spark ML's ``recommendForAllUsers`` arrays.
    discount, log_base, ideal, positions, gains, whole_list
        Other libraries' conventions (``docs/conventions.md``). ``gains`` is a mapping of grade to
        gain (stored as sorted pairs).
    convention : str, optional
        A library's name: its preset fills every switch not given explicitly.

    Raises
    ------
    ConfigError
        A value out of its choices, a wrong type, or columns that clash.

    Examples
    --------
    >>> opts = EvaluationOptions(k=[10, 5, None], gain="exponential")
    >>> opts.k, opts.largest_k
    ((5, 10, None), None)
    >>> opts = EvaluationOptions(convention="sklearn", k=5)
    >>> opts.ideal, opts.ties, EvaluationOptions(convention="sklearn", ties="item").ties
    ('candidates', 'average', 'item')
    >>> EvaluationOptions(gain="log")
    Traceback (most recent call last):
    ...
    ndcg_spark.errors.ConfigError: gain = 'log' is not one of linear, exponential
    """

    k: Tuple[Cutoff, ...] = _opt(
        None, "Cutoffs, e.g. 5,10,20. 'all' (or omitting k) means each user's own list length."
    )
    gain: str = _opt("linear", "Gain of a relevance value: linear (rel) or exponential (2^rel - 1).", GAINS)
    user_col: str = _opt("user_id", "User (or query) column of both tables.")
    item_col: str = _opt("item_id", "Item (or document) column of both tables.")
    score_col: str = _opt("score", "Score column of the recommendations; higher ranks first.")
    rank_col: Optional[str] = _opt(
        None, "Rank column of the recommendations (1 = first); when set, it is used instead of the score."
    )
    relevance_col: str = _opt("relevance", "Relevance column of the ground-truth table.")
    tie_break: str = _opt(
        "item_ascending",
        "Order of recommendations with equal score (or rank): item_ascending, or item_descending as trec_eval.",
        TIE_BREAKS,
    )
    zero_idcg: str = _opt(
        "zero",
        "Users with no positive relevance (IDCG = 0): 'zero' scores them NDCG 0.0, 'exclude' leaves them out, "
        "'one' scores them 1.0 (torchmetrics' empty_target_action='pos').",
        ZERO_IDCG_POLICIES,
    )
    no_recommendations: str = _opt(
        "include",
        "Users with relevance rows but no recommendations: 'include' with DCG 0, or 'exclude' "
        "(trec_eval without -c; 'include' is trec_eval -c).",
        NO_RECOMMENDATIONS_POLICIES,
    )
    no_relevance: str = _opt(
        "include",
        "Users with recommendations but no relevance rows: 'include' (scored as any user with IDCG = 0, see "
        "zero_idcg), or 'exclude' them (trec_eval, which skips topics of the run absent from the qrels).",
        NO_RELEVANCE_POLICIES,
    )
    duplicate_relevance: str = _opt(
        "error",
        "A (user, item) repeated in the relevance table: 'error', or 'max' keeps the largest relevance.",
        DUPLICATE_RELEVANCE_POLICIES,
    )
    negative_relevance: str = _opt(
        "error",
        "Negative relevance: 'error'; 'clip' it to 0; or 'unjudged': relevance 0 that gains does not map "
        "(trec_eval reads a grade below 0 as not judged).",
        NEGATIVE_RELEVANCE_POLICIES,
    )
    on_invalid_rows: str = _opt(
        "error",
        "Rows with a null, NaN, infinite, negative or out-of-range value, a bad rank or a repeated judgement: "
        "'error' stops the run; 'quarantine' sets them aside with a reason (the job writes them to DIR/rejected/).",
        INVALID_ROWS_POLICIES,
    )
    cap_ideal_at_list_length: bool = _opt(
        False, "Cut the ideal list at min(k, list length) instead of k; off penalises short lists."
    )
    ties: str = _opt(
        "item",
        "Equal scores: 'item' orders them by the tie_break rule; 'average' gives each tied group the mean gain "
        "of its positions (the expected DCG over all orderings, as scikit-learn's ndcg_score); 'worst' orders each "
        "tied group least relevant first (CatBoost).",
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
    array_col: str = _opt("recommendations", "Array column of the 'array' layout.")
    array_ranking: str = _opt(
        "score",
        "In the 'array' layout, rank by the score field ('score') or by position in the array ('order').",
        ARRAY_RANKINGS,
    )
    discount: str = _opt(
        "log2",
        "Positional discount: 'log2' is 1/log(i+1), 'lenskit' is 1/log(max(i, 2)) (ranks 1 and 2 weigh the same), "
        "'position' is 1/i (CatBoost's denominator=Position).",
        DISCOUNTS,
    )
    log_base: float = _opt(2.0, "Base of the discount's logarithm: changes DCG values, not NDCG (e.g. 10, or e).")
    ideal: str = _opt(
        "relevance",
        "The ideal list: 'relevance' (the user's judged items), 'candidates' (the user's recommended items and "
        "their grades only, as scikit-learn and torchmetrics), or 'k_relevant' (k positions of gain 1, RecTools).",
        IDEALS,
    )
    positions: str = _opt(
        "renumber",
        "With rank_col: 'renumber' ranks 1, 2, ... in rank order; 'as_given' takes the ranks as positions (gaps count).",
        POSITIONS,
    )
    gains: Tuple[Tuple[float, float], ...] = _opt(
        (),
        "Map of grade to gain applied before the gain function: {0 = 0, 1 = 1, 2 = 5} in TOML, 0:0,1:1,2:5 as a flag "
        "(trec_eval's ndcg.2=5).",
    )
    whole_list: str = _opt(
        "list_length",
        "Meaning of k = all: 'list_length' (each user's list, the ideal cut at its length) or 'all_judged' "
        "(the whole ranking against an ideal over every judged item, as trec_eval's ndcg).",
        WHOLE_LIST_MEANINGS,
    )
    beyond_accuracy: Any = _opt(
        False,
        "Beyond-accuracy metrics at every k: true (every one the given interactions, items and baseline allow) "
        f"or a list of names ({', '.join(registry.names())}).",
    )
    similarity: str = _opt(
        "cooccurrence",
        "Item similarity of diversity and serendipity: 'cooccurrence' (cosine over the interactions' users), "
        "'features' (cosine of item_features_col) or 'category' (1 for the same item_category_col, else 0).",
        SIMILARITIES,
    )
    head_share: float = _opt(
        0.2, "Share of all interactions the head's most popular items reach (long_tail_share counts the rest)."
    )
    item_category_col: Optional[str] = _opt(None, "Category column of the items table (category_diversity).")
    item_features_col: Optional[str] = _opt(
        None, "Feature vector column (array of doubles) of the items table (similarity = 'features')."
    )
    max_history: int = _opt(
        100000,
        "Most distinct items one user's interactions may hold under similarity = 'cooccurrence' (its history is "
        "one array, paired with its relevant recommended items); a longer history stops the run naming the user.",
    )
    seen_items: str = _opt(
        "keep",
        "A recommended item the user has in its interactions: 'keep' it, or 'drop' it from the list before the "
        "ranking (Recommenders' remove_seen: its evaluator refuses a list that repeats the history); dropped rows "
        "are set aside in the row accounting.",
        SEEN_ITEMS,
    )
    interactions_user_col: Optional[str] = _opt(None, "User column of the interactions (default: user_col).")
    interactions_item_col: Optional[str] = _opt(None, "Item column of the interactions (default: item_col).")
    items_item_col: Optional[str] = _opt(None, "Item column of the items table (default: item_col).")
    baseline_user_col: Optional[str] = _opt(None, "User column of the baseline recommendations (default: user_col).")
    baseline_item_col: Optional[str] = _opt(None, "Item column of the baseline recommendations (default: item_col).")
    user_attributes_user_col: Optional[str] = _opt(None, "User column of the user attributes (default: user_col).")
    coverage_catalog: str = _opt(
        "catalog",
        "catalog_coverage: 'catalog' (recommended items of the catalog over the catalog: the items table, else the "
        "items of interactions and lists), 'recommended_over_interactions' (Recommenders) or "
        "'interacted_over_interactions' (RePlay).",
        COVERAGE_CATALOGS,
    )
    cold_items: str = _opt(
        "once",
        "An item in no interaction: 'once' counts it interacted once (novelty), 'zero' adds 0 to novelty "
        "(Recommenders).",
        COLD_ITEMS,
    )
    novelty_weighting: str = _opt(
        "user",
        "mean_novelty: the mean of the users' means ('user'), or weighted by recommendation (Recommenders).",
        NOVELTY_WEIGHTINGS,
    )
    short_lists: str = _opt(
        "list_length",
        "A list shorter than k: shares and means divide by its length within k ('list_length'), or by k ('k', "
        "RePlay's Surprisal, Unexpectedness and CategoricalDiversity; unseen_share keeps the length).",
        SHORT_LISTS,
    )
    without_list: str = _opt(
        "null",
        "unseen_share of a user without a list: 'null', or 'scored' as RePlay's Novelty (1.0 with interactions, "
        "null without).",
        WITHOUT_LIST,
    )
    without_baseline: str = _opt(
        "unexpected",
        "unexpectedness of a user the baseline has no list for: 'unexpected' (1.0) or 'expected' (0.0, RePlay).",
        WITHOUT_BASELINE,
    )
    convention: Optional[str] = _opt(
        None,
        "Preset of every convention switch from one library (spark, trec_eval, ir_measures, sklearn, torchmetrics, "
        "ranx, recommenders, rectools, lenskit, replay, cornac, recbole, implicit, lightgbm, xgboost, catboost); "
        "explicit options override it.",
    )

    def __init__(self, **values: Any) -> None:
        # Written by hand so that a preset (``convention``) fills only the options not given.
        check_known_keys(values, self.names(), "option")
        preset = preset_values(values.get("convention"))
        for f in dataclasses.fields(self):
            value = values[f.name] if f.name in values else preset.get(f.name, f.default)
            object.__setattr__(self, f.name, value)
        self.__post_init__()

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", _cutoffs(self.k))
        object.__setattr__(self, "group_by", _column_names(self.group_by))
        object.__setattr__(self, "gains", _gain_map(self.gains))
        if self.convention is not None and self.convention not in PRESETS:
            raise ConfigError(f"convention = {self.convention!r} is not one of {', '.join(PRESETS)}")
        base = self.log_base
        if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base) or base <= 1:
            raise ConfigError(f"log_base must be a number above 1, got {base!r}")
        object.__setattr__(self, "log_base", float(base))
        for f in dataclasses.fields(self):
            choices = f.metadata.get("choices")
            value = getattr(self, f.name)
            if choices and value not in choices:
                raise ConfigError(f"{f.name} = {value!r} is not one of {', '.join(choices)}")
        for name in ("user_col", "item_col", "score_col", "relevance_col", "rank_col", "array_col"):
            value = getattr(self, name)
            if (value is not None or name != "rank_col") and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty column name, got {value!r}")
        for name in ("cap_ideal_at_list_length", "companion_metrics"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name, least in (("bootstrap_samples", 2), ("seed", None)):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or (least is not None and value < least):
                raise ConfigError(f"{name} must be an integer{f' >= {least}' if least else ''}, got {value!r}")
        threshold = self.relevance_threshold
        if threshold is not None:
            if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
                raise ConfigError(f"relevance_threshold must be a number, got {threshold!r}")
            object.__setattr__(self, "relevance_threshold", float(threshold))
        object.__setattr__(self, "beyond_accuracy", _beyond_names(self.beyond_accuracy))
        share = _number(self.head_share, "head_share")
        if not 0.0 < share <= 1.0:
            raise ConfigError(f"head_share must be above 0 and at most 1, got {self.head_share!r}")
        object.__setattr__(self, "head_share", share)
        for name in (
            "item_category_col",
            "item_features_col",
            *(o for m in TABLE_COLUMNS.values() for o in m.values()),
        ):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, str) or not value):
                raise ConfigError(f"{name} must be a non-empty column name, got {value!r}")
        if isinstance(self.max_history, bool) or not isinstance(self.max_history, int) or self.max_history < 2:
            raise ConfigError(f"max_history must be an integer >= 2, got {self.max_history!r}")
        if self.user_col == self.item_col:
            raise ConfigError("user_col and item_col must be different columns")
        if self.user_col in self.group_by:
            raise ConfigError("group_by cannot hold the user column")

    @property
    def cutoffs(self) -> Tuple[Cutoff, ...]:
        """The cutoffs to compute; ``None`` stands for each user's whole list."""
        return self.k

    @property
    def largest_k(self) -> Cutoff:
        """The largest finite cutoff, or ``None`` when the whole list is needed."""
        return None if None in self.k else max(self.k)  # type: ignore[type-var]

    @property
    def unsegmented(self) -> EvaluationOptions:
        """These options for a table read without segments: another model's recommendations (the
        baseline), ranked per user as the recommendations are, whatever ``group_by`` names."""
        return dataclasses.replace(self, group_by=()) if self.group_by else self

    @classmethod
    def names(cls) -> Tuple[str, ...]:
        """The option names, in declaration order."""
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> EvaluationOptions:
        """Options from ``{name: value}``, refusing unknown names with a suggestion."""
        check_known_keys(values, cls.names(), "option")
        return cls(**values)

    def updated(self, **changes: Any) -> EvaluationOptions:
        """A copy with ``changes`` applied (unknown names refused, as by :meth:`from_mapping`).

        A new ``convention`` lays its preset over these options, then the other changes over it.
        """
        check_known_keys(changes, self.names(), "option")
        if changes.get("convention"):
            return dataclasses.replace(self, **{**preset_values(changes["convention"]), **changes})
        return dataclasses.replace(self, **changes)


def resolve(options: Optional[EvaluationOptions], overrides: Mapping[str, Any]) -> EvaluationOptions:
    """The options of a library call: ``options`` (or the defaults) with keyword ``overrides``."""
    if options is not None and not isinstance(options, EvaluationOptions):
        raise ConfigError(f"options must be an EvaluationOptions, got {type(options).__name__}")
    if options is None:
        return EvaluationOptions.from_mapping(overrides)
    return options.updated(**overrides) if overrides else options


def check_known_keys(values: Iterable[str], known: Iterable[str], what: str) -> None:
    """Raise :class:`ConfigError` for the first key not in ``known``, suggesting the closest."""
    known = list(known)
    for key in values:
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; valid keys: {', '.join(known)}"
            raise ConfigError(f"unknown {what} {key!r}{hint}")


def _number(value: Any, name: str) -> float:
    """A finite number as written (``0.2`` or ``"0.2"``)."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            raise ConfigError(f"{name} must be a number, got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a number, got {value!r}")
    return float(value)


def _beyond_names(value: Any) -> Any:
    """``beyond_accuracy`` as True, False or a tuple of known metric names in the registry's order.

    True, False, or a list of names (a flag's text, ``"novelty,diversity"``, is the job's to read:
    :func:`ndcg_spark.job.config.spellings.beyond_names`).
    """
    if isinstance(value, bool):
        return value
    names = list(value or ()) if isinstance(value, (list, tuple)) else None
    if names is None or any(not isinstance(n, str) for n in names):
        raise ConfigError(f"beyond_accuracy must be true, false or a list of metric names, got {value!r}")
    known = registry.names()
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; known: {', '.join(known)}"
            raise ConfigError(f"unknown beyond-accuracy metric {name!r}{hint}")
    if not names:
        return False
    return tuple(n for n in known if n in names)


def _column_names(value: Any) -> Tuple[str, ...]:
    names = (value,) if isinstance(value, str) else tuple(value or ())
    if any(not isinstance(n, str) or not n for n in names):
        raise ConfigError(f"group_by must be a list of column names, got {value!r}")
    return names


def _gain_map(value: Any) -> Tuple[Tuple[float, float], ...]:
    """``{grade: gain}`` (or pairs) as sorted ``((grade, gain), ...)`` of finite floats."""
    pairs = list(value.items()) if isinstance(value, Mapping) else list(value or ())
    out = {}
    for pair in pairs:
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2
        if ok:
            ok = all(not isinstance(x, bool) and isinstance(x, (int, float)) and math.isfinite(x) for x in pair)
        if not ok:
            raise ConfigError(
                f"gains must map numeric grades to numeric gains, e.g. {{0: 0, 1: 1, 2: 5}}, got {value!r}"
            )
        out[float(pair[0])] = float(pair[1])
    return tuple(sorted(out.items()))


def _cutoffs(value: Any) -> Tuple[Cutoff, ...]:
    """A sorted tuple of positive ints without repeats, ``None`` (the whole list) last."""
    items = [parse_cutoff(item) for item in (list(value) if isinstance(value, (list, tuple)) else [value])]
    if not items:
        raise ConfigError("k is empty")
    finite = sorted({i for i in items if i is not None})
    return tuple(finite) + ((None,) if None in items else ())
