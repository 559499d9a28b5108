"""What :func:`~ndcg_spark.evaluation.evaluate` returns: :class:`EvaluationResult`, the lazy
frames of an evaluation (per user, the summary, the row accounting, the beyond-accuracy figures).
"""

from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field, replace
from typing import Dict, Optional, Tuple

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from ndcg_spark._beyond.means import aggregates as beyond_aggregates
from ndcg_spark._beyond.means import summary as beyond_summary
from ndcg_spark._charts.plots import BINS
from ndcg_spark._metrics.accuracy import COMPANIONS
from ndcg_spark._results.written_once import WrittenOnce, cutoff_conditions, in_bin
from ndcg_spark._spark.compat import observes
from ndcg_spark._spark.counts import RowCount
from ndcg_spark._spark.sql import alias_of, ident
from ndcg_spark._stages.column_contract import (
    EXCLUDED,
    FIGURES,
    HAS_ATTRIBUTES,
    HAS_JUDGEMENTS,
    both_sides_kept,
    both_sides_kept_sql,
)
from ndcg_spark._stages.summary import accounting, accounting_aggregates, summarize, summary_aggregates
from ndcg_spark.errors import input_errors
from ndcg_spark.options import EvaluationOptions, beyond_per_user


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
        per_user_beyond = [n for n in self.beyond if n in beyond_per_user()]
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
        beyond = [F.col(n) for n in self.beyond if n in beyond_per_user()]
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
        rows = summarize(self._scored, self.options, extra)
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
            sums = accounting(self._scored, self.options).first().asDict()
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
            aggregates = list(accounting_aggregates(opts))
            if one_pass:
                for i, where in enumerate(cutoff_conditions(opts)):
                    aggregates += [
                        f"{a.rsplit(' AS ', 1)[0]} AS {alias_of(a)}__{i}"
                        for a in summary_aggregates(scored.columns, opts, where)
                    ]
                    if histogram:
                        aggregates += [f"{in_bin(where, b)} AS __bin_{i}_{b}" for b in range(BINS)]
            scored = scored.observe(observed, *[F.expr(a) for a in aggregates])
        per_user = replace(result, _scored=scored).per_user
        return WrittenOnce(per_user, result, observed, one_pass)

    def persist(self) -> EvaluationResult:
        """Cache the per-user figures so ``per_user`` and ``summary`` share one computation."""
        return replace(self, _scored=self._scored.persist())

    def unpersist(self) -> None:
        """Drop the cache of :meth:`persist`."""
        self._scored.unpersist()
