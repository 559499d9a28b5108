"""``evaluate``: per-user CG, DCG, IDCG and NDCG@k, and their summary, as lazy DataFrames.

:func:`evaluate_rows` is the order of the stages, each a module of ``_stages`` that writes
columns of the contract (:mod:`~ndcg_spark._stages.column_contract`) and reads only the contract's,
never another stage's module:

1. :mod:`~ndcg_spark._stages.inputs`: the array layout as rows, the tables' shapes checked, the
   row rules applied (bad rows stop the run, or are set aside under quarantine), the inputs
   narrowed to what the metric reads; with segments of the recommendations (a model column),
   both tables keyed by the packed segment;
2. :mod:`~ndcg_spark._stages.ranking`: each user's top k by a ``row_number()`` window, as a list;
3. :mod:`~ndcg_spark._stages.judged`: each user's judgements and ideal list;
4. :mod:`~ndcg_spark._stages.lists`: the two joined on the user (and segment), full outer, so no
   user is lost;
5. :mod:`~ndcg_spark._stages.scoring`: gains and the sums at every cutoff, on each list's own
   row, then one row per (user, k);
6. :mod:`~ndcg_spark._stages.summary`: the exclusion policies, then (lazily, in
   :class:`~ndcg_spark._results.evaluation_result.EvaluationResult`) the summary and the row
   accounting;
7. beside scoring, beyond accuracy (:mod:`~ndcg_spark._beyond.stage`), with the tables it reads
   resolved before the input stage (their items join the lists').

Expressions are Spark SQL text (:mod:`ndcg_spark._spark.sql`): the same built-in functions as the
``Column`` API, with far fewer Python -> JVM calls to build the plan.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, Observation

from ndcg_spark._beyond.sources import TABLES, Tables, computed
from ndcg_spark._beyond.stage import BeyondInputs, beyond_accuracy
from ndcg_spark._metrics import accuracy as _metrics
from ndcg_spark._results.evaluation_result import EvaluationResult
from ndcg_spark._spark.counts import RowCount, counted
from ndcg_spark._stages.inputs import as_rows, read_inputs, reading_options, with_user_attributes
from ndcg_spark._stages.judged import judged_lists
from ndcg_spark._stages.lists import join_lists
from ndcg_spark._stages.ranking import ranked_lists
from ndcg_spark._stages.scoring import score
from ndcg_spark._stages.summary import with_exclusions
from ndcg_spark.errors import ConfigError
from ndcg_spark.options import EvaluationOptions, resolve

__all__ = ["BEYOND_TABLES", "COMPANIONS", "SUMMARY_COLUMNS", "EvaluationResult", "beyond_metrics", "evaluate"]

#: The summary's figures per segment and k after ``k``, as the job's console and report show
#: them: (column, header). Re-exported from the metric registry for the library's clients.
SUMMARY_COLUMNS = _metrics.SUMMARY_COLUMNS

#: The companion metrics (``companion_metrics = True``), each with ``name`` (its ``per_user``
#: column), ``summary`` (its mean's column in ``summary``) and ``header`` (its console header),
#: in every output's order.
COMPANIONS = _metrics.COMPANIONS


def evaluate(
    recommendations: DataFrame,
    relevance: DataFrame,
    options: Optional[EvaluationOptions] = None,
    *,
    user_attributes: Optional[DataFrame] = None,
    interactions: Optional[DataFrame] = None,
    items: Optional[DataFrame] = None,
    baseline_recommendations: Optional[DataFrame] = None,
    **option_values: Any,
) -> EvaluationResult:
    """Per-user and mean NDCG@k of ranked recommendations against graded relevance.

    Parameters
    ----------
    recommendations : DataFrame
        One row per recommended (user, item) with a score (higher is better) or a rank column.
    relevance : DataFrame
        Ground truth: one row per judged (user, item) with a numeric relevance.
    options : EvaluationOptions, optional
        What to compute and how; the defaults when omitted.
    user_attributes : DataFrame, optional
        One row per user with segment columns named in ``group_by`` (joined on the user column).
    interactions : DataFrame, optional
        What users did before the recommendations (user, item; repeats count): popularity,
        each user's history and co-occurrence, for the beyond-accuracy metrics.
    items : DataFrame, optional
        The catalog: one row per item, with ``item_category_col`` and ``item_features_col`` when set.
    baseline_recommendations : DataFrame, optional
        Another model's recommendations, as ``recommendations`` are given: unexpectedness.
    **option_values
        Fields of :class:`EvaluationOptions` to set (over ``options``), e.g. ``k=[5, 10]``,
        ``gain="exponential"``, ``user_col="query"``, ``group_by=["model"]``.

    Returns
    -------
    EvaluationResult
        With lazy ``per_user`` and ``summary`` DataFrames; ``input_rows()`` (the rows read of
        each table) once an action has run.

    Raises
    ------
    ConfigError
        An unknown option or a value out of its choices.
    InputDataError
        A missing column or an unsupported type (from the schemas alone). A bad row raises when
        an action runs, naming the table, column, problem and the row's key.

    Examples
    --------
    >>> recs = spark.createDataFrame([(1, "A", 0.9), (1, "B", 0.8)], "user_id int, item_id string, score double")
    >>> rel = spark.createDataFrame([(1, "B", 1.0)], "user_id int, item_id string, relevance double")
    >>> round(evaluate(recs, rel, k=[2]).summary.first().mean_ndcg, 4)
    0.6309
    >>> opts = EvaluationOptions(k=(1, 2), gain="exponential")
    >>> [round(r.mean_ndcg, 4) for r in evaluate(recs, rel, opts).summary.collect()]
    [0.0, 0.6309]
    """
    opts = resolve(options, option_values)
    tables = Tables(interactions, items, baseline_recommendations)
    return evaluate_counted(recommendations, counted(relevance), opts, user_attributes, tables)


#: The tables the beyond-accuracy metrics read, as the job and ``evaluate``'s keywords name them.
BEYOND_TABLES = TABLES


def beyond_metrics(opts: EvaluationOptions, given: Sequence[str]) -> Tuple[str, ...]:
    """The beyond-accuracy metrics ``evaluate`` computes under ``opts`` with the tables named
    ``given`` (``interactions``, ``items``, ``baseline_recommendations``): what a gate may name,
    known before anything is read.

    Raises
    ------
    ConfigError
        A metric named in ``beyond_accuracy`` whose input is missing, or an unknown table name.

    Examples
    --------
    >>> beyond_metrics(EvaluationOptions(beyond_accuracy=True), ["interactions"])[:3]
    ('novelty', 'surprisal', 'unseen_share')
    """
    unknown = [g for g in given if g not in TABLES]
    if unknown:
        raise ConfigError(f"{unknown[0]!r} is not a beyond-accuracy table ({', '.join(TABLES)})")
    return computed(opts, given)


def evaluate_counted(
    recommendations: DataFrame,
    relevance: Tuple[DataFrame, RowCount],
    options: EvaluationOptions,
    user_attributes: Optional[DataFrame] = None,
    tables: Optional[Tables] = None,
) -> EvaluationResult:
    """:func:`evaluate` of a relevance table already counted (:func:`ndcg_spark._spark.counts.counted`).

    Evaluations of one relevance table (``compare``'s models) share its counted frame: one
    observation, so one plan of the relevance, which Spark then runs once for them all.
    """
    rows, recs_read = counted(as_rows(recommendations, options))
    rel, rel_read = relevance
    result = evaluate_rows(rows, rel, options, user_attributes, tables)
    return replace(result, counts={"recommendations": recs_read, "relevance": rel_read, **result.counts})


def evaluate_rows(
    recommendations: DataFrame,
    relevance: DataFrame,
    options: EvaluationOptions,
    user_attributes: Optional[DataFrame] = None,
    tables: Optional[Tables] = None,
) -> EvaluationResult:
    """:func:`evaluate` of recommendations already in the rows layout (:func:`ndcg_spark._stages.inputs.as_rows`).

    ``options`` are the caller's (resolved), kept as they are in the result; the stages read
    the rows with :func:`ndcg_spark._stages.inputs.reading_options`.
    """
    opts = reading_options(options)
    extra = BeyondInputs.of(tables or Tables(), user_attributes, opts)
    inputs = read_inputs(recommendations, relevance, opts, extra.user_attributes, extra.widen)
    seen = extra.seen(inputs.recommendations)
    recs, unseen_rows = extra.unseen(inputs.recommendations, seen)
    ranked_rows = RowCount(recs, Observation())
    lists = extra.shared(recs.transform(ranked_lists, opts, ranked_rows))
    judged = inputs.relevance.transform(judged_lists, opts)
    scored = join_lists(lists, judged, opts).transform(score, opts).transform(with_exclusions, opts)
    figures = beyond_accuracy(scored, lists, judged, extra, seen, opts)
    return EvaluationResult(
        _scored=figures.scored.transform(with_user_attributes, extra.user_attributes, opts),
        options=options,
        rejected=inputs.rejected,
        ranked_rows=ranked_rows,
        beyond=extra.names,
        _beyond_globals=figures.globals_,
        _unknown_items=figures.unknown,
        _exposure_curve=figures.curve,
        _beyond_used=figures.used,
        _unseen_rows=unseen_rows,
        counts=extra.read,
    )
