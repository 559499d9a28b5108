"""The names, views and earlier runs of a family of catalog tables (``db.ndcg``): what
:mod:`ndcg_spark.job.outputs.catalog.tables` writes through, and what the drop gate, the trend and ``history
--output-table`` read (:class:`TableRuns`).
"""

from __future__ import annotations

import json
from typing import Any, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.outputs.catalog.capabilities import Kinds, TableName
from ndcg_spark.job.result import RunResult

RUNS = "runs"
#: A storage table's name: the view's and this suffix.
DATA = "_data"
#: The runs row: its columns before the partition key and ``run_id``.
RUN_COLUMNS = (
    "command string, status string, verdict string, gates string, rows string, settings string, "
    "input_rows string, spark_version string, duration_seconds double, report string, manifest string, "
    "stored_bytes bigint"
)
#: Added after the first release: a family made before it has runs rows without it.
STORED_BYTES = "stored_bytes"


def sql_literal(value: str) -> str:
    """A SQL string literal of ``value``."""
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Family:
    """The names of one family of tables: ``db.ndcg`` -> ``db.ndcg_summary`` (a view), ``db.ndcg_summary_data``.

    Every name is qualified with the family's own catalog and schema (``lake.ev.ndcg_summary``;
    ``spark_catalog.ev.ndcg_summary`` for ``ev.ndcg`` written in the session catalog): a name
    left to Spark resolves in whatever catalog is current, and the views' texts in the one
    current when a reader queries them."""

    def __init__(self, spark, name: str):
        self.spark = spark
        self.table_name = TableName.parse(name).resolved(spark)
        self.name = self.table_name.qualified
        self.kinds = Kinds(spark, self.table_name)

    def view(self, member: str) -> str:
        return f"{self.name}_{member}"

    def data(self, member: str) -> str:
        return f"{self.name}_{member}{DATA}"

    def exists(self, table: str) -> bool:
        """Whether the storage table exists."""
        return bool(self.spark.catalog.tableExists(table))

    def view_exists(self, view: str) -> bool:
        """Whether the view exists. ``spark.catalog.tableExists`` sees the session catalog's views,
        not a catalog plugin's (Iceberg's JDBC, Hive or REST catalog's): ``SHOW VIEWS`` lists those."""
        if self.exists(view):
            return True
        if self.table_name.in_session_catalog:
            return False
        namespace, table = view.rsplit(".", 1)
        try:
            rows = self.spark.sql(f"SHOW VIEWS IN {namespace} LIKE {sql_literal(table)}").collect()
        except Exception:  # noqa: BLE001 - a catalog that lists no views holds none (creating one tells)
            return False
        return any(r["viewName"] == table and not r["isTemporary"] for r in rows)

    def partition_columns(self, table: str) -> List[str]:
        return [c.name for c in self.spark.catalog.listColumns(table) if c.isPartition]

    def run_ids(self, table: str, key: str, value: str) -> List[str]:
        """The run ids with rows (a partition, in a V1 table) of the night ``key=value`` in a storage table."""
        if not self.exists(table):
            return []
        if self.kinds.v2(table):  # a V2 table has no partitions to show: its rows tell
            rows = self.spark.table(table).where(F.col(key) == value).select("run_id").distinct().collect()
            return sorted(r[0] for r in rows if r[0])
        rows = self.spark.sql(f"SHOW PARTITIONS {table} PARTITION ({key} = {sql_literal(value)})").collect()
        ids = []
        for row in rows:
            parts = dict(p.split("=", 1) for p in row[0].split("/"))
            ids.append(parts.get("run_id"))
        return sorted(i for i in ids if i)

    def current_run(self, key: str, value: str) -> Optional[str]:
        """The run whose rows the views show for the night, or None: asked of the runs table as
        the runs view asks it (:func:`runs_view`), so that what a run deletes never hangs on
        finding a view."""
        if not self.exists(self.data(RUNS)):
            return None
        rows = self.spark.sql(runs_view(self, key)).where(F.col(key) == value).select("run_id").collect()
        return rows[0]["run_id"] if rows else None

    def drop(self, table: str, key: str, value: str, run_ids: List[str]) -> None:
        """Remove the night's rows of ``run_ids``: one ``DELETE`` (a V2 table: one commit), or the
        partitions dropped (V1). Nothing at all when there is nothing to remove: no empty commit."""
        if not run_ids:
            return
        if self.kinds.v2(table):
            listed = ", ".join(sql_literal(r) for r in run_ids)
            self.spark.sql(f"DELETE FROM {table} WHERE {key} = {sql_literal(value)} AND run_id IN ({listed})")
            return
        parts = ", ".join(f"PARTITION ({key} = {sql_literal(value)}, run_id = {sql_literal(r)})" for r in run_ids)
        self.spark.sql(f"ALTER TABLE {table} DROP IF EXISTS {parts}")


