"""The beyond-accuracy stage's own columns, and the SQL every per-user metric writes over a list's arrays.

The columns never leave the stage (the contract's, :mod:`ndcg_spark._stages.contract`, are what it
reads and writes), so they live here, once, for its modules.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame

from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.contract import SEGMENT

# Columns inside this stage.
ATTRS = "__nb_attrs"
HISTORY = "__nb_history"
HISTORY_SIZE = "__nb_history_size"
HISTORY_CATS = "__nb_history_categories"
HISTORY_VECTOR = "__nb_history_vector"
BASELINE = "__nb_baseline"
HAS_HISTORY = "__nb_has_history"
POS = "__nb_pos"
COUNT = "__nb_count"
PAIR_SUMS = "__nb_pair_sums"
SEREN_SUMS = "__nb_serendipity_sums"
CATEGORY = "__nb_category"
FEATURES = "__nb_features"
UNIT = "__nb_unit"
POP = "__nb_pop"
USERS = "__nb_users"
TIMES = "__nb_seen_rows"
SELF_INFO = "__nb_self_info"
SURPRISAL = "__nb_surprisal"
HEAD = "__nb_head"
SIM = "__nb_sim"
LO, HI = "__nb_lo", "__nb_hi"


def cutoff_sql(k: Optional[int]) -> str:
    """SQL: the cutoff ``k`` as an INT literal (null for the whole list)."""
    return "CAST(NULL AS INT)" if k is None else f"CAST({int(k)} AS INT)"


def share_of(count: str, n: str, k: Optional[int], by_k: bool) -> str:
    """SQL: ``count`` over the list's length within k, or over k (``by_k``, a finite k)."""
    den = f"CAST({int(k)} AS DOUBLE)" if (by_k and k is not None) else f"CAST({n} AS DOUBLE)"
    return f"(CASE WHEN {n} > 0 THEN {count} / {den} END)"


def array_sum(array: str, term: str) -> str:
    """SQL: the sum of ``term`` (over ``x``, each element) across ``array``."""
    return f"aggregate({array}, 0.0D, (s, x) -> s + {term})"


def unpacked(df: DataFrame) -> DataFrame:
    """``df`` with the packed segment (``SEGMENT``) as its columns again."""
    if SEGMENT not in df.columns:
        return df
    fields = [f.name for f in df.schema[SEGMENT].dataType.fields]
    return df.selectExpr(
        *[f"{SEGMENT}.{ident(c)} AS {ident(c)}" for c in fields], *[ident(c) for c in df.columns if c != SEGMENT]
    )
