"""Scoring: gains, tie averaging, the sums at each cutoff, and the companion metrics.

Reads one row per list: the ranked list fully outer-joined on the user with the judged list
(their columns are the contract's, :mod:`ndcg_spark._stages.column_contract`), so either side may be null.
Gives one row per (list, k):

============================  ==========================================================
segments, user                the list
``k``                         int, null for the whole list
``cg``, ``dcg``, ``idcg``,    doubles; ``ndcg`` is 0.0 where ``idcg`` is 0
``ndcg``
``n_recommended``             int: the list's length as evaluated (at most the largest k)
``n_relevant``                int: judged items with relevance above 0
companion metrics             those of :data:`ndcg_spark._metrics.accuracy.COMPANIONS` (when asked)
``CARRIED``                   the counts the summary and the row accounting read
============================  ==========================================================

Each sum adds its terms left to right from position 1, so the same input gives the same bits.
"""

from __future__ import annotations

from typing import List, Optional

from pyspark.sql import DataFrame

from ndcg_spark._metrics.accuracy import COMPANIONS, companion_metrics, is_relevant
from ndcg_spark._spark.sql import (
    array_size,
    discount,
    first_occurrence_only,
    first_occurrences,
    gain,
    has_repeats,
    occurrence_order,
    repeat_count,
    sums_at_cuts,
)
from ndcg_spark._stages.column_contract import (
    CARRIED,
    HAS_JUDGEMENTS,
    IDEAL,
    ITEMS,
    JUDGED_ITEMS,
    JUDGED_RELEVANCE,
    JUDGED_REPEATS,
    JUDGED_ROWS,
    N_RELEVANT,
    N_RELEVANT_BINARY,
    ORDERS,
    RANKED_REPEATS,
    list_keys,
    lists_run_past_k,
    positions_as_given,
)
from ndcg_spark._stages.rules import sums_checked
from ndcg_spark.options import EvaluationOptions

# Columns inside this stage.
GAINS = "__ndcg_gains"
RAW_GAINS = "__ndcg_raw_gains"
HITS = "__ndcg_hit_positions"
HIT_TERMS = "__ndcg_hit_terms"
OCCURRENCES = "__ndcg_occurrences"
FIRSTS = "__ndcg_first_occurrences"
K_INDEX = "__ndcg_k_index"
SUMS = "__ndcg_sums"
IDEAL_SUMS = "__ndcg_ideal_sums"
COMPANION_SUMS = "__ndcg_companions"
FIRST_HIT = "__ndcg_first_hit"


