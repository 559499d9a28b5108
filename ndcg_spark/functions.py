"""Column -> Column helpers for the metric itself.

All of them are plain Spark SQL expressions (higher-order array functions included), so they
run inside the JVM with no Python workers and work over Spark Connect.
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F


def gain(relevance: Column, kind: str = "linear") -> Column:
    """Gain of a relevance value: ``rel`` (linear) or ``2^rel - 1`` (exponential).

    Examples
    --------
    >>> from pyspark.sql import functions as F
    >>> spark.range(1).select(gain(F.lit(3.0), "exponential").alias("g")).first().g
    7.0
    """
    if kind == "linear":
        return relevance
    if kind == "exponential":
        return F.pow(F.lit(2.0), relevance) - F.lit(1.0)
    raise ValueError(f"unknown gain {kind!r}")


def discount(position: Column) -> Column:
    """The positional discount ``1 / log2(position + 1)`` for 1-based positions."""
    return F.lit(1.0) / F.log2(position + F.lit(1))


def array_size(values: Column) -> Column:
    """``size`` that reads a null array as empty (``size(null)`` is -1 or null depending on ANSI)."""
    return F.when(values.isNull(), F.lit(0)).otherwise(F.size(values))


def first_occurrence_only(values: Column, items: Column) -> Column:
    """Zero each value whose item already appeared earlier in ``items`` (same length as ``values``).

    A repeated recommendation keeps the gain of its best-ranked occurrence only, so no item gains
    twice and NDCG cannot exceed 1. The quadratic scan only runs for lists that hold a repeat.
    """
    has_repeat = F.size(F.array_distinct(items)) < F.size(items)
    deduplicated = F.transform(
        values,
        lambda v, i: F.when(F.array_position(items, items[i]) == i + F.lit(1), v).otherwise(F.lit(0.0)),
    )
    return F.when(has_repeat, deduplicated).otherwise(values)
