"""Paired comparison of two models against one relevance table, and of N models
(:func:`compare_models`: against a baseline or every pair, with a multiple-testing correction).

Per user and k the two NDCG values are paired (``candidate - baseline``); per segment and k the
summary reports both means, the mean paired difference with its 95% interval, a paired t-test
p-value and wins / ties / losses. The per-user pairing and every sum run in Spark; only the
small per-(segment, k) summary is collected to turn t statistics into p-values. The pairing of
two evaluations and its summary are :mod:`ndcg_spark._comparison.paired_evaluations`'s; this module holds the entry
points and the many-models comparison.
"""

from __future__ import annotations

import functools
import itertools
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._beyond.sources import Tables
from ndcg_spark._comparison import statistics as _stats
from ndcg_spark._comparison.paired_evaluations import ComparisonResult, pair_evaluations, with_beyond_t_tests
from ndcg_spark._comparison.statistics import adjust_p_values, with_t_test
from ndcg_spark._metrics import accuracy as _metrics
from ndcg_spark._spark.counts import RowCount, counted
from ndcg_spark._spark.sql import ident
from ndcg_spark.errors import ConfigError, InputDataError, input_errors
from ndcg_spark.evaluation import EvaluationResult, evaluate_counted
from ndcg_spark.options import EvaluationOptions, resolve

#: compare's figures per segment and k after ``k``, in the order its report and the job's
#: console show them: (column, console header). Re-exported from the metric registry.
COMPARISON_COLUMNS = _metrics.COMPARISON_COLUMNS
#: The paired figures of each beyond-accuracy metric a report row carries, after those.
beyond_comparison_columns = _metrics.beyond_comparison_columns

__all__ = [
    "COMPARISON_COLUMNS",
    "beyond_comparison_columns",
    "CORRECTIONS",
    "PAIRINGS",
    "ComparisonResult",
    "ModelComparison",
    "compare",
    "compare_models",
    "pair_evaluations",
]

#: The multiple-testing corrections of :func:`compare_models` (its ``correction``).
CORRECTIONS = _stats.CORRECTIONS


def compare(
    baseline: DataFrame,
    candidate: DataFrame,
    relevance: DataFrame,
    options: Optional[EvaluationOptions] = None,
    *,
    user_attributes: Optional[DataFrame] = None,
    interactions: Optional[DataFrame] = None,
    items: Optional[DataFrame] = None,
    baseline_recommendations: Optional[DataFrame] = None,
    **option_values: Any,
) -> ComparisonResult:
    """Compare the NDCG of two recommendation tables, user by user.

    A user scored for only one model is, on the other side, a user without recommendations,
    so the exclusion policies (``no_recommendations``, ``zero_idcg``) decide whether the pair
    counts, as they do in :func:`ndcg_spark.evaluate`; the summary counts such users in
    ``users_only_in_baseline`` and ``users_only_in_candidate``.

    Parameters
    ----------
    baseline, candidate : DataFrame
        The two models' recommendations, each as :func:`ndcg_spark.evaluate` takes them.
    relevance : DataFrame
        The ground truth both are judged against.
    options : EvaluationOptions, optional
        Applied to both sides; the defaults when omitted.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by``.
    interactions, items, baseline_recommendations : DataFrame, optional
        The beyond-accuracy inputs, as :func:`ndcg_spark.evaluate` takes them, for both sides:
        with ``beyond_accuracy``, each per-user metric is paired too (:class:`ComparisonResult`).
    **option_values
        Fields of :class:`~ndcg_spark.EvaluationOptions` to set (over ``options``).

    Returns
    -------
    ComparisonResult
        ``per_user``, ``summary`` and ``report()`` (the summary with p-values).

    Raises
    ------
    ConfigError, InputDataError
        As :func:`ndcg_spark.evaluate`.

    Examples
    --------
    >>> schema = "user_id int, item_id string, score double"
    >>> a = spark.createDataFrame([(1, "x", 0.9), (1, "y", 0.8), (2, "z", 0.9)], schema)
    >>> b = spark.createDataFrame([(1, "y", 0.9), (1, "x", 0.8), (2, "z", 0.9)], schema)
    >>> rel = spark.createDataFrame([(1, "y", 1.0), (2, "z", 1.0)], "user_id int, item_id string, relevance double")
    >>> row = compare(a, b, rel, k=[2]).report()[0]
    >>> row["pairs"], row["wins"], row["ties"], round(row["mean_difference"], 4)
    (2, 1, 1, 0.1845)
    """
    opts = resolve(options, option_values)
    # Both sides read one counted relevance frame: one plan of it, which Spark runs once.
    shared = counted(relevance)
    tables = Tables(interactions, items, baseline_recommendations)
    results = [evaluate_counted(recs, shared, opts, user_attributes, tables) for recs in (baseline, candidate)]
    return pair_evaluations(results[0], results[1], opts)


# ----------------------------------------------------------------------------- many models

PAIRINGS = ("baseline", "all")


