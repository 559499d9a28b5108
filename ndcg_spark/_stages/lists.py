"""The ranked lists and the judged lists joined, so no user is lost (:func:`join_lists`): on
the user, or on the packed segment and the user (:func:`ndcg_spark._stages.inputs.with_segment`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from ndcg_spark._spark.sql import ident
from ndcg_spark._stages.column_contract import SEGMENT
from ndcg_spark.options import EvaluationOptions


def join_lists(lists: DataFrame, judged: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Ranked lists and judged lists, full outer, so no user is lost.

    Without segments of the recommendations the join is on the user. With them, on the packed
    segment and the user (:func:`ndcg_spark._stages.inputs.with_segment`): every judged user is there for every segment,
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