def score(joined: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """The joined lists scored at every cutoff: one row per (list, k) (see the module)."""
    return joined.transform(with_gains, opts).transform(with_cutoffs, opts)


def with_gains(joined: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Per list: its length, the carried counts, and the arrays the sums read.

    Only the optional modes compute gain arrays here, with higher-order functions: tie
    averaging and the worst order of ties need every gain of a tied group, and the companion
    metrics the positions of the hits. In the default mode the gains are computed per hit
    (:func:`hits_of`).
    """
    n = array_size(ITEMS)
    if lists_run_past_k(opts):
        # Tied rows past the largest k were kept for their gains only (or, with the ideal from the
        # candidates, for their grades): they are not recommendations.
        n = f"least({n}, {int(opts.largest_k)})"
        if positions_as_given(opts):
            # Given ranks: the recommendations evaluated are those ranked within k, gaps or not.
            n = f"(CASE WHEN {ORDERS} IS NULL THEN 0 ELSE size(filter({ORDERS}, n_o -> n_o <= {int(opts.largest_k)})) END)"
    extra = []
    if opts.ties != "item" or opts.companion_metrics:
        # Which positions hold an item's first occurrence, for the lists with a repeat only
        # (null: the user has no list). Each step in a projection of its own: the next one reads
        # it more than once.
        order = f"CASE WHEN coalesce({RANKED_REPEATS}, 0) > 0 THEN {occurrence_order(ITEMS)} END"
        joined = joined.selectExpr("*", f"{order} AS {OCCURRENCES}").selectExpr(
            "*", f"{first_occurrences(OCCURRENCES)} AS {FIRSTS}"
        )
    if opts.ties != "item":
        gains = first_occurrence_only(f"transform({ITEMS}, g_x -> {gain(relevance_of('g_x'), opts.gain)})", FIRSTS)
        # The gains in a projection of their own: the tie rule reads them more than once.
        joined = joined.selectExpr("*", f"{gains} AS {RAW_GAINS}")
        tied = tie_averaged if opts.ties == "average" else tie_worst
        extra.append(f"coalesce({tied(RAW_GAINS, ORDERS)}, CAST(array() AS array<double>)) AS {GAINS}")
    if opts.companion_metrics:
        hits = first_occurrence_only(
            f"transform({ITEMS}, h_x -> CAST({is_relevant(relevance_of('h_x'), opts)} AS DOUBLE))", FIRSTS
        )
        extra += [
            f"filter(transform({hits}, (h_h, h_i) -> CASE WHEN h_h > 0 THEN {_position('h_i', opts)} END), "
            f"h_p -> h_p IS NOT NULL) AS {HITS}",
            f"coalesce({N_RELEVANT_BINARY}, 0) AS {N_RELEVANT_BINARY}",
        ]
    empty_items = f"CAST(array() AS {joined.schema[ITEMS].dataType.simpleString()})"
    repeats = RANKED_REPEATS
    if lists_run_past_k(opts):
        # The repeats counted are those among the recommendations evaluated (the first k), not
        # in the tail kept for its gains or grades only.
        repeats = repeat_count(f"slice({ITEMS}, 1, {n})")
    return joined.selectExpr(
        *list_keys(joined.columns, opts),
        f"{n} AS n_recommended",
        f"coalesce({N_RELEVANT}, 0) AS {N_RELEVANT}",
        f"{HAS_JUDGEMENTS} IS NOT NULL AS {HAS_JUDGEMENTS}",
        f"coalesce({repeats}, 0) AS {RANKED_REPEATS}",
        f"coalesce({JUDGED_REPEATS}, 0) AS {JUDGED_REPEATS}",
        f"coalesce({JUDGED_ROWS}, 0) AS {JUDGED_ROWS}",
        f"coalesce({ITEMS}, {empty_items}) AS {ITEMS}",
        JUDGED_ITEMS,
        JUDGED_RELEVANCE,
        f"{ideal_list(opts, n)} AS {IDEAL}",
        # Given ranks are the positions: the hits read them.
        *([ORDERS] if positions_as_given(opts) else []),
        *extra,
    )


def ideal_list(opts: EvaluationOptions, n: str) -> str:
    """SQL, on a joined row (the ranked list with the judged list): the grades of the ideal list,
    largest first, as the ``ideal`` option says (``n`` is SQL for the list's length).

    ``"relevance"``: the judged grades above 0 (``IDEAL``). ``"candidates"``: the
    grades above 0 of the distinct recommended items, the whole list (scikit-learn's and
    torchmetrics' ideal, from the scored rows' own labels). ``"k_relevant"``: k grades of 1
    (RecTools' ideal with ``divide_by_achievable=False``; the list's length for the whole list).
    """
    empty = "CAST(array() AS array<double>)"
    if opts.ideal == "k_relevant":
        length = n if opts.largest_k is None else str(int(opts.largest_k))
        return f"array_repeat(1.0D, {length})"
    if opts.ideal == "candidates":
        grade = f"element_at({JUDGED_RELEVANCE}, CAST(array_position({JUDGED_ITEMS}, i_x) AS INT))"
        grades = f"filter(transform(array_intersect({ITEMS}, {JUDGED_ITEMS}), i_x -> {grade}), i_g -> i_g > 0.0D)"
        ideal = f"sort_array({grades}, false)"
        if opts.largest_k is not None:
            ideal = f"slice({ideal}, 1, {int(opts.largest_k)})"
        return f"coalesce({ideal}, {empty})"
    return f"coalesce({IDEAL}, {empty})"


def _position(index: str, opts: EvaluationOptions) -> str:
    """SQL: the 1-based position of the list element at 0-based ``index``: ``index + 1``, or its given rank."""
    if positions_as_given(opts):
        return f"CAST(element_at({ORDERS}, {index} + 1) AS INT)"
    return f"{index} + 1"


def relevance_of(item: str) -> str:
    """SQL: the judged relevance of ``item`` for the row's user, 0.0 when it was not judged."""
    # array_position is 0 when the item was not judged (and null when the user has no judgements).
    at = f"array_position({JUDGED_ITEMS}, {item})"
    return f"(CASE WHEN {at} > 0 THEN try_element_at({JUDGED_RELEVANCE}, CAST({at} AS INT)) ELSE 0.0D END)"


def tie_averaged(gains: str, orders: str) -> str:
    """SQL: each gain replaced by the mean gain of its tied group (equal ordering key).

    Summed with the positional discounts this is the expected DCG over all orderings of each
    tie (scikit-learn's ``ndcg_score`` default). The lists are in position order, which sorts
    them by ordering key, so a tied group is a run of adjacent elements. The runs are found from
    their starts (an element whose key differs from the one before), each run's gains are summed
    left to right over its own slice, and the means are repeated over the run and flattened:
    linear in the list's length however many runs it has (growing an array run by run in
    ``aggregate`` copies it once per run). Only lists that hold a tie pay for it. ``gains`` and
    ``orders`` should be columns: each is read more than once.

    Examples
    --------
    >>> df = spark.createDataFrame([([3.0, 0.0, 1.0], [1.0, 1.0, 2.0])], "g array<double>, o array<double>")
    >>> df.selectExpr(tie_averaged("g", "o") + " AS averaged").first().averaged
    [1.5, 1.5, 1.0]
    """
    mean = f"aggregate(slice({gains}, t_r.s, t_r.l), 0.0D, (t_a, t_g) -> t_a + t_g) / t_r.l"
    return _per_tied_run(gains, orders, f"array_repeat({mean}, t_r.l)")


def tie_worst(gains: str, orders: str) -> str:
    """SQL: each tied group's gains (equal ordering key) sorted ascending: the least relevant first.

    CatBoost's order of tied scores (its ``CompareDocs``: score descending, then target
    ascending), the worst ordering of each tie. Linear in the list's length as
    :func:`tie_averaged`; only lists that hold a tie pay for it.

    Examples
    --------
    >>> df = spark.createDataFrame([([3.0, 0.0, 1.0], [1.0, 1.0, 2.0])], "g array<double>, o array<double>")
    >>> df.selectExpr(tie_worst("g", "o") + " AS worst").first().worst
    [0.0, 3.0, 1.0]
    """
    return _per_tied_run(gains, orders, f"sort_array(slice({gains}, t_r.s, t_r.l), true)")


def _per_tied_run(gains: str, orders: str, run: str) -> str:
    """SQL: ``gains`` with each run of equal ``orders`` replaced by ``run`` (SQL over ``t_r.s``, its
    1-based start, and ``t_r.l``, its length, giving as many elements), for lists that hold a tie.

    The lists are in position order, which sorts them by ordering key, so a tied group is a run
    of adjacent elements, found from its start (an element whose key differs from the one before).
    """
    n = f"size({orders})"
    starts = f"filter(sequence(1, {n}), t_i -> t_i = 1 OR {orders}[t_i - 1] <> {orders}[t_i - 2])"
    # Each run as (start, length): it ends where the next one starts, the last at the list's end.
    # (No lambda may refer to ``starts``: a lambda re-evaluates what it refers to, per element.)
    ends = f"concat(slice({starts}, 2, {n}), array({n} + 1))"
    runs = f"zip_with({starts}, {ends}, (t_s, t_e) -> named_struct('s', t_s, 'l', t_e - t_s))"
    replaced = f"flatten(transform({runs}, t_r -> {run}))"
    # -0.0 and 0.0 are one key to <> but two to Spark 3.5's array_distinct: + 0.0D makes them one.
    tied = has_repeats(f"transform({orders}, t_o -> t_o + 0.0D)")
    return f"(CASE WHEN {tied} THEN {replaced} ELSE {gains} END)"


def hits_of(opts: EvaluationOptions) -> str:
    """SQL: the list's hits as ``array<struct<p: int, g: double>>`` in position order.

    One element per distinct recommended item that was judged: ``p`` the 1-based position of its
    first occurrence (a repeated item gains there only), ``g`` its gain. ``array_intersect``
    keeps the order of the recommended list and drops repeats, so the lookups (a scan of the
    judged items each) only run for the few items that hit, not for every position. With tie
    averaging (or the worst order of ties) the hits are the positions of the nonzero gains.
    """
    empty = "CAST(array() AS array<struct<p: int, g: double>>)"
    if opts.ties != "item":
        terms = f"transform({GAINS}, (h_g, h_i) -> named_struct('p', {_position('h_i', opts)}, 'g', h_g))"
        return f"coalesce(filter({terms}, h_t -> h_t.g <> 0.0D), {empty})"
    # A hit is always judged, so one array_position (not relevance_of's two) finds its grade.
    grade = f"element_at({JUDGED_RELEVANCE}, CAST(array_position({JUDGED_ITEMS}, h_x) AS INT))"
    position = f"CAST(array_position({ITEMS}, h_x) AS INT)"
    if positions_as_given(opts):
        position = f"CAST(element_at({ORDERS}, {position}) AS INT)"
    terms = (
        f"transform(array_intersect({ITEMS}, {JUDGED_ITEMS}), h_x -> named_struct("
        f"'p', {position}, 'g', {gain(grade, opts.gain)}))"
    )
    # array_intersect is null for a user without judgements (or without recommendations).
    return f"coalesce({terms}, {empty})"


def _cut(k: Optional[int]) -> str:
    return "n_recommended" if k is None else str(int(k))


def _recommended_cut(k: Optional[int], opts: EvaluationOptions) -> str:
    """SQL: the last position of the recommended side at cutoff ``k`` (given ranks may pass the list's length)."""
    return str(2**31 - 1) if k is None and positions_as_given(opts) else _cut(k)


def _whole_ideal(k: Optional[int], opts: EvaluationOptions) -> bool:
    """True when the ideal list is read whole: the whole-list cutoff under ``whole_list = "all_judged"``."""
    return k is None and opts.whole_list == "all_judged" and not opts.cap_ideal_at_list_length


def _discount(position: str, opts: EvaluationOptions) -> str:
    if opts.discount == "position":
        # CatBoost's denominator=Position: 1/i, no logarithm (so log_base does not apply).
        return f"(1.0D / {position})"
    return discount(position, opts.discount, opts.log_base)


def _ideal_cut(cut: str, opts: EvaluationOptions) -> str:
    return f"least({cut}, n_recommended)" if opts.cap_ideal_at_list_length else cut


def with_cutoffs(df: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """One row per (list, k) with cg, dcg, idcg and ndcg (and the companion metrics); the arrays go.

    Each list's sums at every cutoff are taken on its own row, from its hit and ideal arrays
    (:func:`_sums_per_list`), as arrays with one element per cutoff; each (list, k) row reads
    its own cutoff's element. Every row's expressions stay the same size however many cutoffs
    there are: a ``CASE`` over every cutoff's figures on each row made the generated code of the
    join's stage too large for the JVM to compile (past 8,000 bytes of bytecode a method runs
    interpreted), which cost six cutoffs 2.4 times one cutoff's task CPU.
    """
    kept = [*list_keys(df.columns, opts), "n_recommended", N_RELEVANT, *CARRIED]
    companions = []
    if opts.companion_metrics:
        # The hit positions walked once, as the sums (hits and precisions at the hits at each cutoff).
        companions = [f"{_companion_sums(opts)} AS {COMPANION_SUMS}", f"try_element_at({HITS}, 1) AS {FIRST_HIT}"]
        companions.append(N_RELEVANT_BINARY)
    with_hits = df.selectExpr(*kept, *companions, f"{hits_of(opts)} AS {HIT_TERMS}", IDEAL)
    carried = [COMPANION_SUMS, FIRST_HIT, N_RELEVANT_BINARY] if companions else []
    per_list = _sums_per_list(with_hits, [*kept, *carried], opts)

    def as_int(k: Optional[int]) -> str:
        return "CAST(NULL AS INT)" if k is None else f"CAST({int(k)} AS INT)"

    if len(opts.cutoffs) == 1:
        per_k, at, k_column = per_list, "0", f"{as_int(opts.cutoffs[0])} AS k"
        cut = _cut(opts.cutoffs[0])
    else:
        cutoffs = ", ".join(as_int(k) for k in opts.cutoffs)
        per_k = per_list.selectExpr("*", f"posexplode(array({cutoffs})) AS ({K_INDEX}, k)")
        at, k_column, cut = K_INDEX, "k", f"coalesce(k, {_cut(None)})"
    names = [m.name for m in COMPANIONS] if opts.companion_metrics else []
    metrics = {}
    if opts.companion_metrics:
        sums = f"{COMPANION_SUMS}[{at}]"
        metrics = companion_metrics(f"{sums}.h", f"{sums}.a", FIRST_HIT, N_RELEVANT_BINARY, cut)
    figures = per_k.selectExpr(
        *kept,
        k_column,
        f"coalesce({SUMS}[{at}].c, 0.0D) AS cg",
        f"coalesce({SUMS}[{at}].d, 0.0D) AS dcg",
        f"coalesce({IDEAL_SUMS}[{at}].i, 0.0D) AS idcg",
        *[f"{metrics[name]} AS {name}" for name in names],
    )
    ndcg = f"CASE WHEN idcg > 0 THEN dcg / idcg {_zero_idcg_one(opts)}ELSE 0.0D END"
    # A list's gains can add up past the largest double: stop there rather than give NaN.
    keys = [c for c in (*opts.group_by, opts.user_col) if c in per_k.columns]
    checked = sums_checked(ndcg, [("cg", "cg"), ("dcg", "dcg"), ("idcg", "idcg")], keys)
    return figures.selectExpr(*kept, "k", "cg", "dcg", "idcg", *names, f"{checked} AS ndcg")


def _companion_sums(opts: EvaluationOptions) -> str:
    """SQL: per cutoff, the hits within it (``h``) and the sum of the precisions at them (``a``),
    from one walk of the hit positions (:func:`sums_at_cuts`): the companion metrics read them.

    The precision at the j-th hit (0-based) at position p is (j + 1) / p, added left to right
    from the first hit. The whole list's cut (its length) may fall below a finite k, so it is
    walked apart.
    """
    terms = {"h": lambda t, p: "1.0D", "a": lambda t, p: f"CAST(s_a.n + 1 AS DOUBLE) / {t}"}
    finite = [str(int(k)) for k in opts.cutoffs if k is not None]
    walks = [sums_at_cuts(HITS, terms, finite, position="s_t")] if finite else []
    if None in opts.cutoffs:
        walks.append(sums_at_cuts(HITS, terms, [_cut(None)], position="s_t"))
    return walks[0] if len(walks) == 1 else f"concat({', '.join(walks)})"


def _zero_idcg_one(opts: EvaluationOptions) -> str:
    """SQL: the ``WHEN`` of ``zero_idcg = "one"`` in the NDCG's ``CASE`` (empty otherwise).

    1.0 goes to users without positive relevance in the relevance table, the users
    ``zero_idcg`` names. An IDCG of 0 can also come from the ideal list alone: from the
    candidates when no relevant item was recommended, or from an empty list; such a user has
    relevant items and was shown none of them, so it scores 0.
    """
    return f"WHEN {N_RELEVANT} = 0 THEN 1.0D " if opts.zero_idcg == "one" else ""


def _sums_per_list(with_hits: DataFrame, kept: List[str], opts: EvaluationOptions) -> DataFrame:
    """Per list: cg, dcg and idcg at each cutoff, summed on the list's own row in one walk of each array.

    The hits (:func:`hits_of`: position and gain, in position order) and the ideal grades are
    arrays of the row. One ``aggregate`` walks each array once and records its sums as it passes
    each cutoff (:func:`sums_at_cuts`), so every sum adds its terms left to right from position 1,
    starting at 0.0: the same additions, in the same order, as a ``sum`` over one row per term,
    so the same bits, however many cutoffs. Nothing is exploded and nothing is aggregated across
    rows, so after the join of the lists the plan holds no exchange, whatever the join's output
    partitioning.
    """
    finite = [str(int(k)) for k in opts.cutoffs if k is not None]
    whole = None in opts.cutoffs
    # The whole list's hits are all the hits (given ranks may pass its length).
    hit_cuts: List[Optional[str]] = [*finite, *([None] if whole else [])]
    hit_terms = {"c": lambda t, p: f"{t}.g", "d": lambda t, p: f"{t}.g * {_discount(p, opts)}"}
    ideal_cuts: List[Optional[str]] = [_ideal_cut(k, opts) for k in finite]
    ideal_term = {"i": lambda t, p: f"{gain(t, opts.gain)} * {_discount(p, opts)}"}
    separate = None
    if whole:
        if _whole_ideal(None, opts):
            ideal_cuts.append(None)
        elif opts.cap_ideal_at_list_length:
            # least(k, n) <= n: the whole list's cut is the last.
            ideal_cuts.append(_ideal_cut("n_recommended", opts))
        else:
            # The list's length may fall below a finite k: that cut is not in order with the others.
            separate = sums_at_cuts(IDEAL, ideal_term, ["n_recommended"])
    ideal = sums_at_cuts(IDEAL, ideal_term, ideal_cuts) if ideal_cuts else None
    if separate:
        ideal = separate if ideal is None else f"concat({ideal}, {separate})"
    return with_hits.selectExpr(
        *kept,
        f"{sums_at_cuts(HIT_TERMS, hit_terms, hit_cuts, position='s_t.p')} AS {SUMS}",
        f"{ideal} AS {IDEAL_SUMS}",
    )
