"""The beyond-accuracy inputs: which tables a metric reads, and those tables read and checked.

:class:`Tables` holds the optional inputs; :func:`asked` the metrics to compute (a named metric
whose input is missing stops the run, naming the input); :func:`interactions_rows` and
:func:`items_rows` the tables as the stage's rows, with their row rules; :func:`unknown_items`
what the items table lacks (counted, never dropped silently).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Collection, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ndcg_spark._beyond.columns import CATEGORY, FEATURES, POP
from ndcg_spark._metrics import registry
from ndcg_spark._spark.counts import RowCount, counted, counted_apart
from ndcg_spark._spark.sql import ident, string_literal
from ndcg_spark._stages.column_contract import ITEM, ITEMS
from ndcg_spark._stages.inputs import INTEGRAL_TYPES, as_rows, common_item_type, item_as
from ndcg_spark._stages.rules import RowRule, key_text, recommendation_rules
from ndcg_spark.errors import COLUMN_TYPE, MISSING_COLUMN, TYPES_DIFFER, ConfigError, InputDataError, input_check
from ndcg_spark.options import TABLE_COLUMNS, EvaluationOptions

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
    """What metric ``name`` reads, as its declaration says (:attr:`~ndcg_spark._metrics.registry.PerUser.reads`):
    table names of :data:`TABLES`, or ``item_category_col`` / ``item_features_col`` (an items table
    with that column)."""
    return registry.declared(name).reads(opts)


def any_reads(names: Collection[str], table: str, opts: EvaluationOptions) -> bool:
    """Whether a metric of ``names`` reads ``table`` (:func:`needs`)."""
    return any(table in needs(name, opts) for name in names)


def _missing(name: str, given: Collection[str], opts: EvaluationOptions) -> Optional[str]:
    have = set(given)
    have |= {c for c in ("item_category_col", "item_features_col") if "items" in have and getattr(opts, c) is not None}
    return next((need for need in needs(name, opts) if need not in have), None)


def given_tables(tables: Tables) -> Tuple[str, ...]:
    """The names (of :data:`TABLES`) of the tables given."""
    present = (tables.interactions, tables.items, tables.baseline)
    return tuple(name for name, table in zip(TABLES, present) if table is not None)


def computed(opts: EvaluationOptions, given: Collection[str]) -> Tuple[str, ...]:
    """The metrics a run computes with the tables named ``given`` (of :data:`TABLES`): every one
    those inputs allow (``beyond_accuracy = True``), or those named.

    Raises
    ------
    ConfigError
        A named metric whose input is missing (one line naming the input).
    """
    if opts.beyond_accuracy is True:
        return tuple(n for n in registry.names() if _missing(n, given, opts) is None)
    if not opts.beyond_accuracy:
        return ()
    for name in opts.beyond_accuracy:
        missing = _missing(name, given, opts)
        if missing is not None:
            what = f"an items table with {missing} set" if missing.startswith("item_") else f"the {missing} table"
            raise ConfigError(
                f"{name} needs {what}"
                + (f" (similarity = {opts.similarity!r})" if name in ("diversity", "serendipity") else ""),
                condition="INVALID_CONFIG.MISSING_INPUT",
                parameters={"metric": name, "input": missing},
            )
    return tuple(opts.beyond_accuracy)


def asked(opts: EvaluationOptions, tables: Tables) -> Tuple[str, ...]:
    """The metrics to compute with ``tables`` (:func:`computed`)."""
    return computed(opts, given_tables(tables))


# ----------------------------------------------------------------------------- the tables


def named(df: Optional[DataFrame], table: str, opts: EvaluationOptions) -> Optional[DataFrame]:
    """``table`` (of :data:`~ndcg_spark.options.TABLE_COLUMNS`) with its user and item columns
    under the names of ``user_col`` / ``item_col``: where its own options (``interactions_user_col``,
    ...) name other columns, those are renamed (a column already holding the target name gives
    way to them). An 'array' baseline's item is a field of its array, renamed there.

    Raises
    ------
    InputDataError
        A column its option names that the table does not have (one line naming the option).
    """
    if df is None:
        return None
    renames = {}
    for target, option in TABLE_COLUMNS[table].items():
        source = getattr(opts, option)
        if source is None or source == getattr(opts, target):
            continue
        renames[source] = (getattr(opts, target), option)
    array = table == "baseline_recommendations" and opts.recommendations_layout == "array"
    fields = set(df.columns)
    if array and opts.array_col in fields and isinstance(df.schema[opts.array_col].dataType, T.ArrayType):
        element = df.schema[opts.array_col].dataType.elementType
        if isinstance(element, T.StructType):
            fields |= set(element.fieldNames())
    for source, (_, option) in renames.items():
        if source not in fields:
            raise InputDataError(
                f"{table.replace('_', ' ')} table has no column {source!r}, which {option} names "
                f"(it has: {', '.join(df.columns) or 'no columns'})",
                condition=MISSING_COLUMN,
                parameters={"table": table, "column": source},
            )
    if not renames:
        return df
    targets = {target for target, _ in renames.values()}
    columns = []
    for c in df.columns:
        if c in renames:
            columns.append(f"{ident(c)} AS {ident(renames[c][0])}")
        elif c == opts.array_col and array and opts.item_col in targets:
            element = df.schema[c].dataType.elementType
            parts = ", ".join(
                f"{string_literal(renames[f][0] if f in renames else f)}, x.{ident(f)}"
                for f in element.fieldNames()
                if f in renames or f not in targets
            )
            columns.append(f"transform({ident(c)}, x -> named_struct({parts})) AS {ident(c)}")
        elif c not in targets:
            columns.append(ident(c))
    return df.selectExpr(*columns)


def named_tables(
    tables: Tables, user_attributes: Optional[DataFrame], opts: EvaluationOptions
) -> Tuple[Tables, Optional[DataFrame]]:
    """``tables`` and the user attributes, each :func:`named`."""
    return (
        Tables(
            named(tables.interactions, "interactions", opts),
            named(tables.items, "items", opts),
            named(tables.baseline, "baseline_recommendations", opts),
        ),
        named(user_attributes, "user_attributes", opts),
    )


def counted_tables(tables: Tables, names: Sequence[str], opts: EvaluationOptions) -> Tuple[Tables, Dict[str, RowCount]]:
    """The tables the metrics ``names`` read, each with its rows counted as they pass
    (:func:`ndcg_spark._spark.counts.counted`), by name of :data:`TABLES`; a table no metric reads is
    left out of both. The baseline in the rows layout (:func:`ndcg_spark._stages.inputs.as_rows`): an
    'array' baseline counts one row per recommended item, as the recommendations do."""
    read: Dict[str, RowCount] = {}
    interactions = items = baseline = None
    # Observed only where a per-user metric reads the table: the per-user figures' pass reports
    # the observation. Read by the global figures alone, the observation never reports (Spark
    # leaves it out of what that pass collects) and its count would wait for ever: counted apart.
    on_the_pass = {need for m in registry.per_user() if m.name in names for need in m.reads(opts)}

    def count(df: DataFrame, table: str) -> Tuple[DataFrame, RowCount]:
        return counted(df) if table in on_the_pass else counted_apart(df)

    if names and tables.interactions is not None:
        interactions, read["interactions"] = count(tables.interactions, "interactions")
    if names and tables.items is not None:
        items, read["items"] = count(tables.items, "items")
    if tables.baseline is not None and any_reads(names, "baseline_recommendations", opts):
        baseline, read["baseline_recommendations"] = counted(as_rows(tables.baseline, opts.unsegmented))
    return Tables(interactions, items, baseline), read


def used_rows(
    per_item: Optional[DataFrame], items: Optional[DataFrame], baseline_lists: Optional[DataFrame], spark
) -> Optional[DataFrame]:
    """One row of what the evaluation used of each beyond-accuracy table it read, for the row
    accounting: ``interactions_used`` (the rows behind the items' popularity), ``items_used``
    (the catalog's items) and ``baseline_listed`` (the baseline's recommendations within the
    largest k; the rest of its ranked rows lie beyond it). Each from the rows the metrics read,
    so a row lost on the way shows. None when no table was read."""
    parts = [spark.range(1).selectExpr("0L AS __nb_unit")]
    if per_item is not None:
        parts.append(per_item.agg(F.coalesce(F.sum(POP), F.lit(0)).cast("long").alias("interactions_used")))
    if items is not None:
        parts.append(items.agg(F.count(F.lit(1)).alias("items_used")))
    if baseline_lists is not None:
        parts.append(
            baseline_lists.agg(F.coalesce(F.sum(F.size(ITEMS)), F.lit(0)).cast("long").alias("baseline_listed"))
        )
    if len(parts) == 1:
        return None
    out = parts[0]
    for part in parts[1:]:
        out = out.crossJoin(part)
    return out.drop("__nb_unit")


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


def _widened(own: T.DataType, table: str, item_type: T.DataType, opts: EvaluationOptions) -> T.DataType:
    """The lists' item type widened to hold ``table``'s (``own``); any other mismatch is refused."""
    if own == item_type:
        return item_type
    if not (isinstance(own, INTEGRAL_TYPES) and isinstance(item_type, INTEGRAL_TYPES)):
        raise InputDataError(
            f"item column {opts.item_col!r} is {own.simpleString()} in the {table} table but "
            f"{item_type.simpleString()} in the recommendations; store both with one type",
            condition=TYPES_DIFFER,
            parameters={"column": opts.item_col},
        )
    return common_item_type(own, item_type, opts)


def item_type_of(tables: Sequence[Tuple[str, DataFrame]], item_type: T.DataType, opts: EvaluationOptions) -> T.DataType:
    """The type every table's items are compared in: the recommendations' and relevance's
    (:func:`ndcg_spark._stages.inputs.common_item_type`), widened to the widest integer of ``tables``.

    Widening, never narrowing: an interactions item beyond the range of the recommendations'
    type (a bigint against int lists) stays itself instead of wrapping onto a listed item.
    A table without the item column is left to its own check, which names the column.
    """
    for table, df in tables:
        if opts.item_col in df.columns:
            item_type = _widened(df.schema[opts.item_col].dataType, table, item_type, opts)
    return item_type


def _null_rule(df: DataFrame, table: str, columns: Sequence[str], key: str) -> DataFrame:
    whens = " ".join(
        f"WHEN {ident(c)} IS NULL THEN {string_literal(f'{table} column {c!r} is null, e.g. ')}" for c in columns
    )
    problem = f"(CASE {whens} END)"
    return df.filter(input_check(f"{problem} IS NOT NULL", f"concat({problem}, {key})"))


def _check_features_type(df: DataFrame, opts: EvaluationOptions) -> None:
    kind = df.schema[opts.item_features_col].dataType
    numeric = (T.FloatType, T.DoubleType, T.IntegerType, T.LongType, T.ShortType, T.ByteType, T.DecimalType)
    if not (isinstance(kind, T.ArrayType) and isinstance(kind.elementType, numeric)):
        raise InputDataError(
            f"items column {opts.item_features_col!r} has type {kind.simpleString()}; accepted: an array of numbers",
            condition=COLUMN_TYPE,
            parameters={"table": "items", "column": opts.item_features_col, "type": kind.simpleString()},
        )


def interactions_rows(df: DataFrame, item_type: T.DataType, opts: EvaluationOptions) -> DataFrame:
    """The interactions as (user, ``ITEM``) rows, every row kept (repeats count as popularity);
    a null user or item stops the run."""
    _check_columns(df, "interactions", [(opts.user_col, "user_col"), (opts.item_col, "item_col")])
    key = f"concat({string_literal(opts.user_col + '=')}, coalesce(CAST({ident(opts.user_col)} AS STRING), 'null'))"
    checked = _null_rule(df, "interactions", [opts.user_col, opts.item_col], key)
    return checked.selectExpr(ident(opts.user_col), item_as(df.schema[opts.item_col].dataType, item_type, opts))


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
        _check_features_type(df, opts)
    item = ident(opts.item_col)
    key = f"concat({string_literal(opts.item_col + '=')}, coalesce(CAST({item} AS STRING), 'null'))"
    rows = _null_rule(df, "items", [opts.item_col], key)
    columns = [item_as(df.schema[opts.item_col].dataType, item_type, opts)]
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


def unknown_items(per_item: Optional[DataFrame], items: Optional[DataFrame], listed: DataFrame) -> DataFrame:
    """One row: ``interactions_unknown_items`` (interaction rows whose item the items table lacks)
    and ``recommended_unknown_items`` (distinct listed items it lacks); 0 without an items table.

    ``per_item``: each interacted item's rows ``POP`` (:func:`ndcg_spark._beyond.novelty.item_table`).
    """
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
    if per_item is None:
        inter_unknown = spark.range(1).selectExpr("0L AS interactions_unknown_items")
    else:
        inter_unknown = per_item.join(known, on=ITEM, how="left_anti").agg(
            F.coalesce(F.sum(POP), F.lit(0)).cast("long").alias("interactions_unknown_items")
        )
    return inter_unknown.crossJoin(listed_unknown)


# ----------------------------------------------------------------------------- validate's rules


def row_rules(table: str, opts: EvaluationOptions) -> List[RowRule]:
    """The row rules of a beyond-accuracy table, as ``validate`` counts them (``evaluate`` stops at
    the first row at fault by the same rules: :func:`interactions_rows`, :func:`items_rows`).

    ``interactions``: a null user or item. ``items``: a null item, an item listed twice, a
    feature vector that is null, holds a null or a NaN, or differs in length from the table's
    longest. ``baseline_recommendations``: the recommendations' own rules.
    """
    user, item = ident(opts.user_col), ident(opts.item_col)
    if table == "baseline_recommendations":
        return [replace(r, table=table) for r in recommendation_rules(opts.unsegmented)]
    rules = [RowRule("null_item", table, opts.item_col, "is null", f"{item} IS NULL")]
    if table == "interactions":
        return [RowRule("null_user", table, opts.user_col, "is null", f"{user} IS NULL"), *rules]
    rules.append(
        RowRule(
            "duplicate_item",
            table,
            opts.item_col,
            "lists an item more than once",
            f"coalesce(count(1) OVER (PARTITION BY {item}) > 1, false) AND {item} IS NOT NULL",
            by_group=True,
        )
    )
    if opts.item_features_col:
        f = ident(opts.item_features_col)
        rules += [
            RowRule("null_features", table, opts.item_features_col, "is null", f"{f} IS NULL"),
            RowRule(
                "bad_features",
                table,
                opts.item_features_col,
                "holds a null or NaN",
                f"coalesce(exists({f}, x -> x IS NULL OR isnan(CAST(x AS DOUBLE))), false)",
            ),
            RowRule(
                "features_length",
                table,
                opts.item_features_col,
                "differs in length from the longest vector of the table",
                f"coalesce(size({f}) <> max(size({f})) OVER (), false) AND {f} IS NOT NULL",
                by_group=True,
            ),
        ]
    return rules


def row_key(table: str, opts: EvaluationOptions) -> str:
    """SQL text naming a row of a beyond-accuracy table: its item (items), else its user and item."""
    if table != "items":
        return key_text(opts)
    return f"concat({string_literal(opts.item_col + '=')}, coalesce(CAST({ident(opts.item_col)} AS STRING), 'null'))"


def check_schema(df: DataFrame, table: str, opts: EvaluationOptions) -> None:
    """The columns a beyond-accuracy table must have under ``opts`` (and the features' type), as
    :func:`interactions_rows` and :func:`items_rows` check them."""
    needed = [(opts.item_col, "item_col")]
    if table in ("interactions", "baseline_recommendations"):
        needed.insert(0, (opts.user_col, "user_col"))
    if table == "items":
        needed += [(c, n) for c, n in ((opts.item_category_col, "item_category_col"),
                                       (opts.item_features_col, "item_features_col")) if c]  # fmt: skip
    _check_columns(df, table, needed)
    if table == "items" and opts.item_features_col:
        _check_features_type(df, opts)


def unknown_rows(df: DataFrame, items: DataFrame, opts: EvaluationOptions, distinct: bool) -> int:
    """How many rows of ``df`` (``distinct``: how many distinct items) name an item the items
    table lacks (a null item is a row rule's, not counted here)."""
    known = items.select(F.col(ident(opts.item_col)).alias(ITEM)).filter(F.col(ITEM).isNotNull())
    named = df.select(F.col(ident(opts.item_col)).alias(ITEM)).filter(F.col(ITEM).isNotNull())
    if distinct:
        named = named.distinct()
    return named.join(known, on=ITEM, how="left_anti").count()
