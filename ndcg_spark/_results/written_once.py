"""What a client that writes ``per_user`` and the summary once (the job) is given:
:meth:`ndcg_spark.evaluation.EvaluationResult.written_once`'s frames, and what their writes observe
(the summary's figures at each k, the row accounting's sums, the report's histogram)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from ndcg_spark._charts.plots import BINS
from ndcg_spark._spark.compat import observes
from ndcg_spark._spark.sql import FINITE_NDCG, alias_of, ident, ndcg_bin
from ndcg_spark._stages.column_contract import EXCLUDED, both_sides_kept_sql
from ndcg_spark._stages.summary import accounting_aggregates, finish_summary, summary_aggregates
from ndcg_spark.errors import input_errors
from ndcg_spark.options import EvaluationOptions


def in_bin(where: str, b: int) -> str:
    """SQL: the per-user rows of ``where`` (a cutoff's) whose NDCG falls in bin ``b`` of
    :func:`ndcg_spark.report.ndcg_histogram` (equal bins over [0, 1], 1.0 in the last, a value
    that is not finite in none)."""
    shown = " AND ".join([f"NOT {EXCLUDED}", *both_sides_kept_sql()])
    return f"count(CASE WHEN {where} AND {shown} AND {FINITE_NDCG} AND {ndcg_bin(BINS)} = {b} THEN 1 END)"


def _literal(value: Any, sql_type: str) -> str:
    """SQL: ``value`` (None, an int or a float, as an observation returns it) as a literal of
    ``sql_type``, to the last bit (a float's repr reads back as the same double)."""
    if value is None:
        return f"CAST(NULL AS {sql_type})"
    if isinstance(value, float):
        text = (
            "NaN"
            if math.isnan(value)
            else ("Infinity" if value > 0 else "-Infinity")
            if math.isinf(value)
            else repr(value)
        )
        return f"CAST('{text}' AS {sql_type})"
    return f"CAST({int(value)} AS {sql_type})"


def cutoff_conditions(opts: EvaluationOptions) -> List[str]:
    """SQL: each cutoff's rows of the scored frame (``k`` null for the whole list)."""
    return [f"k <=> CAST({int(k)} AS INT)" if k is not None else "k IS NULL" for k in opts.cutoffs]


@dataclass(frozen=True)
class WrittenOnce:
    """An evaluation's ``per_user`` frame and its summary, each to be written once, with what
    their writes observe (:meth:`EvaluationResult.written_once`): write ``per_user``, then
    :meth:`summary`; then read :meth:`summary_rows` and :meth:`row_accounting`."""

    per_user: DataFrame
    result: Any  #: the EvaluationResult (not imported: evaluation imports this module)
    _observed: Optional[Observation] = None
    _one_pass: bool = False
    _rows: Observation = field(default_factory=Observation)

    def summary(self) -> DataFrame:
        """The summary to write, its rows observed as it is written; after ``per_user`` is written."""
        summary = self._summary()
        if not observes(summary):
            return summary
        fields = ", ".join(ident(c) for c in summary.columns)
        return summary.observe(self._rows, F.expr(f"collect_list(struct({fields})) AS rows"))

    def _summary(self) -> DataFrame:
        figures = self._figures() if self._one_pass else None
        if figures is None:
            return self.result.summary
        # The figures of each k aggregated on the per-user write, as the rows of the summary's
        # aggregation (the same columns and types), then the summary's own expressions.
        opts, scored = self.result.options, self.result._scored
        aggregates = summary_aggregates(scored.columns, opts)
        names = [alias_of(a) for a in aggregates]
        schema = scored.groupBy("k").agg(*[F.expr(a) for a in aggregates]).schema
        rows = [(k, *[figures[f"{n}__{i}"] for n in names]) for i, k in enumerate(opts.cutoffs)]
        # An inline table of literals (a local relation, no job of its own): a frame made by
        # createDataFrame is split into spark.default.parallelism slices, and at 200 its one-row
        # write took 14-22 s where it takes 0.5.
        values = ", ".join(
            "(" + ", ".join(_literal(v, f.dataType.simpleString()) for v, f in zip(row, schema.fields)) + ")"
            for row in rows
        )
        columns = ", ".join(ident(f.name) for f in schema.fields)
        aggregated = scored.sparkSession.sql(f"SELECT * FROM VALUES {values} AS figures({columns})")
        return finish_summary(aggregated, scored, opts, aggregates)

    def _figures(self) -> Optional[Dict[str, Any]]:
        try:
            figures = self._observed.get if self._observed is not None else None
        except Exception:  # noqa: BLE001 - nothing observed (no rows scored)
            return None
        return figures or None

    def histogram(self) -> Optional[List[Dict[str, Any]]]:
        """The rows of :func:`ndcg_spark.report.ndcg_histogram` of ``per_user`` (``k``, ``bin``,
        ``users``, the bins that hold users) as the per-user write counted them; None when it did
        not (then count them from ``per_user``)."""
        figures = self._figures() if self._one_pass else None
        if figures is None or "__bin_0_0" not in figures:
            return None
        cutoffs = self.result.options.cutoffs
        counts = [(k, b, int(figures[f"__bin_{i}_{b}"])) for i, k in enumerate(cutoffs) for b in range(BINS)]
        return [{"k": k, "bin": b, "users": n} for k, b, n in counts if n > 0]

    def summary_rows(self) -> List[Dict[str, Any]]:
        """The summary's rows, as written (in its order), each as a dict."""
        try:
            return [row.asDict() for row in self._rows.get["rows"]]
        except Exception:  # noqa: BLE001 - nothing observed: computed below
            pass
        with input_errors():
            return [row.asDict() for row in self.result.summary.collect()]

    def row_accounting(self) -> Dict[str, int]:
        """:meth:`EvaluationResult.row_accounting`'s sums, observed on the per-user write when they could be."""
        figures = self._figures()
        if figures:
            names = [alias_of(a) for a in accounting_aggregates(self.result.options)]
            sums = {name: int(figures[name]) for name in names}
            sums["recommendations_beyond_k"] = self.result.ranked_rows.rows() - sums.pop("recommendations_listed")
            return self.result.with_beyond_sums(sums)
        return self.result.row_accounting()

    def unpersist(self) -> None:
        """Drop the cache the evaluation made for the writes, if it made one."""
        if not self._one_pass:
            self.result.unpersist()
