"""The column contract: every internal column that passes from one stage of ``evaluate`` to another.

The stages (:mod:`~ndcg_spark._stages.inputs`, :mod:`~ndcg_spark._stages.ranking`, :mod:`~ndcg_spark._stages.judged`,
:mod:`~ndcg_spark._stages.scoring`, :mod:`~ndcg_spark._stages.summary`) are siblings: each reads the columns
declared here and writes its own, and none reads another's module. :data:`CONTRACT` lists them
with their type, meaning and writer; a column used inside one stage only stays in that stage.

The functions at the end say what the lists hold under a set of options, which more than one
stage needs to know.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Sequence, Tuple

from pyspark.sql import Column as PyColumn
from pyspark.sql import functions as F

from ndcg_spark._spark.sql import ident
from ndcg_spark.options import EvaluationOptions

ARRAY_RANK = "__ndcg_array_rank"
ITEM = "__ndcg_item"
ORDER = "__ndcg_order"
REL = "__ndcg_relevance"
ITEMS = "__ndcg_items"
ORDERS = "__ndcg_orders"
RANKED_REPEATS = "__ndcg_duplicate_recommendations"
JUDGED_ITEMS = "__ndcg_judged_items"
JUDGED_RELEVANCE = "__ndcg_judged_relevance"
IDEAL = "__ndcg_ideal"
N_RELEVANT = "n_relevant"
N_RELEVANT_BINARY = "__ndcg_relevant_binary"
HAS_JUDGEMENTS = "__ndcg_has_relevance_rows"
JUDGED_REPEATS = "__ndcg_duplicate_relevance"
JUDGED_ROWS = "__ndcg_relevance_rows"
EXCLUDED = "__ndcg_excluded"
HAS_ATTRIBUTES = "__ndcg_has_attributes"
SEGMENT = "__ndcg_segment"


@dataclass(frozen=True)
class Column:
    """One internal column: its ``name``, SQL ``type``, what it ``holds`` and which stage ``writer`` adds it."""

    name: str
    type: str
    holds: str
    writer: str


#: Every column of the contract, in the order the data meets them: the narrowed inputs, the ranked
#: lists (one row per list), the judged lists (one row per user), the scored frame (one row per (list, k)).
CONTRACT = (
    Column(ARRAY_RANK, "int", "the 1-based array position: the rank under array_ranking = order", "inputs"),
    Column(ITEM, "key", "the item, in the one type both tables are compared in", "inputs"),
    Column(ORDER, "double", "a recommendation's ordering key, smaller first", "inputs"),
    Column(REL, "double", "a judgement's relevance", "inputs"),
    Column(
        SEGMENT, "struct", "the segment columns of the recommendations, packed until the lists are joined", "inputs"
    ),
    Column(ITEMS, "array", "the list's items in position order, the first largest k", "ranking"),
    Column(ORDERS, "array<double>", "their ordering keys (with a rank column, or ties kept)", "ranking"),
    Column(RANKED_REPEATS, "int", "how many of the list's items repeat an earlier one", "ranking"),
    Column(JUDGED_ITEMS, "array", "the user's judged items", "judged"),
    Column(JUDGED_RELEVANCE, "array<double>", "their relevance, element for element", "judged"),
    Column(IDEAL, "array<double>", "the ideal list's grades, largest first", "judged; scoring per ideal"),
    Column(N_RELEVANT, "int", "judged items with relevance above 0 (a public figure too)", "judged"),
    Column(N_RELEVANT_BINARY, "int", "judged items relevant for the companion metrics", "judged"),
    Column(HAS_JUDGEMENTS, "boolean", "the user has relevance rows", "judged"),
    Column(JUDGED_REPEATS, "int", 'rows merged by duplicate_relevance = "max"', "judged"),
    Column(JUDGED_ROWS, "int", "the user's relevance rows", "judged"),
    Column(EXCLUDED, "boolean", "the exclusion policies leave the user out", "summary"),
    Column(HAS_ATTRIBUTES, "boolean", "the user has a row of user attributes", "inputs"),
)

#: The scored frame's columns that carry counts from the two lists (the summary and the row accounting read them).
CARRIED = (HAS_JUDGEMENTS, RANKED_REPEATS, JUDGED_REPEATS, JUDGED_ROWS)

#: The public figures of each (list, k) after the list and ``k``, before the companion metrics.
FIGURES = ("cg", "dcg", "idcg", "ndcg", "n_recommended", N_RELEVANT)


# ----------------------------------------------------------------------------- what the lists hold


def list_keys(columns: Sequence[str], opts: EvaluationOptions) -> List[str]:
    """What names one ranked list, quoted: the packed segment (:data:`SEGMENT`) or the segment
    columns among ``columns``, then the user."""
    return [ident(c) for c in (SEGMENT, *opts.group_by, opts.user_col) if c in columns]


def positions_as_given(opts: EvaluationOptions) -> bool:
    """True when :data:`ORDERS` holds the positions (``positions = "as_given"`` with a rank column).

    Without a rank column there are no given positions: scores are ranked 1, 2, ...
    """
    return opts.positions == "as_given" and bool(opts.rank_col)


def lists_run_past_k(opts: EvaluationOptions) -> bool:
    """True when the ranked lists hold rows past the largest k (tied groups, or every candidate)."""
    return opts.largest_k is not None and (opts.ties != "item" or opts.ideal == "candidates")


def both_sides_kept() -> Tuple[PyColumn, PyColumn]:
    """Two conditions, true on every scored row, each reading a count from one side of the join.

    The repeat counts are never negative; a filter that reads them (``per_user``'s) keeps both
    sides of the full outer join in the plan, so an action that needs one side only (a count)
    still runs the other side's checks.
    """
    return F.col(RANKED_REPEATS) >= 0, F.col(JUDGED_REPEATS) >= 0


def both_sides_kept_sql() -> Tuple[str, str]:
    """:func:`both_sides_kept` as SQL text."""
    return f"{RANKED_REPEATS} >= 0", f"{JUDGED_REPEATS} >= 0"
