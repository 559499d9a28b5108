"""Beyond accuracy as one stage of ``evaluate``: from the ranked lists, the judged lists and the
tables of :class:`~ndcg_spark._beyond.sources.Tables`, the scored rows with each per-user metric,
the global figures per segment and k, the items the items table lacks, the exposure curve and
what the metrics used of each table (:func:`beyond_accuracy`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._beyond.columns import unpacked as segments_unpacked
from ndcg_spark._beyond.exposure import catalog_flags, exposure, exposure_curve, global_figures
from ndcg_spark._beyond.novelty import item_table, seen_items, without_seen
from ndcg_spark._beyond.per_user import attach, per_list
from ndcg_spark._beyond.similarity import history_table
from ndcg_spark._beyond.sources import (
    Tables,
    any_reads,
    asked,
    counted_tables,
    interactions_rows,
    item_type_of,
    items_rows,
    named_tables,
    used_rows,
)
from ndcg_spark._beyond.sources import unknown_items as beyond_unknown_items
from ndcg_spark._metrics import registry
from ndcg_spark._spark.counts import RowCount
from ndcg_spark._stages.column_contract import ITEM, ITEMS, SEGMENT
from ndcg_spark._stages.inputs import read_inputs, with_user_attributes
from ndcg_spark._stages.ranking import ranked_lists
from ndcg_spark.options import EvaluationOptions, beyond_global, beyond_per_user


@dataclass(frozen=True)
class BeyondInputs:
    """What beyond accuracy reads besides the lists, resolved once before the input stage: the
    tables (:class:`~ndcg_spark._beyond.sources.Tables`) with their own column names mapped, the
    user attributes likewise, the metrics the run computes (``names``: none without beyond
    accuracy) and the rows read of each table, counted on the evaluation's pass (``read``)."""

    tables: Tables
    user_attributes: Optional[DataFrame]
    names: Tuple[str, ...]
    read: Dict[str, RowCount]
    opts: EvaluationOptions

    @classmethod
    def of(cls, tables: Tables, user_attributes: Optional[DataFrame], opts: EvaluationOptions) -> BeyondInputs:
        tables, user_attributes = named_tables(tables, user_attributes, opts)
        names = asked(opts, tables)
        tables, read = counted_tables(tables, names, opts)
        return cls(tables, user_attributes, names, read, opts)

    def widen(self, item_type: T.DataType) -> T.DataType:
        """The type every table's items are compared in (:func:`~ndcg_spark._beyond.sources.item_type_of`)."""
        if not self.names:
            return item_type
        read = [("interactions", self.tables.interactions), ("items", self.tables.items)]
        if self.tables.baseline is not None:  # in the rows layout (counted_tables)
            read.append(("baseline_recommendations", self.tables.baseline))
        return item_type_of([(name, df) for name, df in read if df is not None], item_type, self.opts)

    def seen(self, recs: DataFrame) -> Optional[DataFrame]:
        """The interactions grouped once, by (user, item), in the recommendations' item type: the
        seen items, popularity, histories, co-occurrence (None without them)."""
        if not self.names or self.tables.interactions is None:
            return None
        return seen_items(interactions_rows(self.tables.interactions, recs.schema[ITEM].dataType, self.opts), self.opts)

    def unseen(self, recs: DataFrame, seen: Optional[DataFrame]) -> Tuple[DataFrame, Optional[RowCount]]:
        """The recommendations without the items each user has seen, under ``seen_items = "drop"``,
        and the rows before they were dropped (counted); else ``recs`` as they are."""
        if seen is None or self.opts.seen_items != "drop":
            return recs, None
        return without_seen(recs, seen, self.opts)

    def shared(self, lists: DataFrame) -> DataFrame:
        """The ranked lists, with beyond accuracy through one exchange: every consumer (NDCG, the
        per-user metrics, exposure, the baseline's check) reads them through it, which Spark
        reuses, so the ranking runs once, not once each."""
        if not self.names:
            return lists
        return lists.repartition(*[F.col(c) for c in (SEGMENT, self.opts.user_col) if c in lists.columns])


@dataclass(frozen=True)
class BeyondFigures:
    """The outcome of :func:`beyond_accuracy`: the scored rows with each per-user metric; per
    segment and k the global figures (``globals_``); the items the items table lacks
    (``unknown``); the exposure curve at the largest k (``curve``, None without interactions);
    what the metrics used of each table (``used``)."""

    scored: DataFrame
    globals_: Optional[DataFrame] = None
    unknown: Optional[DataFrame] = None
    curve: Optional[DataFrame] = None
    used: Optional[DataFrame] = None


def beyond_accuracy(
    scored: DataFrame,
    lists: DataFrame,
    judged: DataFrame,
    extra: BeyondInputs,
    seen: Optional[DataFrame],
    opts: EvaluationOptions,
) -> BeyondFigures:
    """The beyond-accuracy figures of ``extra.names`` (none: ``scored`` as it is). ``seen``: the
    interactions grouped by (user, item) (:meth:`BeyondInputs.seen`).

    The lists and judged lists are the very frames NDCG reads, so Spark plans their shuffles once.
    """
    if not extra.names:
        return BeyondFigures(scored)
    item_type = lists.schema[ITEMS].dataType.elementType
    items = baseline = None
    if extra.tables.items is not None:
        items = items_rows(extra.tables.items, item_type, opts)
    if extra.tables.baseline is not None and any_reads(extra.names, "baseline_recommendations", opts):
        # The baseline's lists as the recommendations' own: same ordering, tie-break and cut, per user.
        alone = opts.unsegmented
        base = read_inputs(extra.tables.baseline, None, alone, widen=lambda _: item_type).recommendations
        baseline = base.transform(ranked_lists, alone)
    per_user = [n for n in extra.names if n in beyond_per_user()]
    stats, totals, per_item = item_table(seen, items, per_user, opts)
    history = None
    # The histories: read by the metrics whose declared parts are the history or a co-occurrence
    # sum (the sums count the pairs within each history); bounded where the serendipity sums pair
    # each history with the user's relevant items.
    parts = registry.parts(per_user, opts)
    if seen is not None and {"history", "pair_sums", "serendipity_sums"} & parts:
        history = history_table(seen, items, opts, bounded="serendipity_sums" in parts)
    if per_user:
        metrics = per_list(lists, judged, stats, totals, history, baseline, per_user, opts, per_item)
        scored = attach(scored, metrics, history, per_user, opts)
    exposed_lists = with_user_attributes(segments_unpacked(lists), extra.user_attributes, opts)
    exposed = exposure(exposed_lists, opts)
    globals_ = curve = None
    flags = catalog_flags(exposed, per_item, items)
    if any(n in beyond_global() for n in extra.names):
        globals_ = global_figures(exposed, flags, extra.names, opts)
    if per_item is not None:
        curve = exposure_curve(exposed, flags, per_item, opts.largest_k)
    used = used_rows(per_item, items, baseline, lists.sparkSession)
    return BeyondFigures(scored, globals_, beyond_unknown_items(per_item, items, exposed), curve, used)
