"""``evaluate``: per-user CG, DCG, IDCG and NDCG@k, and their summary, as lazy DataFrames.

The stages, each a module of its own that writes columns of the contract
(:mod:`~ndcg_spark._stages.contract`) and reads only the contract's, never another stage's module:

1. :mod:`~ndcg_spark._stages.inputs`: the array layout as rows, the tables' shapes checked, the
   inputs narrowed to what the metric reads;
2. :mod:`~ndcg_spark._stages.rules`: bad rows stop the run (or are set aside under quarantine);
3. :mod:`~ndcg_spark._stages.ranking`: each user's top k by a ``row_number()`` window, as a list;
4. :mod:`~ndcg_spark._stages.judged`: each user's judgements and ideal list;
5. the two joined on the user, full outer, so no user is lost. With segments of the
   recommendations (a model column), the segment columns are packed into one struct and the
   relevance rows are repeated for every segment the recommendations hold before they are
   grouped, and the join is on (segment, user): each segment is then exactly a separate run of
   that segment's recommendations against the whole relevance table, and both sides arrive
   partitioned by the keys they are joined on (no exchange after the lists meet);
6. :mod:`~ndcg_spark._stages.scoring`: gains and the sums at every cutoff, on each list's own row, then
   one row per (user, k);
7. :mod:`~ndcg_spark._stages.summary`: the exclusion policies, then (lazily) the summary and the
   row accounting.

Expressions are Spark SQL text (:mod:`ndcg_spark._spark.sql`): the same built-in functions as the
``Column`` API, with far fewer Python -> JVM calls to build the plan.
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from ndcg_spark._beyond.columns import unpacked as segments_unpacked
from ndcg_spark._beyond.exposure import catalog_flags, exposure, exposure_curve, global_figures
from ndcg_spark._beyond.means import aggregates as beyond_aggregates
from ndcg_spark._beyond.means import summary as beyond_summary
from ndcg_spark._beyond.novelty import item_table, seen_items, without_seen
from ndcg_spark._beyond.per_user import attach, per_list
from ndcg_spark._beyond.similarity import history_table
from ndcg_spark._beyond.sources import (
    TABLES,
    Tables,
    asked,
    computed,
    counted_tables,
    interactions_rows,
    item_type_of,
    items_rows,
    named_tables,
    used_rows,
)
from ndcg_spark._beyond.sources import unknown_items as beyond_unknown_items
from ndcg_spark._charts.plots import BINS
from ndcg_spark._metrics import accuracy as _metrics
from ndcg_spark._results.written_once import WrittenOnce, _cutoff_conditions, _in_bin
from ndcg_spark._spark.compat import observes
from ndcg_spark._spark.counts import RowCount, counted
from ndcg_spark._spark.sql import alias_of, ident, string_literal
from ndcg_spark._stages import inputs as _inputs
from ndcg_spark._stages import judged as _judged
from ndcg_spark._stages import ranking as _ranking
from ndcg_spark._stages import rules as _rules
from ndcg_spark._stages import scoring as _scoring
from ndcg_spark._stages import summary as _summary
from ndcg_spark._stages.contract import (
    EXCLUDED,
    FIGURES,
    HAS_ATTRIBUTES,
    HAS_JUDGEMENTS,
    ITEM,
    SEGMENT,
    both_sides_kept,
    both_sides_kept_sql,
)
from ndcg_spark.errors import ConfigError, input_errors
from ndcg_spark.options import BEYOND_GLOBAL, BEYOND_PER_USER, EvaluationOptions, resolve

#: The summary's figures per segment and k after ``k``, as the job's console and report show
#: them: (column, header). Re-exported from the metric registry for the library's clients.
SUMMARY_COLUMNS = _metrics.SUMMARY_COLUMNS

#: The companion metrics (``companion_metrics = True``), each with ``name`` (its ``per_user``
#: column), ``summary`` (its mean's column in ``summary``) and ``header`` (its console header),
#: in every output's order.
COMPANIONS = _metrics.COMPANIONS


@dataclass(frozen=True)
class EvaluationResult:
    """The outcome of :func:`evaluate`: lazy DataFrames, computed when an action runs.

    Attributes
    ----------
    options : EvaluationOptions
        The options the figures were computed with, as the caller gave them (resolved).
    rejected : dict of str to DataFrame, optional
        Under ``on_invalid_rows = "quarantine"``, the rows set aside per table
        (``"recommendations"``, ``"relevance"``), with a ``reason`` column.
    ranked_rows : RowCount
        The recommendation rows that entered the ranking, counted on the evaluation's own pass.
    counts : dict of str to RowCount
        The rows read of each input table (``"recommendations"``, ``"relevance"``), counted on
        the evaluation's own pass: :meth:`input_rows`.

    Examples
    --------
    >>> recs = spark.createDataFrame([(1, "A", 0.9), (1, "B", 0.8)], "user_id int, item_id string, score double")
    >>> rel = spark.createDataFrame([(1, "B", 1.0)], "user_id int, item_id string, relevance double")
    >>> result = evaluate(recs, rel, k=[1, 2])
    >>> result.per_user.select("user_id", "k", "dcg", "idcg", "ndcg").show()
    +-------+---+------------------+----+------------------+
    |user_id|  k|               dcg|idcg|              ndcg|
    +-------+---+------------------+----+------------------+
    |      1|  1|               0.0| 1.0|               0.0|
    |      1|  2|0.6309297535714575| 1.0|0.6309297535714575|
    +-------+---+------------------+----+------------------+
    <BLANKLINE>
    """

    #: One row per (segment, user, k) for every user, excluded ones included, with the policy
    #: flag and the contract's carried counts: everything else is derived from it.
    _scored: DataFrame
    options: EvaluationOptions
    rejected: Optional[Dict[str, DataFrame]] = None
    ranked_rows: Optional[RowCount] = None
    counts: Dict[str, RowCount] = field(default_factory=dict)
    #: The beyond-accuracy metrics computed (per user, then global), in every output's order.
    beyond: Tuple[str, ...] = ()
    #: Per segment and k, the global beyond-accuracy figures; and the items the items table lacks.
    _beyond_globals: Optional[DataFrame] = None
    _unknown_items: Optional[DataFrame] = None
    #: The exposure curve at the largest k (with beyond accuracy and interactions).
    _exposure_curve: Optional[DataFrame] = None
    #: One row: what the metrics used of each beyond-accuracy table read (the row accounting's).
    _beyond_used: Optional[DataFrame] = None
    #: Under seen_items = "drop": the recommendations' rows before the seen ones were dropped.
    _unseen_rows: Optional[RowCount] = None

    @property
    def per_user(self) -> DataFrame:
        """Long form: segment columns, user, ``k`` (null for the whole list), cg, dcg, idcg, ndcg,
        n_recommended, n_relevant (and the companion metrics when asked for)."""
        extra = [m.name for m in COMPANIONS] if self.options.companion_metrics else []
        columns = [*self.options.group_by, self.options.user_col, "k", *FIGURES, *extra]
        per_user_beyond = [n for n in self.beyond if n in BEYOND_PER_USER]
        if per_user_beyond:
            # Every user with a list is scored beyond accuracy: one NDCG policies leave out keeps
            # its row, its NDCG figures null.
            scored_beyond = functools.reduce(operator.or_, [F.col(n).isNotNull() for n in per_user_beyond])
            kept = functools.reduce(
                operator.and_, both_sides_kept(), ~F.col(EXCLUDED) | (F.col("n_recommended") > 0) | scored_beyond
            )
            ndcg_figures = {"cg", "dcg", "idcg", "ndcg", *extra}
            shown = [
                F.when(~F.col(EXCLUDED), F.col(ident(c))).alias(c) if c in ndcg_figures else F.col(ident(c))
                for c in columns
            ]
            return self._scored.filter(kept).select(*shown, *[F.col(n) for n in per_user_beyond])
        # One filter and one projection, as SQL text: two operations for Spark to analyse.
        kept = " AND ".join([f"NOT {EXCLUDED}", *both_sides_kept_sql()])
        return self._scored.where(kept).selectExpr(*[ident(c) for c in columns])

    def every_user(self) -> DataFrame:
        """Every (segment, user, k), those the exclusion policies leave out too: segment columns,
        user, ``k``, ``ndcg``, ``n_recommended``, ``n_relevant`` and ``has_relevance`` (whether
        the user has relevance rows), the counts the policies read (as :func:`compare` pairs them);
        then each per-user beyond-accuracy metric computed."""
        keys = [*self.options.group_by, self.options.user_col, "k", "ndcg", "n_recommended", "n_relevant"]
        beyond = [F.col(n) for n in self.beyond if n in BEYOND_PER_USER]
        return self._scored.select(
            *[F.col(ident(c)) for c in keys], F.col(HAS_JUDGEMENTS).alias("has_relevance"), *beyond
        )

    @property
    def summary(self) -> DataFrame:
        """One row per segment and k (k ascending, the whole-list cutoff last): the number of
        users, mean NDCG with its 95% interval, mean DCG, std of NDCG, policy counts (and the
        companion metrics' means when asked for)."""
        # The beyond-accuracy means ride on NDCG's pass over the per-user rows (one pass, not two).
        extra = beyond_aggregates(self.beyond, self.options)
        rows = _summary.summarize(self._scored, self.options, extra)
        if not self.beyond:
            return rows
        return beyond_summary(rows, self._beyond_globals, self.beyond, self.options)

    def unknown_items(self) -> Dict[str, int]:
        """{"interactions_unknown_items": rows, "recommended_unknown_items": items}: what the items
        table lacks, counted, never dropped in silence (0 without an items table; one small job)."""
        if self._unknown_items is None:
            return {"interactions_unknown_items": 0, "recommended_unknown_items": 0}
        with input_errors():
            return self._unknown_items.first().asDict()

    def exposure_curve(self) -> Optional[DataFrame]:
        """The report's exposure curve at the largest k, catalog-wide: the catalog's items by
        popularity rank in the interactions, in at most 100 bins, each with ``bin``,
        ``first_rank``, ``last_rank``, ``items``, ``exposure_share`` (of the recommendations
        within k) and ``interaction_share`` (:func:`ndcg_spark._beyond.exposure.exposure_curve`);
        None without beyond accuracy or without interactions."""
        return self._exposure_curve

    def row_accounting(self) -> Dict[str, int]:
        """Sums that account for the input rows that reached the metric (one small job).

        The lists' sums (:func:`ndcg_spark._stages.summary.accounting`), and
        ``recommendations_beyond_k``: the rows that entered the ranking (counted as they passed,
        on the first action that computed the lists, this one if none did) less the rows the
        lists hold; for each beyond-accuracy table read, what its metrics used
        (:func:`ndcg_spark._beyond.sources.used_rows`; ``baseline_beyond_k``: the baseline's rows
        read less those its lists hold). The job checks that the rows read add up to these and
        the rows set aside.
        """
        with input_errors():
            sums = _summary.accounting(self._scored, self.options).first().asDict()
        sums["recommendations_beyond_k"] = self.ranked_rows.rows() - sums.pop("recommendations_listed")
        return self.with_beyond_sums(sums)

    def with_beyond_sums(self, sums: Dict[str, int]) -> Dict[str, int]:
        """``sums`` (the lists' accounting) with the beyond-accuracy tables' (one small job when
        any was read): what the metrics used of each (:func:`ndcg_spark._beyond.sources.used_rows`),
        ``baseline_beyond_k`` (the baseline's rows read less those its lists hold) and, under
        ``seen_items = "drop"``, ``recommendations_seen``."""
        sums = dict(sums)
        if self._beyond_used is not None:
            with input_errors():
                sums.update(self._beyond_used.first().asDict())
        if self._unseen_rows is not None:
            sums["recommendations_seen"] = self._unseen_rows.rows() - self.ranked_rows.rows()
        if "baseline_listed" in sums:
            sums["baseline_beyond_k"] = self.counts["baseline_recommendations"].rows() - sums["baseline_listed"]
        return sums

    def input_rows(self) -> Dict[str, int]:
        """{"recommendations": rows, "relevance": rows}: the rows the evaluation read of each table
        (and of each beyond-accuracy table its metrics read: ``interactions``, ``items``,
        ``baseline_recommendations``).

        Counted as the rows passed on the evaluation's own pass (no pass of their own), so read
        them after an action has computed the per-user figures (``per_user``, ``summary``,
        :meth:`row_accounting`). Recommendations in the 'array' layout count one row per
        recommended item, as the evaluation reads them.

        Returns
        -------
        dict of str to int
            ``{"recommendations": n, "relevance": n}``.

        Examples
        --------
        >>> recs = spark.createDataFrame([(1, "A", 0.9), (1, "B", 0.8), (2, "C", 0.5)], "user_id int, item_id string, score double")
        >>> rel = spark.createDataFrame([(1, "B", 1.0)], "user_id int, item_id string, relevance double")
        >>> result = evaluate(recs, rel, k=[1])
        >>> _ = result.summary.collect()
        >>> result.input_rows()
        {'recommendations': 3, 'relevance': 1}
        """
        if not self.counts:
            raise ValueError("this result was not made by evaluate: its input rows were not counted")
        return {table: count.rows() for table, count in self.counts.items()}

    def written_once(self, again: bool = True, histogram: bool = False) -> WrittenOnce:
        """``per_user`` and ``summary`` for a client that writes each once (the job), the summary
        after the per-user table: the summary's rows and the row accounting's sums are observed
        on those writes, no pass of their own. :meth:`WrittenOnce.unpersist` when done.

        ``again``: whether the client reads ``per_user`` again after writing it (a histogram, a
        pairing). Then, or where one pass cannot give the summary (segments, beyond accuracy,
        user attributes, the bootstrap interval), the per-user figures are cached
        (:meth:`persist`) and the summary is aggregated from the cache as it is written; without
        segments the row accounting's sums ride on the per-user write. Otherwise nothing is
        cached: the per-user write is the one pass, and an ``Observation`` on it aggregates the
        summary's figures at each k and the row accounting's sums; the summary written is made
        from those figures (a handful of rows) by the same expressions. Where a session cannot
        observe, everything is computed as :attr:`summary` and :meth:`row_accounting` compute it.
        ``histogram``: the one pass also counts the report's NDCG histogram
        (:meth:`WrittenOnce.histogram`).
        """
        opts, scored = self.options, self._scored
        one_pass = (
            not again
            and observes(scored)
            and not opts.group_by
            and not self.beyond
            and opts.confidence_interval == "normal"
            and HAS_ATTRIBUTES not in scored.columns
        )
        result = self if one_pass else self.persist()
        scored, observed = result._scored, None
        if observes(scored) and not opts.group_by:
            observed = Observation()
            aggregates = list(_summary.accounting_aggregates(opts))
            if one_pass:
                for i, where in enumerate(_cutoff_conditions(opts)):
                    aggregates += [
                        f"{a.rsplit(' AS ', 1)[0]} AS {alias_of(a)}__{i}"
                        for a in _summary.summary_aggregates(scored.columns, opts, where)
                    ]
                    if histogram:
                        aggregates += [f"{_in_bin(where, b)} AS __bin_{i}_{b}" for b in range(BINS)]
            scored = scored.observe(observed, *[F.expr(a) for a in aggregates])
        per_user = replace(result, _scored=scored).per_user
        return WrittenOnce(per_user, result, observed, one_pass)

    def persist(self) -> EvaluationResult:
        """Cache the per-user figures so ``per_user`` and ``summary`` share one computation."""
        return replace(self, _scored=self._scored.persist())

    def unpersist(self) -> None:
        """Drop the cache of :meth:`persist`."""
        self._scored.unpersist()


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
    rows, recs_read = counted(_inputs.as_rows(recommendations, options))
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
    opts = _inputs.reading_options(options)
    tables, user_attributes = named_tables(tables or Tables(), user_attributes, opts)
    beyond = asked(opts, tables)
    tables, beyond_read = counted_tables(tables, beyond, opts)
    _inputs.check_segments(recommendations, user_attributes, opts)
    _inputs.check_tables(recommendations, relevance, opts)
    # Read before the row rules: a segment whose every row is set aside is still a segment.
    served = _inputs.segments_served(recommendations, opts)
    rejected = None
    if opts.on_invalid_rows == "quarantine":
        recommendations, rejected_recs = _rules.split_rows(recommendations, "recommendations", opts)
        relevance, rejected_rel = _rules.split_rows(relevance, "relevance", opts)
        rejected = {"recommendations": rejected_recs, "relevance": rejected_rel}
    else:
        recommendations = _rules.guard_rows(recommendations, "recommendations", opts)
        relevance = _rules.guard_rows(relevance, "relevance", opts)
    item_type = _inputs.common_item_type(
        recommendations.schema[opts.item_col].dataType, relevance.schema[opts.item_col].dataType, opts
    )
    if beyond:
        item_type = item_type_of(_beyond_tables(tables, beyond, opts), item_type, opts)
    recs, rel = _inputs.narrow(recommendations, relevance, opts, item_type)
    if served is not None:
        recs, rel = with_segment(recs, rel, served)
    seen = unseen_rows = None
    if beyond and tables.interactions is not None:
        # The interactions grouped once, by (user, item): the seen items, popularity, histories, co-occurrence.
        seen = seen_items(interactions_rows(tables.interactions, recs.schema[ITEM].dataType, opts), opts)
        if opts.seen_items == "drop":
            recs, unseen_rows = without_seen(recs, seen, opts)
    ranked_rows = RowCount(recs, Observation())
    lists = recs.transform(_ranking.ranked_lists, opts, ranked_rows)
    if beyond:
        # Every consumer (NDCG, the per-user metrics, exposure, the baseline's check) reads the
        # lists through one exchange, which Spark reuses: the ranking runs once, not once each.
        lists = lists.repartition(*[F.col(c) for c in (SEGMENT, opts.user_col) if c in lists.columns])
    judged = rel.transform(_judged.judged_lists, opts)
    scored = join_lists(lists, judged, opts).transform(_scoring.score, opts).transform(_summary.with_exclusions, opts)
    globals_ = unknown = curve = used = None
    if beyond:
        item_type = recs.schema[ITEM].dataType
        scored, globals_, unknown, curve, used = beyond_accuracy(
            scored, lists, judged, tables, item_type, beyond, user_attributes, relevance, opts, seen
        )
    scored = scored.transform(_inputs.with_user_attributes, user_attributes, opts)
    return EvaluationResult(
        _scored=scored,
        options=options,
        rejected=rejected,
        ranked_rows=ranked_rows,
        beyond=beyond,
        _beyond_globals=globals_,
        _unknown_items=unknown,
        _exposure_curve=curve,
        _beyond_used=used,
        _unseen_rows=unseen_rows,
        counts=beyond_read,
    )


def _beyond_tables(tables: Tables, names: Tuple[str, ...], opts: EvaluationOptions) -> List[Tuple[str, DataFrame]]:
    """The beyond-accuracy tables the run reads, each as rows, by name: their items join the lists'."""
    read = [("interactions", tables.interactions), ("items", tables.items)]
    if tables.baseline is not None:  # in the rows layout (counted_tables)
        read.append(("baseline_recommendations", tables.baseline))
    return [(name, df) for name, df in read if df is not None]


def beyond_accuracy(
    scored: DataFrame,
    lists: DataFrame,
    judged: DataFrame,
    tables: Tables,
    item_type: Any,
    names: Tuple[str, ...],
    user_attributes: Optional[DataFrame],
    relevance: DataFrame,
    opts: EvaluationOptions,
    seen: Optional[DataFrame] = None,
) -> Tuple[DataFrame, Optional[DataFrame], DataFrame, Optional[DataFrame], Optional[DataFrame]]:
    """The scored rows with the per-user beyond-accuracy metrics (:mod:`ndcg_spark._beyond`), the
    global figures per segment and k, the count of items the items table lacks, the exposure
    curve at the largest k (None without interactions) and what the metrics used of each table
    (:func:`ndcg_spark._beyond.sources.used_rows`). ``seen``: the interactions grouped by (user,
    item) (:func:`ndcg_spark._beyond.novelty.seen_items`), None without them.

    The lists and judged lists are the very frames NDCG reads, so Spark plans their shuffles once.
    """
    items = baseline = None
    if tables.items is not None:
        items = items_rows(tables.items, item_type, opts)
    if tables.baseline is not None and "unexpectedness" in names:
        # The baseline's lists as the recommendations' own: same ordering, tie-break and cut, per user.
        alone = replace(opts, group_by=())
        base = tables.baseline  # in the rows layout (counted_tables)
        _inputs.check_schema(base, "recommendations", alone)
        base = _rules.guard_rows(base, "recommendations", alone)
        baseline = _inputs.narrow(base, relevance, alone, item_type)[0].transform(_ranking.ranked_lists, alone)
    per_user = [n for n in names if n in BEYOND_PER_USER]
    stats, totals, per_item = item_table(seen, items, per_user, opts)
    history = None
    # The histories: read by these metrics, and the co-occurrence count's pairs (diversity's too).
    wants_history = {"unseen_share", "serendipity"} | ({"diversity"} if opts.similarity == "cooccurrence" else set())
    if seen is not None and wants_history & set(per_user):
        history = history_table(seen, items, opts, bounded="serendipity" in per_user)
    if per_user:
        metrics = per_list(lists, judged, stats, totals, history, baseline, per_user, opts, per_item)
        scored = attach(scored, metrics, history, per_user, opts)
    exposed_lists = _inputs.with_user_attributes(segments_unpacked(lists), user_attributes, opts)
    exposed = exposure(exposed_lists, opts)
    globals_ = curve = None
    flags = catalog_flags(exposed, per_item, items)
    if any(n in BEYOND_GLOBAL for n in names):
        globals_ = global_figures(exposed, flags, names, opts)
    if per_item is not None:
        curve = exposure_curve(exposed, flags, per_item, opts.largest_k)
    used = used_rows(per_item, items, baseline, lists.sparkSession)
    return scored, globals_, beyond_unknown_items(per_item, items, exposed), curve, used


def with_segment(recs: DataFrame, rel: DataFrame, served: DataFrame) -> Tuple[DataFrame, DataFrame]:
    """Both tables keyed by the packed segment (``SEGMENT``): the recommendations' segment
    columns as one struct, and the relevance rows repeated for every segment ``served`` holds.

    A struct of nulls equals a struct of nulls, so a plain equi-join on (``SEGMENT``, user)
    matches a null model with a null model, as a filter ``model IS NULL`` would select it; and
    both lists are then grouped by the very keys they are joined on, so the join needs no
    exchange of its own. The relevance rows are repeated before their shuffle, not the judged
    lists after it: each row is shuffled once for each segment, where repeating the lists
    shuffled every judgement once more and the ranked lists again besides.
    """
    segments = list(served.columns)
    packed = "named_struct(" + ", ".join(f"{string_literal(c)}, {ident(c)}" for c in segments) + f") AS {SEGMENT}"
    rest = [ident(c) for c in recs.columns if c not in segments]
    return (
        recs.selectExpr(packed, *rest),
        rel.crossJoin(F.broadcast(served.selectExpr(packed))),
    )


def join_lists(lists: DataFrame, judged: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Ranked lists and judged lists, full outer, so no user is lost.

    Without segments of the recommendations the join is on the user. With them, on the packed
    segment and the user (:func:`with_segment`): every judged user is there for every segment,
    so a judged user that a segment did not serve is, in that segment, a user without
    recommendations (as in a separate run of that segment alone), and no segment appears that
    the recommendations do not hold. The segment columns are unpacked after the join.
    """
    if SEGMENT not in lists.columns:
        return lists.join(judged, on=opts.user_col, how="full")
    joined = lists.join(judged, on=[SEGMENT, opts.user_col], how="full")
    segments = [f.name for f in joined.schema[SEGMENT].dataType.fields]
    unpacked = [f"{SEGMENT}.{ident(c)} AS {ident(c)}" for c in segments]
    return joined.selectExpr(*unpacked, *[ident(c) for c in joined.columns if c != SEGMENT])
