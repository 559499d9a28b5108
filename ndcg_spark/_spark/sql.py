"""SQL expression text for the metric's building blocks.

The plan is built from Spark SQL expression text (``F.expr``, ``selectExpr``, ``filter``) rather
than from chains of ``Column`` calls. Both give the same expression tree of built-in functions
(generated code, no Python workers, fine over Spark Connect), but every ``Column`` call is a
Python -> JVM round trip, several with PySpark's call-site capture, and ``evaluate`` builds
thousands of expressions: as text, the plan is parsed once, inside the JVM, and building it
costs the driver little next to a stage of the job.

Each helper takes the SQL text of its operands and returns SQL text. Column and alias names
always go through :func:`ident`, and literal strings through :func:`string_literal`.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def ident(name: str) -> str:
    """A column name as a SQL identifier: back-quoted, so dots, spaces and backticks are literal."""
    return "`" + name.replace("`", "``") + "`"


def alias_of(aggregate: str) -> str:
    """The name an ``expression AS name`` aggregate gives its column.

    >>> alias_of("avg(CASE WHEN x AS y THEN 1 END) AS mean_x")
    'mean_x'
    """
    return aggregate.rsplit(" AS ", 1)[1]


def string_literal(text: str) -> str:
    """A SQL string literal for ``text``.

    Plain text is single-quoted; text holding a quote or a backslash is spelled as UTF-8 bytes,
    which reads the same whatever ``spark.sql.parser.escapedStringLiterals`` says.
    """
    if "'" in text or "\\" in text:
        return f"decode(X'{text.encode('utf-8').hex().upper()}', 'UTF-8')"
    return f"'{text}'"


#: SQL: a per-user NDCG that is a finite number (the report's histogram bins those alone).
FINITE_NDCG = "ndcg IS NOT NULL AND NOT isnan(ndcg) AND abs(ndcg) <> CAST('Infinity' AS DOUBLE)"


def ndcg_bin(bins: int) -> str:
    """SQL: the 0-based bin of ``ndcg`` among ``bins`` equal bins over [0, 1] (1.0 in the last)."""
    return f"least(CAST(floor(ndcg * {int(bins)}) AS INT), {int(bins) - 1})"


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


def discount(position: str, kind: str = "log2", base: float = 2.0) -> str:
    """The positional discount of a 1-based position: ``1 / log_b(position + 1)`` (``"log2"``), or
    LensKit's ``1 / log_b(max(position, 2))`` (``"lenskit"``: positions 1 and 2 weigh the same).

    Base 2 uses ``log2``; another base divides natural logarithms, as scikit-learn's ``log_base``.

    Examples
    --------
    >>> discount("p")
    '(1.0D / log2(p + 1))'
    >>> discount("p", "lenskit", 10.0)
    '(1.0D / (ln(greatest(p, 2)) / ln(10.0D)))'
    >>> [round(spark.range(1).selectExpr(discount(str(i), "lenskit") + " AS d").first().d, 4) for i in (1, 2, 3)]
    [1.0, 1.0, 0.6309]
    """
    if kind == "log2":
        argument = f"{position} + 1"
    elif kind == "lenskit":
        argument = f"greatest({position}, 2)"
    else:
        raise ValueError(f"unknown discount {kind!r}")
    if float(base) == 2.0:
        return f"(1.0D / log2({argument}))"
    return f"(1.0D / (ln({argument}) / ln({float(base)!r}D)))"


def gain_mapped(relevance: str, gains: tuple) -> str:
    """SQL: ``relevance`` through a map of grade to gain (``((grade, gain), ...)``); other grades as they are.

    Examples
    --------
    >>> gain_mapped("r", ((1.0, 3.0), (2.0, 9.0)))
    '(CASE r WHEN 1.0D THEN 3.0D WHEN 2.0D THEN 9.0D ELSE r END)'
    """
    if not gains:
        return relevance
    cases = " ".join(f"WHEN {float(g)!r}D THEN {float(v)!r}D" for g, v in gains)
    return f"(CASE {relevance} {cases} ELSE {relevance} END)"


def array_size(values: str) -> str:
    """``size`` that reads a null array as empty (``size(null)`` is -1 or null depending on ANSI)."""
    return f"(CASE WHEN {values} IS NULL THEN 0 ELSE size({values}) END)"


def repeat_count(values: str) -> str:
    """How many elements of an array repeat an earlier one."""
    return f"(size({values}) - size(array_distinct({values})))"


def has_repeats(values: str) -> str:
    """True when an array holds some value more than once."""
    return f"({repeat_count(values)} > 0)"


def occurrence_order(items: str) -> str:
    """SQL: the elements of ``items`` as (x: item, i: 0-based position) structs, sorted by item, then
    position: the occurrences of an item form a run, its first occurrence first.

    Project it as a column of its own: :func:`first_occurrences` reads it three times.
    """
    return f"array_sort(transform({items}, (fo_x, fo_i) -> named_struct('x', fo_x, 'i', fo_i)))"


def first_occurrences(pairs: str) -> str:
    """SQL: ``array<boolean>`` in position order, true where an item appears for the first time.

    ``pairs`` is a column holding :func:`occurrence_order` of a non-empty list (or null, which
    gives null). An element opens its item's run when its item differs from the one before it in
    that order; sorting the flags back by position takes O(n log n), where looking each element
    up among the earlier ones would take O(n^2) on a long list.
    """
    n = f"size({pairs})"
    head = f"array(named_struct('i', {pairs}[0].i, 'f', true))"
    rest = (
        f"zip_with(slice({pairs}, 2, {n}), slice({pairs}, 1, {n} - 1), "
        f"(fo_c, fo_p) -> named_struct('i', fo_c.i, 'f', fo_c.x <> fo_p.x))"
    )
    return f"transform(array_sort(concat({head}, {rest})), fo_s -> fo_s.f)"


def first_occurrence_only(values: str, firsts: str) -> str:
    """Zero each value whose item already appeared earlier in its list.

    ``firsts`` is a column of :func:`first_occurrences` for the list (null when the list holds no
    repeat: ``values`` is then returned as it is). A repeated recommendation keeps the gain of its
    best-ranked occurrence only, so no item gains twice and NDCG cannot exceed 1.
    """
    deduplicated = f"zip_with({values}, {firsts}, (fo_v, fo_f) -> CASE WHEN fo_f THEN fo_v ELSE 0.0D END)"
    return f"(CASE WHEN {firsts} IS NULL THEN {values} ELSE {deduplicated} END)"


def sums_at_cuts(
    values: str,
    terms: Dict[str, Callable[[str, str], str]],
    cuts: Sequence[Optional[str]],
    position: Optional[str] = None,
) -> str:
    """SQL: ``array<struct<name: double, ...>>``, for each cut in ``cuts`` the sum of each term over
    the elements of ``values`` at or before it, from one walk of the array.

    ``terms``: name -> SQL of the term from the element and its 1-based position (SQL given in
    ``s_t`` and the position's SQL; ``s_a.n`` counts the elements before it). ``position``: SQL of an element's position over ``s_t``
    (the positions ascend along the array); None: its index + 1. ``cuts``: SQL positions,
    ascending on every row; None (last only) takes every element. The walk (``aggregate``) adds
    each term to its running sum left to right from 0.0 and, before adding the first element
    past a cut, records the sums there: each recorded sum has the very additions, in the same
    order, of a walk of its own prefix, so the same bits, whatever the number of cuts.

    Examples
    --------
    >>> df = spark.createDataFrame([([1.0, 2.0, 4.0],)], "v array<double>")
    >>> sql = sums_at_cuts("v", {"s": lambda t, p: t}, ["1", "2", None])
    >>> [r.s for r in df.selectExpr(f"{sql} AS sums").first().sums]
    [1.0, 3.0, 7.0]
    """
    names = list(terms)
    snapshot_type = "struct<" + ", ".join(f"{n}: double" for n in names) + ">"
    at = position or "(s_a.n + 1)"
    counter = ["'n', 0"]
    zero = (
        "named_struct("
        + ", ".join([*counter, *[f"'{n}', 0.0D" for n in names], f"'o', CAST(array() AS array<{snapshot_type}>)"])
        + ")"
    )
    snapshot = "named_struct(" + ", ".join(f"'{n}', s_a.{n}" for n in names) + ")"

    def recorded(upto: str) -> str:
        # The sums so far, once for each cut passed and not yet recorded.
        return f"concat(s_a.o, array_repeat({snapshot}, {upto} - size(s_a.o)))"

    if None in cuts[:-1]:
        raise ValueError("only the last cut may take every element")
    finite = [c for c in cuts if c is not None]
    passed = (
        "CASE "
        + " ".join(f"WHEN {at} > {c} THEN {j + 1}" for j, c in reversed(list(enumerate(finite))))
        + " ELSE 0 END"
    )
    step = ", ".join(
        [
            "'n', s_a.n + 1",
            *[f"'{n}', s_a.{n} + {term('s_t', at)}" for n, term in terms.items()],
            f"'o', CASE WHEN size(s_a.o) < {passed} THEN {recorded(passed)} ELSE s_a.o END" if finite else "'o', s_a.o",
        ]
    )
    return f"aggregate({values}, {zero}, (s_a, s_t) -> named_struct({step}), s_a -> {recorded(str(len(cuts)))})"


#: Normal quantile of a two-sided 95% interval.
Z_95 = 1.959963984540054


def normal_interval(mean: str, std: str, users: str, clip: Optional[Tuple[float, float]] = None) -> Tuple[str, str]:
    """SQL: the bounds of a mean's normal 95% interval, mean ± z · std / sqrt(users), each null
    under two users (:func:`when_spread`); ``clip``, the range the values live in, bounds them.

    ``mean``, ``std`` and ``users`` are SQL (columns or aggregates): NDCG's summary and the
    beyond-accuracy means write their intervals with it.
    """
    half = f"({Z_95}D * {std} / sqrt(CAST({users} AS DOUBLE)))"
    low, high = f"{mean} - {half}", f"{mean} + {half}"
    if clip is not None:
        low, high = f"greatest({low}, {float(clip[0])!r}D)", f"least({high}, {float(clip[1])!r}D)"
    return when_spread(users, low), when_spread(users, high)


def when_spread(users: str, bound: str) -> str:
    """SQL: an interval bound, null unless at least two users are averaged.

    One user (or none) gives no spread to estimate: a bound there would be made up (the normal
    interval's null half-width clipped to [0, 1], or every bootstrap replicate that one value).
    """
    return f"(CASE WHEN {users} >= 2 THEN {bound} END)"


def join_null_safe(left: DataFrame, right: DataFrame, keys: Sequence[str], how: str) -> DataFrame:
    """``left.join(right, on=keys, how=how)`` (``how`` "inner", "left" or "full") where a null key matches a null key.

    ``k`` is null for the whole-list cutoff and a segment value may be null: a plain equi-join
    on such keys would never pair those rows. One column per key, as with ``on=keys``
    (for a full join, the value of whichever side has the row).
    """
    if how not in ("inner", "left", "full"):
        raise ValueError(f"join_null_safe joins 'inner', 'left' or 'full', not {how!r}")
    renamed = right.select(
        *[F.col(ident(c)).alias(f"__ndcg_right_{i}") for i, c in enumerate(keys)],
        *[F.col(ident(c)) for c in right.columns if c not in keys],
    )
    condition = None
    for i, c in enumerate(keys):
        equal = F.col(ident(c)).eqNullSafe(F.col(f"__ndcg_right_{i}"))
        condition = equal if condition is None else condition & equal
    joined = left.join(renamed, on=condition, how=how)
    if how == "full":
        key_columns = [F.coalesce(F.col(ident(c)), F.col(f"__ndcg_right_{i}")).alias(c) for i, c in enumerate(keys)]
    else:
        key_columns = [F.col(ident(c)) for c in keys]
    rest = [F.col(ident(c)) for c in joined.columns if c not in keys and not c.startswith("__ndcg_right_")]
    return joined.select(*key_columns, *rest)
