"""The beyond-accuracy stage's own columns, and the SQL every per-user metric writes over a list's arrays.

The columns never leave the stage (the contract's, :mod:`ndcg_spark._stages.column_contract`, are what it
reads and writes), so they live here, once, for its modules; those the metrics' declarations read,
and their shared SQL, are :mod:`ndcg_spark._metrics.per_user_sql`'s, named here too.
"""

from __future__ import annotations

from typing import Optional

from pyspark.sql import DataFrame

from ndcg_spark._metrics.per_user_sql import BASELINE as BASELINE
from ndcg_spark._metrics.per_user_sql import HISTORY as HISTORY
from ndcg_spark._metrics.per_user_sql import HISTORY_CATS as HISTORY_CATS
from ndcg_spark._metrics.per_user_sql import HISTORY_SIZE as HISTORY_SIZE
from ndcg_spark._metrics.per_user_sql import HISTORY_VECTOR as HISTORY_VECTOR
from ndcg_spark._metrics.per_user_sql import PAIR_SUMS as PAIR_SUMS
from ndcg_spark._metrics.per_user_sql import SEREN_SUMS as SEREN_SUMS
from ndcg_spark._metrics.per_user_sql import array_sum as array_sum
from ndcg_spark._metrics.per_user_sql import share_of as share_of
from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.column_contract import SEGMENT

# Columns inside this stage.
ATTRS = "__nb_attrs"
HAS_HISTORY = "__nb_has_history"
POS = "__nb_pos"
COUNT = "__nb_count"
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


def unpacked(df: DataFrame) -> DataFrame:
    """``df`` with the packed segment (``SEGMENT``) as its columns again."""
    if SEGMENT not in df.columns:
        return df
    fields = [f.name for f in df.schema[SEGMENT].dataType.fields]
    return df.selectExpr(
        *[f"{SEGMENT}.{ident(c)} AS {ident(c)}" for c in fields], *[ident(c) for c in df.columns if c != SEGMENT]
    )
