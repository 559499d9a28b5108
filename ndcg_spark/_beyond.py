"""Beyond accuracy: novelty, surprisal, popularity, diversity, serendipity, unexpectedness and coverage.

A stage beside scoring. It reads the ranked lists (segments, user, ``ITEMS``: the contract's
columns, :mod:`ndcg_spark._columns`), the judged lists (for serendipity's relevance) and the
optional tables of :class:`Tables`, and gives:

* :func:`per_list`: one row per (list, k) with each asked per-user metric, joined onto the
  scored rows by :func:`attach`;
* :func:`summary`: per segment and k, ``mean_<name>`` with its normal 95% interval for each
  per-user metric, and the global figures (``catalog_coverage``, ``distributional_coverage``,
  ``gini_index``) from each item's exposure (:func:`exposure`).

Every figure is Spark SQL over arrays of the list's row (higher-order functions), no UDF. Each
list is exploded once to meet the per-item table (popularity, self-information, surprisal weight,
head, category, normalised features: :func:`item_table`) and regrouped; the per-user tables
(history, baseline list) meet the lists on the user, as they are partitioned already.
Similarity is computed only where a metric reads it: a category or feature cosine from the
list's own arrays (the sum of the normalised vectors gives every pair's cosine at once), a
co-occurrence cosine for the item pairs some list or some user's history pairs with a
recommended item, from the pairs of items within each user's history (at most
``max_history`` distinct items per user: a longer history stops the run, naming the user).

Definitions and each peer's switches: ``docs/conventions.md`` (Beyond accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._columns import EXCLUDED, ITEM, ITEMS, JUDGED_ITEMS, JUDGED_RELEVANCE, SEGMENT, list_keys
from ndcg_spark._sql import ident, string_literal
from ndcg_spark.errors import COLUMN_TYPE, MISSING_COLUMN, TYPES_DIFFER, ConfigError, InputDataError, input_check
from ndcg_spark.options import BEYOND_GLOBAL, BEYOND_METRICS, BEYOND_PER_USER, EvaluationOptions

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
K_INDEX = "__nb_k_index"
PAIR_SUMS = "__nb_pair_sums"
SEREN_SUMS = "__nb_serendipity_sums"
CATEGORY = "__nb_category"
FEATURES = "__nb_features"
UNIT = "__nb_unit"
POP = "__nb_pop"
USERS = "__nb_users"
SELF_INFO = "__nb_self_info"
SURPRISAL = "__nb_surprisal"
HEAD = "__nb_head"
SIM = "__nb_sim"
LO, HI = "__nb_lo", "__nb_hi"

TABLES = ("interactions", "items", "baseline_recommendations")


@dataclass(frozen=True)
class Tables:
    """The inputs beyond the two of NDCG, each optional: ``interactions`` (user, item: what users did
    before the lists), ``items`` (the catalog: item, optional category and features columns) and
    ``baseline`` (another model's recommendations, as the recommendations are given)."""

    interactions: Optional[DataFrame] = None
    items: Optional[DataFrame] = None
    baseline: Optional[DataFrame] = None


# ----------------------------------------------------------------------------- what is asked


def needs(name: str, opts: EvaluationOptions) -> Tuple[str, ...]:
    """What metric ``name`` reads: table names of :data:`TABLES`, or ``item_category_col`` /
    ``item_features_col`` (an items table with that column)."""
    similarity = {
        "cooccurrence": ("interactions",),
        "features": ("items", "item_features_col"),
        "category": ("items", "item_category_col"),
    }[opts.similarity]
    reads = {
        "novelty": ("interactions",),
        "surprisal": ("interactions",),
        "unseen_share": ("interactions",),
        "popularity": ("interactions",),
        "long_tail_share": ("interactions",),
        "diversity": similarity,
        "category_diversity": ("items", "item_category_col"),
        "serendipity": tuple(dict.fromkeys(("interactions", *similarity))),
        "unexpectedness": ("baseline_recommendations",),
        "catalog_coverage": () if opts.coverage_catalog == "catalog" else ("interactions",),
        "distributional_coverage": (),
        "gini_index": (),
    }
    return reads[name]


def _missing(name: str, tables: Tables, opts: EvaluationOptions) -> Optional[str]:
    given = {
        "interactions": tables.interactions is not None,
        "items": tables.items is not None,
        "baseline_recommendations": tables.baseline is not None,
        "item_category_col": opts.item_category_col is not None,
        "item_features_col": opts.item_features_col is not None,
    }
    return next((need for need in needs(name, opts) if not given[need]), None)


def asked(opts: EvaluationOptions, tables: Tables) -> Tuple[str, ...]:
    """The metrics to compute: every one the inputs allow (``beyond_accuracy = True``), or those named.

    Raises
    ------
    ConfigError
        A named metric whose input is missing (one line naming the input), or an input given
        without ``beyond_accuracy``'s asking for anything.
    """
    if opts.beyond_accuracy is True:
        return tuple(n for n in BEYOND_METRICS if _missing(n, tables, opts) is None)
    if not opts.beyond_accuracy:
        return ()
    for name in opts.beyond_accuracy:
        missing = _missing(name, tables, opts)
        if missing is not None:
            what = f"an items table with {missing} set" if missing.startswith("item_") else f"the {missing} table"
            raise ConfigError(
                f"{name} needs {what}"
                + (f" (similarity = {opts.similarity!r})" if name in ("diversity", "serendipity") else ""),
                condition="INVALID_CONFIG.MISSING_INPUT",
                parameters={"metric": name, "input": missing},
            )
    return tuple(opts.beyond_accuracy)


# ----------------------------------------------------------------------------- the tables


def _check_columns(df: DataFrame, table: str, needed: Sequence[Tuple[str, str]]) -> None:
    fields = {f.name: f.dataType for f in df.schema.fields}
    for column, option in needed:
        if column not in fields:
            raise InputDataError(
                f"{table} table has no column {column!r} (it has: {', '.join(fields) or 'no columns'}; "
                f"set {option} to the column's name)",
                condition=MISSING_COLUMN,
                parameters={"table": table, "column": column},
            )


def _item_as(df: DataFrame, table: str, item_type: T.DataType, opts: EvaluationOptions) -> str:
    """SQL: the table's item column in the lists' item type (a wider or narrower integer is cast)."""
    own = df.schema[opts.item_col].dataType
    if own == item_type:
        return f"{ident(opts.item_col)} AS {ITEM}"
    integral = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
    if not (isinstance(own, integral) and isinstance(item_type, integral)):
        raise InputDataError(
            f"item column {opts.item_col!r} is {own.simpleString()} in the {table} table but "
            f"{item_type.simpleString()} in the recommendations; store both with one type",
            condition=TYPES_DIFFER,
            parameters={"column": opts.item_col},
        )
    return f"CAST({ident(opts.item_col)} AS {item_type.simpleString()}) AS {ITEM}"


def _null_rule(df: DataFrame, table: str, columns: Sequence[str], key: str) -> DataFrame:
    whens = " ".join(
        f"WHEN {ident(c)} IS NULL THEN {string_literal(f'{table} column {c!r} is null, e.g. ')}" for c in columns
    )
    problem = f"(CASE {whens} END)"
    return df.filter(input_check(f"{problem} IS NOT NULL", f"concat({problem}, {key})"))


def interactions_rows(df: DataFrame, item_type: T.DataType, opts: EvaluationOptions) -> DataFrame:
    """The interactions as (user, ``ITEM``) rows, every row kept (repeats count as popularity);
    a null user or item stops the run."""
    _check_columns(df, "interactions", [(opts.user_col, "user_col"), (opts.item_col, "item_col")])
    key = f"concat({string_literal(opts.user_col + '=')}, coalesce(CAST({ident(opts.user_col)} AS STRING), 'null'))"
    checked = _null_rule(df, "interactions", [opts.user_col, opts.item_col], key)
    return checked.selectExpr(ident(opts.user_col), _item_as(df, "interactions", item_type, opts))


def items_rows(df: DataFrame, item_type: T.DataType, opts: EvaluationOptions) -> DataFrame:
    """The catalog as (``ITEM``, ``CATEGORY``, ``FEATURES``) rows, one per item.

    Row rules: a null item, an item listed twice, a feature vector that is null, holds a null or
    a NaN, or differs in length from the longest vector of the table: each stops the run, naming
    the item.
    """
    needed = [(opts.item_col, "item_col")]
    if opts.item_category_col:
        needed.append((opts.item_category_col, "item_category_col"))
    if opts.item_features_col:
        needed.append((opts.item_features_col, "item_features_col"))
    _check_columns(df, "items", needed)
    if opts.item_features_col:
        kind = df.schema[opts.item_features_col].dataType
        numeric = (T.FloatType, T.DoubleType, T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DecimalType)
        if not (isinstance(kind, T.ArrayType) and isinstance(kind.elementType, numeric)):
            raise InputDataError(
                f"items column {opts.item_features_col!r} has type {kind.simpleString()}; accepted: an array of numbers",
                condition=COLUMN_TYPE,
                parameters={"table": "items", "column": opts.item_features_col, "type": kind.simpleString()},
            )
    item = ident(opts.item_col)
    key = f"concat({string_literal(opts.item_col + '=')}, coalesce(CAST({item} AS STRING), 'null'))"
    rows = _null_rule(df, "items", [opts.item_col], key)
    columns = [_item_as(df, "items", item_type, opts)]
    columns.append(
        f"CAST({ident(opts.item_category_col)} AS STRING) AS {CATEGORY}"
        if opts.item_category_col
        else f"CAST(NULL AS STRING) AS {CATEGORY}"
    )
    if opts.item_features_col:
        columns.append(f"CAST({ident(opts.item_features_col)} AS array<double>) AS {FEATURES}")
    else:
        columns.append(f"CAST(NULL AS array<double>) AS {FEATURES}")
    rows = rows.selectExpr(*columns, f"{key} AS __nb_key")
    message = "concat('items table lists an item more than once, e.g. ', __nb_key)"
    once = rows.selectExpr("*", f"count(1) OVER (PARTITION BY {ITEM}) AS __nb_times").filter(
        input_check("__nb_times > 1", message)
    )
    if opts.item_features_col:
        name = opts.item_features_col
        longest = once.agg(F.max(F.size(F.col(FEATURES))).alias("__nb_length"))
        bad = (
            f"(CASE WHEN {FEATURES} IS NULL THEN 'is null' "
            f"WHEN exists({FEATURES}, x -> x IS NULL OR isnan(x)) THEN 'holds a null or NaN' "
            f"WHEN size({FEATURES}) <> __nb_length THEN concat('has ', CAST(size({FEATURES}) AS STRING), "
            "' values where the longest has ', CAST(__nb_length AS STRING)) END)"
        )
        message = f"concat({string_literal(f'items column {name!r} ')}, {bad}, ', e.g. ', __nb_key)"
        once = once.crossJoin(F.broadcast(longest)).filter(input_check(f"{bad} IS NOT NULL", message))
    return once.select(ITEM, CATEGORY, FEATURES)


def _unit(features: str) -> str:
    """SQL: a feature vector divided by its norm (null for a zero vector: it is similar to nothing)."""
    norm = f"sqrt(aggregate({features}, 0.0D, (a, x) -> a + x * x))"
    return f"(CASE WHEN {norm} > 0.0D THEN transform({features}, x -> x / {norm}) END)"


def item_table(
    interactions: Optional[DataFrame], items: Optional[DataFrame], opts: EvaluationOptions
) -> Tuple[Optional[DataFrame], Optional[DataFrame]]:
    """Per item: ``POP`` (interaction rows), ``USERS`` (distinct users), ``SELF_INFO`` (-log2 of its
    share of the rows), ``SURPRISAL`` (RePlay's: log2(users / its users) / log2(users)), ``HEAD``, and
    the items table's ``CATEGORY`` and ``UNIT`` (the normalised features); and one row of totals
    (``__nb_rows``, ``__nb_all_users``: the cold items' values read them).

    The head: the fewest most popular items whose rows reach ``head_share`` of all, the items tied
    with the last of them included: every item at least as popular as that last one.
    """
    stats = totals = None
    if interactions is not None:
        per_item = interactions.groupBy(ITEM).agg(
            F.count(F.lit(1)).alias(POP), F.countDistinct(F.col(ident(opts.user_col))).alias(USERS)
        )
        totals = interactions.agg(
            F.count(F.lit(1)).cast("double").alias("__nb_rows"),
            F.countDistinct(F.col(ident(opts.user_col))).cast("double").alias("__nb_all_users"),
        )
        # The head's threshold from the distinct popularity values (a handful), largest first.
        by_value = per_item.groupBy(POP).agg((F.col(POP) * F.count(F.lit(1))).alias("__nb_mass"))
        running = by_value.selectExpr(
            POP,
            f"sum(__nb_mass) OVER (ORDER BY {POP} DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS __nb_run",
        )
        threshold = (
            running.crossJoin(totals)
            .filter(f"__nb_run >= {float(opts.head_share)!r}D * __nb_rows")
            .agg(F.max(F.col(POP)).alias("__nb_head_pop"))
        )
        stats = per_item.crossJoin(F.broadcast(totals.crossJoin(threshold))).selectExpr(
            ITEM,
            POP,
            USERS,
            f"-log2(CAST({POP} AS DOUBLE) / __nb_rows) AS {SELF_INFO}",
            # One user in all: log2(1) = 0 over 0, no surprisal (RePlay's NaN); null, not a
            # division by zero under ANSI.
            f"CASE WHEN __nb_all_users > 1 THEN log2(__nb_all_users / {USERS}) / log2(__nb_all_users) ELSE 0.0D END AS {SURPRISAL}",
            f"{POP} >= __nb_head_pop AS {HEAD}",
        )
    if items is not None:
        catalog = items.selectExpr(ITEM, CATEGORY, f"{_unit(FEATURES)} AS {UNIT}")
        if stats is None:
            stats = catalog
        else:
            stats = stats.join(catalog, on=ITEM, how="full")
    return stats, totals


def history_table(interactions: DataFrame, items: Optional[DataFrame], opts: EvaluationOptions) -> DataFrame:
    """Per user: the distinct items of its interactions (``HISTORY``), their number, and what the
    similarity reads of them: their categories, or the sum of their normalised feature vectors.

    Under ``similarity = "cooccurrence"`` a user with more than ``max_history`` distinct items
    stops the run, naming the user: its pairs grow with the square of its history.
    """
    user = ident(opts.user_col)
    distinct = interactions.select(user, ITEM).distinct()
    if opts.similarity in ("features", "category") and items is not None:
        distinct = distinct.join(items.selectExpr(ITEM, CATEGORY, f"{_unit(FEATURES)} AS {UNIT}"), on=ITEM, how="left")
    else:
        distinct = distinct.selectExpr(
            "*", f"CAST(NULL AS STRING) AS {CATEGORY}", f"CAST(NULL AS array<double>) AS {UNIT}"
        )
    grouped = distinct.groupBy(user).agg(
        F.collect_list(ITEM).alias(HISTORY),
        F.collect_list(CATEGORY).alias(HISTORY_CATS),
        F.collect_list(UNIT).alias("__nb_units"),
    )
    summed = (
        "aggregate(__nb_units, CAST(NULL AS array<double>), (acc, v) -> CASE WHEN acc IS NULL THEN v "
        "ELSE zip_with(acc, v, (a, b) -> a + b) END)"
    )
    out = grouped.selectExpr(
        user, HISTORY, f"size({HISTORY}) AS {HISTORY_SIZE}", HISTORY_CATS, f"{summed} AS {HISTORY_VECTOR}"
    )
    if opts.similarity == "cooccurrence":
        message = (
            f"concat({string_literal(f'interactions: {opts.user_col}=')}, CAST({user} AS STRING), ' has ', "
            f"CAST({HISTORY_SIZE} AS STRING), {string_literal(f' distinct items, more than max_history = {opts.max_history} (co-occurrence pairs grow with its square); raise max_history or trim the history')})"
        )
        out = out.filter(input_check(f"{HISTORY_SIZE} > {int(opts.max_history)}", message))
    return out


def cooccurrence(history: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """Cosine of two items' user sets, ``SIM`` = |U_a ∩ U_b| / sqrt(|U_a| |U_b|), for every pair
    (``LO`` < ``HI``) that some user's history holds together (any other pair is 0).

    From the histories already checked against ``max_history``: at most max_history² / 2 pairs a user.
    """
    user = ident(opts.user_col)
    pairs = history.selectExpr(
        user,
        f"explode(flatten(transform({HISTORY}, a -> transform(filter({HISTORY}, b -> b > a), b -> named_struct('lo', a, 'hi', b))))) AS __nb_pair",
    )
    counts = pairs.groupBy(F.col("__nb_pair.lo").alias(LO), F.col("__nb_pair.hi").alias(HI)).agg(
        F.count(F.lit(1)).alias("__nb_both")
    )
    users = history.selectExpr(f"explode({HISTORY}) AS {ITEM}").groupBy(ITEM).agg(F.count(F.lit(1)).alias(USERS))
    return (
        counts.join(users.selectExpr(f"{ITEM} AS {LO}", f"{USERS} AS __nb_lo_users"), on=LO)
        .join(users.selectExpr(f"{ITEM} AS {HI}", f"{USERS} AS __nb_hi_users"), on=HI)
        .selectExpr(LO, HI, f"__nb_both / sqrt(CAST(__nb_lo_users AS DOUBLE) * __nb_hi_users) AS {SIM}")
    )


# ----------------------------------------------------------------------------- per list


def _cutoff_sql(k: Optional[int]) -> str:
    return "CAST(NULL AS INT)" if k is None else f"CAST({int(k)} AS INT)"


def _share_of(count: str, n: str, k: Optional[int], by_k: bool) -> str:
    """SQL: ``count`` over the list's length within k, or over k (``by_k``, a finite k)."""
    den = f"CAST({int(k)} AS DOUBLE)" if (by_k and k is not None) else f"CAST({n} AS DOUBLE)"
    return f"(CASE WHEN {n} > 0 THEN {count} / {den} END)"


def _sum(array: str, term: str) -> str:
    return f"aggregate({array}, 0.0D, (s, x) -> s + {term})"


def _metrics_at(k: Optional[int], names: Sequence[str], opts: EvaluationOptions) -> Dict[str, str]:
    """SQL of each per-user metric at cutoff ``k`` from the row's arrays (``ATTRS``: one struct per
    position; ``HISTORY``; ``BASELINE``; the co-occurrence sums ``PAIR_SUMS`` / ``SEREN_SUMS``)."""
    top = ATTRS if k is None else f"slice({ATTRS}, 1, {int(k)})"
    n = f"size({top})"
    by_k = opts.short_lists == "k"
    index = opts.cutoffs.index(k)  # PAIR_SUMS and SEREN_SUMS hold one sum per cutoff, in order
    out: Dict[str, str] = {}
    if "novelty" in names:
        out["novelty"] = _share_of(_sum(top, "x.si"), n, k, by_k)
    if "popularity" in names:
        out["popularity"] = _share_of(_sum(top, "CAST(x.pop AS DOUBLE)"), n, k, by_k)
    if "long_tail_share" in names:
        out["long_tail_share"] = _share_of(f"CAST(size(filter({top}, x -> NOT x.h)) AS DOUBLE)", n, k, by_k)
    if "surprisal" in names:
        out["surprisal"] = _share_of(_sum(top, "x.sw"), n, k, by_k)
    if "unseen_share" in names:
        unseen = f"CAST(size(filter({top}, x -> NOT coalesce(array_contains({HISTORY}, x.i), false))) AS DOUBLE)"
        value = _share_of(unseen, n, k, False)
        if opts.without_list == "scored":
            # RePlay's Novelty: a training user only; without a list, 1.0.
            value = f"(CASE WHEN {HISTORY} IS NOT NULL THEN {value} END)"
        out["unseen_share"] = value
    if "unexpectedness" in names:
        base = BASELINE if k is None else f"slice({BASELINE}, 1, {int(k)})"
        missing = "1.0D" if opts.without_baseline == "unexpected" else "0.0D"
        # 1 - the share shared with the baseline's top k: under short_lists = "k" the empty slots
        # of a short list count as unexpected, as RePlay's 1 - |R ∩ B| / k.
        shared = f"CAST(size(filter({top}, x -> array_contains({base}, x.i))) AS DOUBLE)"
        out["unexpectedness"] = (
            f"(CASE WHEN {n} = 0 THEN NULL WHEN {BASELINE} IS NULL THEN {missing} "
            f"ELSE 1.0D - {_share_of(shared, n, k, by_k)} END)"
        )
    if "category_diversity" in names:
        distinct = f"CAST(size(array_distinct(filter(transform({top}, x -> x.c), c -> c IS NOT NULL))) AS DOUBLE)"
        out["category_diversity"] = _share_of(distinct, n, k, by_k)
    if "diversity" in names:
        pairs = f"(CAST({n} AS DOUBLE) * ({n} - 1) / 2.0D)"
        if opts.similarity == "category":
            cats = f"filter(transform({top}, x -> x.c), c -> c IS NOT NULL)"
            same = f"aggregate(array_distinct({cats}), 0.0D, (s, c) -> s + (CAST(size(filter({cats}, d -> d = c)) AS DOUBLE) * (size(filter({cats}, d -> d = c)) - 1) / 2.0D))"
        elif opts.similarity == "features":
            units = f"filter(transform({top}, x -> x.f), f -> f IS NOT NULL)"
            total = f"aggregate({units}, CAST(NULL AS array<double>), (acc, v) -> CASE WHEN acc IS NULL THEN v ELSE zip_with(acc, v, (a, b) -> a + b) END)"
            squares = f"coalesce(aggregate({total}, 0.0D, (s, v) -> s + v * v), 0.0D)"
            own = f"aggregate({units}, 0.0D, (s, v) -> s + aggregate(v, 0.0D, (t, w) -> t + w * w))"
            same = f"(({squares} - {own}) / 2.0D)"
        else:
            same = f"{PAIR_SUMS}[{index}]"
        out["diversity"] = f"(CASE WHEN {n} >= 2 THEN 1.0D - {same} / {pairs} END)"
    if "serendipity" in names:
        if opts.similarity == "cooccurrence":
            relevance = _sum(top, "x.r")
            term = f"({relevance} - {SEREN_SUMS}[{index}] / CAST({HISTORY_SIZE} AS DOUBLE))"
        else:
            if opts.similarity == "category":
                mean = f"(CAST(size(filter({HISTORY_CATS}, h -> h = x.c)) AS DOUBLE) / {HISTORY_SIZE})"
            else:
                mean = f"coalesce(aggregate(zip_with(x.f, {HISTORY_VECTOR}, (a, b) -> a * b), 0.0D, (s, v) -> s + v) / {HISTORY_SIZE}, 0.0D)"
            term = _sum(top, f"(1.0D - {mean}) * x.r")
        out["serendipity"] = f"(CASE WHEN {HISTORY} IS NOT NULL AND {n} > 0 THEN {term} / CAST({n} AS DOUBLE) END)"
    return out


def per_list(
    lists: DataFrame,
    judged: DataFrame,
    stats: Optional[DataFrame],
    totals: Optional[DataFrame],
    history: Optional[DataFrame],
    baseline: Optional[DataFrame],
    names: Sequence[str],
    opts: EvaluationOptions,
) -> DataFrame:
    """One row per (list, k): the list's keys (``SEGMENT`` packed, or the segment columns), ``k``
    and each per-user metric of ``names``.

    ``lists``: the ranked lists (keys, ``ITEMS``); ``judged``: the judged lists on the same keys;
    ``history``: :func:`history_table`; ``baseline``: the baseline's ranked lists on the user.
    """
    names = [n for n in names if n in BEYOND_PER_USER]
    keys = list_keys(lists.columns, opts)  # quoted, for SQL text
    raw = [c for c in (SEGMENT, *opts.group_by, opts.user_col) if c in lists.columns]  # for joins
    user = ident(opts.user_col)
    k_max = opts.largest_k
    items = ITEMS if k_max is None else f"slice({ITEMS}, 1, {int(k_max)})"
    exploded = lists.selectExpr(*keys, f"posexplode({items}) AS ({POS}, {ITEM})")
    if totals is not None:
        exploded = exploded.crossJoin(F.broadcast(totals))
    if stats is not None:
        exploded = exploded.join(stats, on=ITEM, how="left")
    cols = set(exploded.columns)

    def col(name: str, default: str) -> str:
        return name if name in cols else default

    # A cold item (in no interaction): popularity 0, its self-information as if seen once (or 0
    # under cold_items = "zero", as Recommenders' inner join), surprisal 1 (RePlay), in the tail.
    cold_info = "-log2(1.0D / nullif(__nb_rows, 0.0D))" if opts.cold_items == "once" else "0.0D"
    attrs = (
        f"named_struct('p', {POS}, 'i', {ITEM}, "
        f"'si', coalesce({col(SELF_INFO, 'CAST(NULL AS DOUBLE)')}, {cold_info if totals is not None else 'CAST(NULL AS DOUBLE)'}), "
        f"'sw', coalesce({col(SURPRISAL, 'CAST(NULL AS DOUBLE)')}, 1.0D), "
        f"'pop', coalesce({col(POP, 'CAST(NULL AS BIGINT)')}, 0L), "
        f"'h', coalesce({col(HEAD, 'CAST(NULL AS BOOLEAN)')}, false), "
        f"'c', {col(CATEGORY, 'CAST(NULL AS STRING)')}, "
        f"'f', {col(UNIT, 'CAST(NULL AS array<double>)')}, "
        "'r', 0.0D)"
    )
    grouped = exploded.groupBy(*[F.col(c) for c in keys]).agg(
        F.expr(
            f"array_sort(collect_list({attrs}), (a, b) -> CASE WHEN a.p < b.p THEN -1 WHEN a.p > b.p THEN 1 ELSE 0 END)"
        ).alias(ATTRS)
    )
    rows = grouped
    if "serendipity" in names:
        # The item's judged relevance (the largest, were it judged twice), 0 when not judged.
        relevance = (
            f"coalesce(array_max(transform({JUDGED_ITEMS}, (j, n) -> CASE WHEN j = x.i THEN "
            f"{JUDGED_RELEVANCE}[n] END)), 0.0D)"
        )
        rows = rows.join(judged.select(*[F.col(c) for c in keys], JUDGED_ITEMS, JUDGED_RELEVANCE), on=raw, how="left")
        rows = rows.selectExpr(
            *keys,
            f"transform({ATTRS}, x -> named_struct('p', x.p, 'i', x.i, 'si', x.si, 'sw', x.sw, 'pop', x.pop, 'h', x.h, 'c', x.c, 'f', x.f, 'r', {relevance})) AS {ATTRS}",
        )
    if history is not None:
        rows = rows.join(history, on=opts.user_col, how="left")
    if baseline is not None:
        rows = rows.join(baseline.selectExpr(user, f"{ITEMS} AS {BASELINE}"), on=opts.user_col, how="left")
    if opts.similarity == "cooccurrence" and {"diversity", "serendipity"} & set(names):
        sims = cooccurrence(history, opts)
        if "diversity" in names:
            rows = rows.join(_pair_sums(rows, sims, keys, opts), on=raw, how="left")
        if "serendipity" in names:
            rows = rows.join(_serendipity_sums(rows, sims, keys, opts), on=raw, how="left")
    per_k = [
        f"named_struct('k', {_cutoff_sql(k)}, "
        + ", ".join(
            f"{string_literal(name)}, CAST({sql} AS DOUBLE)" for name, sql in _metrics_at(k, names, opts).items()
        )
        + ")"
        for k in opts.cutoffs
    ]
    return rows.selectExpr(*keys, f"inline(array({', '.join(per_k)}))")


def _cut_sums(position: str, value: str, opts: EvaluationOptions) -> List[str]:
    """Aggregates: the sum of ``value`` over the rows at ``position`` within each cutoff, in order."""
    return [
        f"coalesce(sum(CASE WHEN {position} <= {int(k)} THEN {value} END), 0.0D)"
        if k is not None
        else f"coalesce(sum({value}), 0.0D)"
        for k in opts.cutoffs
    ]


def _pair_sums(rows: DataFrame, sims: DataFrame, keys: List[str], opts: EvaluationOptions) -> DataFrame:
    """Per list: the sum of the co-occurrence cosines of its item pairs within each cutoff (``PAIR_SUMS``)."""
    pairs = rows.selectExpr(
        *keys,
        f"explode(flatten(transform({ATTRS}, a -> transform(filter({ATTRS}, b -> b.p > a.p), "
        "b -> named_struct('p', b.p, 'lo', least(a.i, b.i), 'hi', greatest(a.i, b.i), 'same', a.i = b.i))))) AS __nb_pair",
    ).selectExpr(
        *keys,
        "__nb_pair.p + 1 AS __nb_last",
        f"__nb_pair.lo AS {LO}",
        f"__nb_pair.hi AS {HI}",
        "__nb_pair.same AS __nb_same",
    )
    joined = pairs.join(sims, on=[LO, HI], how="left")
    value = f"(CASE WHEN __nb_same THEN 1.0D ELSE coalesce({SIM}, 0.0D) END)"
    sums = ", ".join(_cut_sums("__nb_last", value, opts))
    return joined.groupBy(*[F.col(c) for c in keys]).agg(F.expr(f"array({sums})").alias(PAIR_SUMS))


def _serendipity_sums(rows: DataFrame, sims: DataFrame, keys: List[str], opts: EvaluationOptions) -> DataFrame:
    """Per list: Σ relevance × cosine(item, history item) over its items within each cutoff and
    the user's history (``SEREN_SUMS``); an item of the history is its own cosine 1."""
    pairs = (
        rows.filter(f"{HISTORY} IS NOT NULL")
        .selectExpr(
            *keys,
            f"explode(flatten(transform({ATTRS}, x -> transform({HISTORY}, h -> named_struct('p', x.p, 'r', x.r, "
            "'lo', least(x.i, h), 'hi', greatest(x.i, h), 'same', x.i = h))))) AS __nb_pair",
        )
        .selectExpr(
            *keys,
            "__nb_pair.p + 1 AS __nb_pos1",
            "__nb_pair.r AS __nb_r",
            f"__nb_pair.lo AS {LO}",
            f"__nb_pair.hi AS {HI}",
            "__nb_pair.same AS __nb_same",
        )
    )
    joined = pairs.join(sims, on=[LO, HI], how="left")
    value = f"(__nb_r * CASE WHEN __nb_same THEN 1.0D ELSE coalesce({SIM}, 0.0D) END)"
    sums = ", ".join(_cut_sums("__nb_pos1", value, opts))
    return joined.groupBy(*[F.col(c) for c in keys]).agg(F.expr(f"array({sums})").alias(SEREN_SUMS))


def unpacked(df: DataFrame) -> DataFrame:
    """``df`` with the packed segment (``SEGMENT``) as its columns again."""
    if SEGMENT not in df.columns:
        return df
    fields = [f.name for f in df.schema[SEGMENT].dataType.fields]
    return df.selectExpr(
        *[f"{SEGMENT}.{ident(c)} AS {ident(c)}" for c in fields], *[ident(c) for c in df.columns if c != SEGMENT]
    )


def _join_null_safe(left: DataFrame, right: DataFrame, keys: Sequence[str], how: str = "left") -> DataFrame:
    renamed = right.select(
        *[F.col(ident(c)).alias(f"__nb_right_{i}") for i, c in enumerate(keys)],
        *[F.col(ident(c)) for c in right.columns if c not in keys],
    )
    condition = None
    for i, c in enumerate(keys):
        equal = F.col(ident(c)).eqNullSafe(F.col(f"__nb_right_{i}"))
        condition = equal if condition is None else condition & equal
    joined = left.join(renamed, on=condition, how=how)
    return joined.select(*[F.col(ident(c)) for c in joined.columns if not c.startswith("__nb_right_")])


def attach(
    scored: DataFrame, metrics: DataFrame, history: Optional[DataFrame], names: Sequence[str], opts: EvaluationOptions
) -> DataFrame:
    """The scored rows with each per-user metric of ``names`` (null for a user without a list).

    Under ``without_list = "scored"`` (RePlay's Novelty, which scores every training user),
    ``unseen_share`` is 1.0 for a user with interactions and no list; a user with interactions
    only (neither a list nor relevance rows) gets rows of its own, left out of NDCG (``EXCLUDED``)
    as a user NDCG never saw. Without segments of the recommendations only: with them, such a
    user belongs to no segment.
    """
    names = [n for n in names if n in BEYOND_PER_USER]
    metrics = unpacked(metrics)
    keys = [c for c in (*opts.group_by, opts.user_col) if c in metrics.columns] + ["k"]
    out = _join_null_safe(scored, metrics, keys)
    if "unseen_share" in names and opts.without_list == "scored" and history is not None:
        user = ident(opts.user_col)
        users = history.selectExpr(user, f"true AS {HAS_HISTORY}")
        if len(keys) == 2:
            seen = out.select(user).distinct()
            cutoffs = ", ".join(_cutoff_sql(k) for k in opts.cutoffs)
            only = users.join(seen, on=opts.user_col, how="left_anti").selectExpr(
                user, f"explode(array({cutoffs})) AS k"
            )
            out = out.unionByName(only.selectExpr(*[_filler(f, opts) for f in out.schema.fields]))
        out = out.join(users, on=opts.user_col, how="left").selectExpr(
            *[ident(c) for c in out.columns if c != "unseen_share"],
            f"CASE WHEN unseen_share IS NULL AND {HAS_HISTORY} THEN 1.0D ELSE unseen_share END AS unseen_share",
        )
    return out


def _filler(field: T.StructField, opts: EvaluationOptions) -> str:
    """SQL: a scored column's value for a user with interactions only (no list, no relevance)."""
    if field.name in (opts.user_col, "k"):
        return ident(field.name)
    if field.name == EXCLUDED:
        return f"true AS {EXCLUDED}"
    kind = field.dataType
    if isinstance(kind, T.BooleanType):
        value = "false"
    elif isinstance(kind, (T.IntegerType, T.LongType)):
        value = "0"
    elif field.name in ("cg", "dcg", "idcg", "ndcg"):
        value = "0.0D"
    else:
        value = "NULL"
    return f"CAST({value} AS {kind.simpleString()}) AS {ident(field.name)}"


# ----------------------------------------------------------------------------- exposure and summary


def exposure(lists: DataFrame, opts: EvaluationOptions) -> DataFrame:
    """How often each item is recommended within each cutoff: segment columns, ``k``, ``ITEM``, ``COUNT``.

    ``lists``: the ranked lists, segments unpacked (user attributes joined when segments live there).
    """
    segments = [ident(c) for c in opts.group_by if c in lists.columns]
    k_max = opts.largest_k
    items = ITEMS if k_max is None else f"slice({ITEMS}, 1, {int(k_max)})"
    cutoffs = ", ".join(_cutoff_sql(k) for k in opts.cutoffs)
    rows = lists.selectExpr(*segments, f"posexplode({items}) AS ({POS}, {ITEM})").selectExpr(
        *segments, ITEM, f"explode(filter(array({cutoffs}), c -> c IS NULL OR {POS} < c)) AS k"
    )
    return rows.groupBy(*[F.col(c) for c in segments], F.col("k"), F.col(ITEM)).agg(F.count(F.lit(1)).alias(COUNT))


def catalog_flags(listed: DataFrame, interactions: Optional[DataFrame], items: Optional[DataFrame]) -> DataFrame:
    """Per item that any table names: ``__nb_in_catalog`` (the catalog: the items table, else the
    items of the interactions and of the lists) and ``__nb_interacted``."""
    inter = (
        interactions.select(ITEM).distinct().selectExpr(ITEM, "true AS __nb_interacted")
        if interactions is not None
        else None
    )
    if items is not None:
        catalog = items.selectExpr(ITEM, "true AS __nb_in_catalog")
    else:
        parts = [listed.select(ITEM)] + ([interactions.select(ITEM)] if interactions is not None else [])
        union = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
        catalog = union.distinct().selectExpr(ITEM, "true AS __nb_in_catalog")
    flags = catalog if inter is None else catalog.join(inter, on=ITEM, how="full")
    if inter is None:
        flags = flags.selectExpr("*", "false AS __nb_interacted")
    return flags.selectExpr(
        ITEM,
        "coalesce(__nb_in_catalog, false) AS __nb_in_catalog",
        "coalesce(__nb_interacted, false) AS __nb_interacted",
    )


def global_figures(exposed: DataFrame, flags: DataFrame, names: Sequence[str], opts: EvaluationOptions) -> DataFrame:
    """Per segment and k: ``catalog_coverage``, ``distributional_coverage`` (bits) and ``gini_index``
    (over the whole catalog, the items never recommended included; Shani and Gunawardana)."""
    segments = [ident(c) for c in opts.group_by if c in exposed.columns]
    sizes = flags.agg(
        F.sum(F.col("__nb_in_catalog").cast("long")).cast("double").alias("__nb_catalog"),
        F.sum(F.col("__nb_interacted").cast("long")).cast("double").alias("__nb_interacted_items"),
    )
    group = ", ".join([*segments, "k"])
    rows = (
        exposed.join(flags, on=ITEM, how="left")
        .crossJoin(F.broadcast(sizes))
        .selectExpr(
            *segments,
            "k",
            COUNT,
            "coalesce(__nb_in_catalog, false) AS __nb_in_catalog",
            "coalesce(__nb_interacted, false) AS __nb_interacted",
            "__nb_catalog",
            "__nb_interacted_items",
            f"CAST(sum({COUNT}) OVER (PARTITION BY {group}) AS DOUBLE) AS __nb_total",
        )
        .selectExpr(
            "*",
            f"CAST(sum(CASE WHEN __nb_in_catalog THEN {COUNT} END) OVER (PARTITION BY {group}) AS DOUBLE) AS __nb_catalog_total",
            f"count(CASE WHEN __nb_in_catalog THEN 1 END) OVER (PARTITION BY {group}) AS __nb_catalog_exposed",
            f"CASE WHEN __nb_in_catalog THEN row_number() OVER (PARTITION BY {group}, __nb_in_catalog ORDER BY {COUNT} ASC) END AS __nb_rank",
        )
    )
    coverage = {
        # An empty catalog (no interaction rows) has no coverage: null, not a division by zero.
        "catalog": "count(CASE WHEN __nb_in_catalog THEN 1 END) / nullif(first(__nb_catalog), 0.0D)",
        "recommended_over_interactions": "count(1) / nullif(first(__nb_interacted_items), 0.0D)",
        "interacted_over_interactions": "count(CASE WHEN __nb_interacted THEN 1 END) / nullif(first(__nb_interacted_items), 0.0D)",
    }[opts.coverage_catalog]
    # j = the item's place among the whole catalog sorted by exposure ascending: the items never
    # recommended (exposure 0) come first.
    j = "(__nb_catalog - __nb_catalog_exposed + __nb_rank)"
    gini = (
        f"sum(CASE WHEN __nb_in_catalog THEN (2.0D * {j} - __nb_catalog - 1.0D) * ({COUNT} / __nb_catalog_total) END) "
        "/ (first(__nb_catalog) - 1.0D)"
    )
    figures = {
        "catalog_coverage": coverage,
        "distributional_coverage": f"-sum(({COUNT} / __nb_total) * log2({COUNT} / __nb_total))",
        "gini_index": f"CASE WHEN first(__nb_catalog) > 1 THEN {gini} END",
    }
    wanted = [n for n in BEYOND_GLOBAL if n in names]
    return rows.groupBy(*[F.col(c) for c in segments], F.col("k")).agg(
        *[F.expr(f"CAST({figures[n]} AS DOUBLE)").alias(n) for n in wanted]
    )


Z_95 = 1.959963984540054


def summary(
    summary_rows: DataFrame,
    scored: DataFrame,
    globals_: Optional[DataFrame],
    names: Sequence[str],
    opts: EvaluationOptions,
) -> DataFrame:
    """The summary with, per segment and k, ``mean_<name>`` and ``<name>_ci_low`` / ``<name>_ci_high``
    (normal 95% interval, null under two users) for each per-user metric, over the users with a
    value; then the global figures. ``mean_novelty`` under ``novelty_weighting = "recommendation"``
    is the mean over every recommendation (no interval)."""
    keys = [c for c in (*opts.group_by, "k")]
    aggregates = []
    for name in [n for n in names if n in BEYOND_PER_USER]:
        if name == "novelty" and opts.novelty_weighting == "recommendation":
            length = "CAST(CASE WHEN k IS NULL THEN n_recommended ELSE least(k, n_recommended) END AS DOUBLE)"
            den = length if opts.short_lists == "list_length" else "CAST(coalesce(k, n_recommended) AS DOUBLE)"
            aggregates += [
                f"sum(novelty * {den}) / sum(CASE WHEN novelty IS NOT NULL THEN {length} END) AS mean_novelty",
                "CAST(NULL AS DOUBLE) AS novelty_ci_low",
                "CAST(NULL AS DOUBLE) AS novelty_ci_high",
            ]
            continue
        half = f"({Z_95}D * stddev_samp({name}) / sqrt(CAST(count({name}) AS DOUBLE)))"
        aggregates += [
            f"avg({name}) AS mean_{name}",
            f"CASE WHEN count({name}) >= 2 THEN avg({name}) - {half} END AS {name}_ci_low",
            f"CASE WHEN count({name}) >= 2 THEN avg({name}) + {half} END AS {name}_ci_high",
        ]
    out = summary_rows
    if aggregates:
        means = scored.groupBy(*[F.col(ident(c)) for c in keys]).agg(*[F.expr(a) for a in aggregates])
        out = _join_null_safe(out, means, keys)
    if globals_ is not None:
        out = _join_null_safe(out, globals_, keys)
    ordered = [F.col(ident(c)).asc_nulls_last() for c in keys]
    return out.coalesce(1).sortWithinPartitions(*ordered)


def unknown_items(interactions: Optional[DataFrame], items: Optional[DataFrame], listed: DataFrame) -> DataFrame:
    """One row: ``interactions_unknown_items`` (interaction rows whose item the items table lacks)
    and ``recommended_unknown_items`` (distinct listed items it lacks); 0 without an items table."""
    spark = listed.sparkSession
    if items is None:
        return spark.range(1).selectExpr("0L AS interactions_unknown_items", "0L AS recommended_unknown_items")
    known = items.select(ITEM)
    listed_unknown = (
        listed.select(ITEM)
        .distinct()
        .join(known, on=ITEM, how="left_anti")
        .agg(F.count(F.lit(1)).alias("recommended_unknown_items"))
    )
    if interactions is None:
        inter_unknown = spark.range(1).selectExpr("0L AS interactions_unknown_items")
    else:
        inter_unknown = interactions.join(known, on=ITEM, how="left_anti").agg(
            F.count(F.lit(1)).alias("interactions_unknown_items")
        )
    return inter_unknown.crossJoin(listed_unknown)