@dataclass(frozen=True)
class ModelComparison:
    """The outcome of :func:`compare_models`: one :class:`ComparisonResult` per pair of models,
    each made by :func:`~ndcg_spark._comparison.paired_evaluations.pair_evaluations` from the two models' per-user figures.

    Attributes
    ----------
    pairs : list of (str, str)
        (baseline, candidate) model names, in the order compared.
    evaluations : dict of str to EvaluationResult
        Each model's evaluation (every model is evaluated once, whatever the number of pairs it
        is in).
    correction : {"holm", "bonferroni"}
        The multiple-testing correction of :meth:`report`.
    options : EvaluationOptions
        The options every model was evaluated with.
    counts : dict of str to RowCount
        The rows of each model's recommendations (by name) and of the relevance (``None``),
        counted on the evaluation's own pass: :meth:`input_rows`.
    """

    pairs: List[Tuple[str, str]]
    evaluations: Dict[str, EvaluationResult]
    correction: str
    options: EvaluationOptions
    counts: Dict[Optional[str], RowCount] = field(default_factory=dict)

    def input_rows(self) -> Dict[str, Dict[str, int]]:
        """{model: {"recommendations": rows, "relevance": rows}}, the rows each model's
        evaluation read (after an action has computed the models' figures)."""
        relevance = self.counts[None].rows()
        return {name: {"recommendations": count.rows(), "relevance": relevance}
                for name, count in self.counts.items() if name is not None}  # fmt: skip

    @property
    def results(self) -> List[ComparisonResult]:
        """The paired comparison of each pair, in the order of ``pairs``."""
        return [pair_evaluations(self.evaluations[a], self.evaluations[b], self.options) for a, b in self.pairs]

    def persist(self) -> ModelComparison:
        """Cache each model's per-user figures, so every pair and output reads them once."""
        return replace(self, evaluations={name: r.persist() for name, r in self.evaluations.items()})

    def unpersist(self) -> None:
        """Drop the caches of :meth:`persist`."""
        for result in self.evaluations.values():
            result.unpersist()

    @property
    def per_user(self) -> DataFrame:
        """Every pair's paired figures under ``baseline_model`` and ``candidate_model`` columns."""
        return _with_pair_names(self.pairs, [r.per_user for r in self.results])

    @property
    def summary(self) -> DataFrame:
        """Every pair's :attr:`ComparisonResult.summary` under ``baseline_model`` and
        ``candidate_model`` columns (without p-values: :meth:`report` adds them)."""
        return _with_pair_names(self.pairs, [r.summary for r in self.results])

    def report(self) -> List[Dict[str, Any]]:
        """Each pair's :meth:`ComparisonResult.report` rows with the model names and
        ``p_value_adjusted``: the p-value corrected across the pairs compared at the same
        segment and k (the family), by Holm's step-down method or Bonferroni's.

        The pairs' summaries are collected in one action (a few rows per pair); the t-tests and
        the correction run on the driver over those rows.
        """
        keys = (*self.options.group_by, "k")
        results = self.results
        beyond = results[0].beyond if results else ()
        summaries = [r.summary.withColumn("__pair", F.lit(i)) for i, r in enumerate(results)]
        with input_errors():
            collected = _with_pair_names(self.pairs, summaries).collect()
        # The order of the summary (segments, then k, nulls last) within each pair, pairs in order.
        collected.sort(key=lambda row: (row["__pair"], *[(row[c] is None, row[c]) for c in keys]))
        rows = []
        for row in collected:
            record = row.asDict()
            del record["__pair"]
            rows.append(with_beyond_t_tests(with_t_test(record, "pairs"), beyond))
        families: Dict[tuple, List[int]] = {}
        for i, row in enumerate(rows):
            families.setdefault(tuple(row[c] for c in keys), []).append(i)
        for members in families.values():
            adjusted = adjust_p_values([rows[i]["p_value"] for i in members], self.correction)
            for i, p in zip(members, adjusted):
                rows[i]["p_value_adjusted"] = p
        return rows