class TableRuns:
    """The published runs of a family (its runs view): what the drop gate, the trend and
    ``history --output-table`` read."""

    def __init__(self, spark, name: str):
        self.family, self.root, self.shown = Family(spark, name), name, name

    def key(self) -> str:
        runs = self.family.data(RUNS)
        if not self.family.exists(runs):
            raise ConfigError(f"output_table {self.root} holds no ndcg-spark runs")
        if self.family.exists(self.family.data("comparison")):
            raise ConfigError(
                f"output_table {self.root} holds the results of 'ndcg-spark compare', which has no history"
            )
        return [c for c in self.family.partition_columns(runs) if c != "run_id"][0]

    def history(
        self, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
    ) -> List[Tuple[str, RunResult]]:
        view = self.family.view(RUNS)
        if not self.family.view_exists(view):
            return []
        runs = self.family.spark.table(view)
        if before is not None:
            runs = runs.where(F.col(key) < before)
        rows = sorted((r[0], r[1], r[2]) for r in runs.select(key, "manifest", "command").collect())
        if last is not None:
            rows = rows[-last:] if last > 0 else []
        return [(value, RunResult.from_json(json.loads(manifest), command)) for value, manifest, command in rows]

    def previous(self, before: str, key: str = RUN_DATE, *, passed_only: bool = False):
        for value, result in reversed(self.history(key, before=before)):
            if not passed_only or not result.failed:
                return value, []
        return None, []

    def per_user(self, spark, value: str, key: str = RUN_DATE) -> DataFrame:
        return spark.table(self.family.view("per_user")).where(F.col(key) == value).drop(key, "run_id")

    def missing(self, value: str, key: str, result: RunResult) -> List[str]:
        return []  # a view shows a night's rows with its runs row, or none

    def unfinished(self, key: str = RUN_DATE) -> List[Any]:
        return []  # what an unfinished run wrote, no view shows (the night's next run drops it)


def create_view(family: Family, member: str, query: str) -> None:
    """Create the view ``db.ndcg_<member>`` once (a run of another night may make it meanwhile)."""
    view = family.view(member)
    if family.view_exists(view):
        return
    try:
        family.spark.sql(f"CREATE VIEW {view} AS {query}")
    except Exception:
        if not family.view_exists(view):
            raise


def night_view(family: Family, member: str, key: str) -> str:
    """The rows of each night's current run: those its runs row names."""
    return (
        f"SELECT d.* FROM {family.data(member)} d "
        f"LEFT SEMI JOIN {family.view(RUNS)} r ON d.{key} = r.{key} AND d.run_id = r.run_id"
    )


def runs_view(family: Family, key: str) -> str:
    """Per night, the runs row published last."""
    columns = ", ".join([c.split()[0] for c in RUN_COLUMNS.split(", ")] + ["published_at", key, "run_id"])
    return (
        f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY published_at DESC, "
        f"run_id DESC) AS _latest FROM {family.data(RUNS)}) WHERE _latest = 1"
    )
