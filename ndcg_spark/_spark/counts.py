"""Row counts that ride on a pass the evaluation makes anyway (an ``Observation``), not a pass of their own.

Where a session cannot observe (Spark Connect on Spark 3.5, :func:`ndcg_spark._spark.compat.observes`),
the count is a pass of its own: the same figure, one more read of the table.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from ndcg_spark._spark.compat import observes


@dataclass(frozen=True)
class RowCount:
    """The rows of ``frame``, counted by ``observation`` on the way of a pass that reads it."""

    frame: DataFrame
    observation: Optional[Observation]

    def rows(self) -> int:
        """The count, once an action has read the frame in full.

        Spark drops an empty relation from the plan with the observation on it, which then
        reports nothing: only then is the frame counted by a pass of its own (it is empty).
        Without an observation (:func:`counted_apart`), always by a pass of its own.
        """
        if self.observation is None or not observes(self.frame):
            return self.frame.count()
        try:
            return int(self.observation.get["rows"])
        except Exception:  # noqa: BLE001 - no metrics reported (classic: an assertion; Connect: no key)
            return self.frame.count()


def counted(df: DataFrame, count: Optional[RowCount] = None) -> Tuple[DataFrame, RowCount]:
    """``df`` with its rows counted as they pass, and the count (:meth:`RowCount.rows` after an action).

    The count rides on the evaluation's own pass, so it costs no pass of its own. Below a
    shuffle (as the ranking's and the judgements' inputs are) it sees every row even when an
    action computes only some lists (``first()``): a shuffle's map side always runs in full.
    ``count``, when given, is the (not yet attached) observation to use.
    """
    observation = count.observation if count is not None else Observation()
    if not observes(df):
        return df, RowCount(df, observation)
    return df.observe(observation, F.count(F.lit(1)).alias("rows")), RowCount(df, observation)


def counted_apart(df: DataFrame) -> Tuple[DataFrame, RowCount]:
    """``df`` as it is, and its count by a pass of its own (:meth:`RowCount.rows`).

    For a table read only where an observation on it is never reported (the beyond-accuracy
    global figures): waiting for that observation would wait for ever.
    """
    return df, RowCount(df, None)
