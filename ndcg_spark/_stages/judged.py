"""Judged lists: each user's judgements and the ideal list.

Reads the narrowed relevance (user, ``ITEM``, ``REL``; with segments of the recommendations,
the packed ``SEGMENT`` too: the rows repeated for each segment) and gives one row per user (per
segment and user) with these columns of the contract (:mod:`ndcg_spark._stages.column_contract`):

========================  ===============================================================
``JUDGED_ITEMS``          array: the judged items
``JUDGED_RELEVANCE``      array: their relevance, element for element
``IDEAL``                 array<double>: the grades above 0, largest first, at most the
                          largest k (the ideal list; 0 grades would add 0.0 terms only)
``n_relevant``            int: judged items with relevance above 0
``N_RELEVANT_BINARY``     int: judged items relevant for the companion metrics (when asked)
``HAS_JUDGEMENTS``        boolean: true (null on the other side of the join: no judgements)
``JUDGED_REPEATS``        int: rows merged by ``duplicate_relevance = "max"`` (else 0: a
                          repeated judgement stops the run)
``JUDGED_ROWS``           int: the relevance rows of the user
========================  ===============================================================
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._metrics.accuracy import is_relevant
from ndcg_spark._spark.sql import gain_mapped, repeat_count
from ndcg_spark._stages.column_contract import (
    HAS_JUDGEMENTS,
    IDEAL,
    ITEM,
    JUDGED_ITEMS,
    JUDGED_RELEVANCE,
    JUDGED_REPEATS,
    JUDGED_ROWS,
    N_RELEVANT,
    N_RELEVANT_BINARY,
    REL,
    list_keys,
)
from ndcg_spark._stages.rules import REPEATED_JUDGEMENT, guard_lists
from ndcg_spark.options import EvaluationOptions


def judged_lists(rel: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per judged user (see the module for its columns).

    With ``duplicate_relevance = "max"`` repeated (user, item) rows are first merged by an
    aggregation (their largest relevance); otherwise a repeat stops the run (the
    repeated-judgement rule).
    """
    keys = list_keys(rel.columns, opts)
    items, rels = JUDGED_ITEMS, JUDGED_RELEVANCE
    if opts.gains or opts.negative_relevance == "unjudged":
        # The map of grade to gain replaces each grade before anything reads it (the gain
        # function, the ideal list, the counts), as trec_eval's ndcg gain parameters do.
        grade = gain_mapped(REL, opts.gains)
        if opts.negative_relevance == "unjudged":
            # trec_eval reads a grade below 0 as not judged: it gains nothing, whatever the map says.
            grade = f"(CASE WHEN {REL} < 0.0D THEN 0.0D ELSE {grade} END)"
        rel = rel.selectExpr(*keys, ITEM, f"{grade} AS {REL}")
    # Only the two lists (and what an option needs) are aggregated: every further aggregate
    # costs a per-row update in the aggregation, while counts over the lists are computed once
    # per user below.
    aggregates = [f"collect_list({ITEM}) AS {items}", f"collect_list({REL}) AS {rels}"]
    if opts.duplicate_relevance == "max":
        rel = rel.groupBy(*[F.col(c) for c in keys], F.col(ITEM)).agg(
            F.expr(f"max({REL}) AS {REL}"), F.expr("count(1) AS __ndcg_rows")
        )
        aggregates.append(f"CAST(sum(__ndcg_rows) AS INT) AS {JUDGED_ROWS}")
        rows, n_repeats = JUDGED_ROWS, f"{JUDGED_ROWS} - size({items})"
    else:
        rows, n_repeats = f"size({items})", "0"
    if opts.companion_metrics:
        aggregates.append(f"CAST(count(CASE WHEN {is_relevant(REL, opts)} THEN 1 END) AS INT) AS {N_RELEVANT_BINARY}")
    per_user = rel.groupBy(*[F.col(c) for c in keys]).agg(*[F.expr(a) for a in aggregates])
    if opts.duplicate_relevance == "error":
        # Every row past the guard has no repeat, so the count above is 0 without computing it again.
        per_user = guard_lists(per_user, REPEATED_JUDGEMENT, f"{repeat_count(items)} > 0", opts)
    positive = f"array_remove({rels}, 0.0D)"
    if opts.gains:
        # A mapped gain may be negative (trec_eval allows it): such grades are not in the ideal list.
        positive = f"filter({rels}, j_r -> j_r > 0.0D)"
    ideal = f"sort_array({positive}, false)"
    if opts.largest_k is not None:
        ideal = f"slice({ideal}, 1, {int(opts.largest_k)})"
    return per_user.selectExpr(
        *keys,
        items,
        rels,
        # The relevance reaching here is never negative or NaN (the row rules reject it, or it
        # was clipped or read as unjudged, 0), so the grades above 0 are the ones that are not 0.
        f"{ideal} AS {IDEAL}",
        f"size({positive}) AS {N_RELEVANT}",
        *([N_RELEVANT_BINARY] if opts.companion_metrics else []),
        f"true AS {HAS_JUDGEMENTS}",
        f"CAST({n_repeats} AS INT) AS {JUDGED_REPEATS}",
        f"{rows} AS {JUDGED_ROWS}",
    )