def compare_models(
    models: Union[Mapping[str, DataFrame], DataFrame],
    relevance: DataFrame,
    options: Optional[EvaluationOptions] = None,
    *,
    model_col: Optional[str] = None,
    baseline: Optional[str] = None,
    pairs: str = "baseline",
    correction: str = "holm",
    user_attributes: Optional[DataFrame] = None,
    interactions: Optional[DataFrame] = None,
    items: Optional[DataFrame] = None,
    baseline_recommendations: Optional[DataFrame] = None,
    **option_values: Any,
) -> ModelComparison:
    """Compare the NDCG of N models against one baseline, or every pair of them.

    Each model is evaluated once; each pair is then compared as :func:`compare` compares two
    models (so two models give its figures), and the pairs' p-values at each segment and k are
    corrected for testing them together. ``persist()`` caches the models' per-user figures
    when several outputs are read.

    Parameters
    ----------
    models : mapping of str to DataFrame, or DataFrame
        The models' recommendations by name (in the order to compare), or one table with the
        model's name in ``model_col`` (the names sorted).
    relevance : DataFrame
        The ground truth every model is judged against.
    options : EvaluationOptions, optional
        Applied to every model; the defaults when omitted.
    model_col : str, optional
        With one table: the column naming the model of each row (read as a string).
    baseline : str, optional
        The model the others are compared with (``pairs = "baseline"``); the first by default.
    pairs : {"baseline", "all"}
        Every model against ``baseline``, or every pair (the earlier model as the baseline side).
    correction : {"holm", "bonferroni"}
        The multiple-testing correction of the p-values across the pairs.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by``.
    interactions, items, baseline_recommendations : DataFrame, optional
        The beyond-accuracy inputs for every model: with ``beyond_accuracy``, each pair's per-user
        metrics are paired too, as :func:`compare` pairs them (their p-values are not corrected:
        the correction is NDCG's).
    **option_values
        Fields of :class:`~ndcg_spark.EvaluationOptions` to set (over ``options``).

    Returns
    -------
    ModelComparison
        ``pairs``, ``per_user``, ``summary`` and ``report()`` (with corrected p-values).

    Raises
    ------
    ConfigError
        Fewer than two models, an unknown baseline, pairing or correction.
    InputDataError
        A missing model column or a null model name; and as :func:`ndcg_spark.evaluate`.

    Examples
    --------
    >>> schema = "user_id int, item_id string, score double"
    >>> a = spark.createDataFrame([(1, "x", 0.9), (1, "y", 0.8), (2, "z", 0.9)], schema)
    >>> b = spark.createDataFrame([(1, "y", 0.9), (1, "x", 0.8), (2, "z", 0.9)], schema)
    >>> c = spark.createDataFrame([(1, "x", 0.9), (2, "w", 0.9)], schema)
    >>> rel = spark.createDataFrame([(1, "y", 1.0), (2, "z", 1.0)], "user_id int, item_id string, relevance double")
    >>> result = compare_models({"a": a, "b": b, "c": c}, rel, k=[2], pairs="all")
    >>> [(r["baseline_model"], r["candidate_model"], round(r["mean_difference"], 4)) for r in result.report()]
    [('a', 'b', 0.1845), ('a', 'c', -0.8155), ('b', 'c', -1.0)]
    """
    opts = resolve(options, option_values)
    if pairs not in PAIRINGS:
        raise ConfigError(f"pairs = {pairs!r} is not one of {', '.join(PAIRINGS)}")
    if correction not in CORRECTIONS:
        raise ConfigError(f"correction = {correction!r} is not one of {', '.join(CORRECTIONS)}")
    tables = _models_by_name(models, model_col)
    names = list(tables)
    if len(names) < 2:
        raise ConfigError(f"compare needs at least two models, got {len(names)}: {', '.join(names) or 'none'}")
    if baseline is not None and baseline not in tables:
        raise ConfigError(f"baseline model {baseline!r} is not among the models: {', '.join(names)}")
    if pairs == "all":
        chosen = list(itertools.combinations(names, 2))
    else:
        first = baseline if baseline is not None else names[0]
        chosen = [(first, name) for name in names if name != first]
    # Each table's rows are counted on its evaluation's pass (the 'array' layout as the rows it holds).
    shared = counted(relevance)
    beyond_tables = Tables(interactions, items, baseline_recommendations)
    counts: Dict[Optional[str], RowCount] = {None: shared[1]}
    evaluations = {}
    for name, df in tables.items():
        evaluations[name] = evaluate_counted(df, shared, opts, user_attributes, beyond_tables)
        counts[name] = evaluations[name].counts["recommendations"]
    return ModelComparison(pairs=chosen, evaluations=evaluations, correction=correction, options=opts, counts=counts)


def _models_by_name(
    models: Union[Mapping[str, DataFrame], DataFrame], model_col: Optional[str]
) -> Dict[str, DataFrame]:
    """{name: recommendations}: the mapping as given, or one table split by its model column."""
    if not isinstance(models, DataFrame):
        if model_col is not None:
            raise ConfigError("model_col names a column of one table; give the models as a table, not a mapping")
        return {str(name): df for name, df in models.items()}
    if model_col is None:
        raise ConfigError("give the models as {name: table}, or one table with model_col")
    if model_col not in models.columns:
        raise InputDataError(f"recommendations table has no column {model_col!r} (it has: {', '.join(models.columns)})")
    name = F.col(ident(model_col)).cast("string")
    # The model names are a handful of values: collected once to build the pairs.
    found = sorted((r[0] for r in models.select(name).distinct().collect()), key=lambda v: (v is None, v))
    if found and found[-1] is None:
        raise InputDataError(f"recommendations column {model_col!r} is null in some rows: every row needs its model")
    return {value: models.filter(name == value).drop(model_col) for value in found}


def _with_pair_names(pairs: List[Tuple[str, str]], frames: List[DataFrame]) -> DataFrame:
    named = [
        df.select(F.lit(a).alias("baseline_model"), F.lit(b).alias("candidate_model"), "*")
        for (a, b), df in zip(pairs, frames)
    ]
    return functools.reduce(DataFrame.unionByName, named)
