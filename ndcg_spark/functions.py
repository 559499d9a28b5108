"""SQL expression text for the metric's building blocks.

The plan is built from Spark SQL expression text (``F.expr``, ``selectExpr``, ``filter``) rather
than from chains of ``Column`` calls. Both give the same expression tree of built-in functions
(generated code, no Python workers, fine over Spark Connect), but every ``Column`` call is a
Python -> JVM round trip, several with PySpark's call-site capture: building ``evaluate`` that
way took about 4,900 round trips and 0.75 s of driver time per call, more than a whole stage of
the job on the benchmark. The text is parsed once, inside the JVM.

Each helper takes the SQL text of its operands and returns SQL text. Column and alias names
always go through :func:`ident`, and literal strings through :func:`string_literal`.
"""

from __future__ import annotations

from typing import Optional


def ident(name: str) -> str:
    """A column name as a SQL identifier: back-quoted, so dots, spaces and backticks are literal."""
    return "`" + name.replace("`", "``") + "`"


def string_literal(text: str) -> str:
    """A SQL string literal for ``text``.

    Plain text is single-quoted; text holding a quote or a backslash is spelled as UTF-8 bytes,
    which reads the same whatever ``spark.sql.parser.escapedStringLiterals`` says.
    """
    if "'" in text or "\\" in text:
        return f"decode(X'{text.encode('utf-8').hex().upper()}', 'UTF-8')"
    return f"'{text}'"


def gain(relevance: str, kind: str = "linear") -> str:
    """Gain of a relevance value: ``rel`` (linear) or ``2^rel - 1`` (exponential).

    Examples
    --------
    >>> gain("r", "exponential")
    '(pow(2.0D, r) - 1.0D)'
    >>> spark.range(1).selectExpr(gain("3.0D", "exponential") + " AS g").first().g
    7.0
    """
    if kind == "linear":
        return relevance
    if kind == "exponential":
        return f"(pow(2.0D, {relevance}) - 1.0D)"
    raise ValueError(f"unknown gain {kind!r}")


def discount(position: str) -> str:
    """The positional discount ``1 / log2(position + 1)`` for 1-based positions."""
    return f"(1.0D / log2({position} + 1))"


def array_size(values: str) -> str:
    """``size`` that reads a null array as empty (``size(null)`` is -1 or null depending on ANSI)."""
    return f"(CASE WHEN {values} IS NULL THEN 0 ELSE size({values}) END)"


def repeat_count(values: str) -> str:
    """How many elements of an array repeat an earlier one."""
    return f"(size({values}) - size(array_distinct({values})))"


def has_repeats(values: str) -> str:
    """True when an array holds some value more than once."""
    return f"({repeat_count(values)} > 0)"


def first_occurrence_only(values: str, items: str, any_repeat: Optional[str] = None) -> str:
    """Zero each value whose item already appeared earlier in ``items`` (same length as ``values``).

    A repeated recommendation keeps the gain of its best-ranked occurrence only, so no item gains
    twice and NDCG cannot exceed 1. The quadratic scan only runs for lists that hold a repeat:
    ``any_repeat`` (SQL) says which, where the caller already knows; else it is computed here.
    """
    deduplicated = (
        f"transform({values}, (fo_v, fo_i) -> "
        f"CASE WHEN array_position({items}, {items}[fo_i]) = fo_i + 1 THEN fo_v ELSE 0.0D END)"
    )
    return f"(CASE WHEN {any_repeat or has_repeats(items)} THEN {deduplicated} ELSE {values} END)"
