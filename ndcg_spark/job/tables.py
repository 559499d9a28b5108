"""Results as a family of catalog tables (``output_table = "db.ndcg"``), whole nights only.

A family ``db.ndcg`` is a set of views that readers query and the storage tables behind them:

* ``db.ndcg_per_user``, ``db.ndcg_summary`` (``db.ndcg_rejected`` under quarantine;
  ``db.ndcg_comparison`` for ``compare``): the outputs' columns, then the run's partition key
  (``run_date``) and ``run_id``;
* ``db.ndcg_runs``: one row per published night: the run's id, status, verdict, gates, row
  accounting, settings, duration, report and manifest.

Each view is ``<view>_data``, a table partitioned by (key, ``run_id``), seen through the current
run of each night: the row of ``db.ndcg_runs_data`` published last for that night. A run:

1. writes its rows as new partitions (key = tonight, ``run_id`` = its own) of each storage
   table: no reader sees them, as no runs row names them yet;
2. appends its row to ``db.ndcg_runs_data`` (one partition, added to the catalog in one call):
   from then on every view shows this run's rows for the night, and only them;
3. drops the partitions of the night's earlier runs, now superseded.

A run killed before step 2 left partitions no view shows; one killed after it, superseded
partitions no view shows. The next run of the night, holding the night's lock, drops both
before it writes (:meth:`TableSink.recover`). Replacing a partition of a V1 table (Hive
metastore, the session catalog) is not atomic; this never needs it. Two runs of one night at
once: the lock refuses the second (exit 5); where no lock can be held (Spark Connect: the lock
is a file on the warehouse's file system, which the client cannot reach), both may publish and
the night is the rows of the one published last, never a mix.
"""

from __future__ import annotations

import contextlib
import datetime
import json
from typing import Any, Dict, List, Optional, Tuple

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark.errors import ConfigError
from ndcg_spark.job import lease, publish, storage
from ndcg_spark.job.result import RunResult
from ndcg_spark.job.verdict import gates_summary

#: The pipeline's frames and the member of the family each goes to.
MEMBERS = {
    "per_user": "per_user",
    "summary": "summary",
    "rejected/recommendations": "rejected",
    "rejected/relevance": "rejected",
    "comparison": "comparison",
}
RUNS = "runs"
#: A storage table's name: the view's and this suffix.
DATA = "_data"
#: The runs row: its columns before the partition key and ``run_id``.
RUN_COLUMNS = (
    "command string, status string, verdict string, gates string, rows string, settings string, "
    "input_rows string, spark_version string, duration_seconds double, report string, manifest string"
)
#: Formats that replace rows atomically (``DELETE``); the others drop partitions.
V2_FORMATS = ("delta", "iceberg")
#: Hours after which a partition no runs row names is dropped by a run that holds no lock.
ORPHAN_HOURS = 24


def _literal(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Family:
    """The names of one family of tables: ``db.ndcg`` -> ``db.ndcg_summary`` (a view), ``db.ndcg_summary_data``."""

    def __init__(self, spark, name: str):
        self.spark, self.name = spark, name

    def view(self, member: str) -> str:
        return f"{self.name}_{member}"

    def data(self, member: str) -> str:
        return f"{self.name}_{member}{DATA}"

    def exists(self, table: str) -> bool:
        return bool(self.spark.catalog.tableExists(table))

    def partition_columns(self, table: str) -> List[str]:
        return [c.name for c in self.spark.catalog.listColumns(table) if c.isPartition]

    def run_ids(self, table: str, key: str, value: str) -> List[str]:
        """The run ids with a partition of the night ``key=value`` in a storage table."""
        if not self.exists(table):
            return []
        rows = self.spark.sql(f"SHOW PARTITIONS {table} PARTITION ({key} = {_literal(value)})").collect()
        ids = []
        for row in rows:
            parts = dict(p.split("=", 1) for p in row[0].split("/"))
            ids.append(parts.get("run_id"))
        return sorted(i for i in ids if i)

    def current_run(self, key: str, value: str) -> Optional[str]:
        """The run whose rows the views show for the night, or None."""
        if not self.exists(self.view(RUNS)):
            return None
        rows = self.spark.table(self.view(RUNS)).where(F.col(key) == value).select("run_id").collect()
        return rows[0]["run_id"] if rows else None

    def drop(self, table: str, key: str, value: str, run_ids: List[str], v2: bool) -> None:
        if not run_ids:
            return
        if v2:
            listed = ", ".join(_literal(r) for r in run_ids)
            self.spark.sql(f"DELETE FROM {table} WHERE {key} = {_literal(value)} AND run_id IN ({listed})")
            return
        parts = ", ".join(f"PARTITION ({key} = {_literal(value)}, run_id = {_literal(r)})" for r in run_ids)
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
        self, key: str = "run_date", last: Optional[int] = None, before: Optional[str] = None
    ) -> List[Tuple[str, RunResult]]:
        view = self.family.view(RUNS)
        if not self.family.exists(view):
            return []
        runs = self.family.spark.table(view)
        if before is not None:
            runs = runs.where(F.col(key) < before)
        rows = sorted((r[0], r[1]) for r in runs.select(key, "manifest").collect())
        if last is not None:
            rows = rows[-last:] if last > 0 else []
        return [(value, RunResult.from_json(json.loads(manifest))) for value, manifest in rows]

    def previous(self, before: str, key: str = "run_date", *, passed_only: bool = False):
        for value, result in reversed(self.history(key, before=before)):
            if not passed_only or not result.failed:
                return value, []
        return None, []

    def per_user(self, spark, value: str, key: str = "run_date") -> DataFrame:
        return spark.table(self.family.view("per_user")).where(F.col(key) == value).drop(key, "run_id")

    def missing(self, value: str, key: str, result: RunResult) -> List[str]:
        return []  # a view shows a night's rows with its runs row, or none


class _NoLock:
    """Where no lock can be held (Spark Connect): nothing broken, nothing to lose."""

    broke = None

    def ensure(self) -> None:
        pass


class TableSink:
    """A run's results as a family of catalog tables (see the module)."""

    def __init__(self, spark, command: str, output):
        self.spark, self.command, self.output = spark, command, output
        self.family = Family(spark, output.table)
        self.root = self.shown = output.table
        self.key, self.value = output.partition.key, output.partition.value
        self.v2 = output.table_format in V2_FORMATS
        self.place: Optional[publish.Place] = None
        self.held = False

    def members(self) -> List[str]:
        """The family's members this command writes, the runs last."""
        return [*sorted({MEMBERS[n] for n in publish.COMMANDS[self.command][0]}), RUNS]

    def check(self, spark, config) -> None:
        names = self.output.table.split(".")
        if len(names) == 2 and not spark.catalog.databaseExists(names[0]):
            raise ConfigError(f"output_table {self.root}: database {names[0]!r} does not exist; create it first")
        other = "summary" if self.command == "compare" else "comparison"
        if self.family.exists(self.family.data(other)):
            theirs = "evaluate" if other == "summary" else "compare"
            raise ConfigError(
                f"output_table {self.root} holds the results of 'ndcg-spark {theirs}', not of "
                f"'ndcg-spark {self.command}'; choose another output_table"
            )
        runs = self.family.data(RUNS)
        if self.family.exists(runs):
            columns = self.family.partition_columns(runs)
            if columns != [self.key, "run_id"]:
                raise ConfigError(
                    f"output_table {self.root} is partitioned by {columns[0]}, not by {self.key}; choose another"
                )

    def _lock_place(self) -> Optional[publish.Place]:
        """The night's lock, a file beside the database's tables: classic mode only."""
        if storage.is_connect(self.spark):
            return None
        names = self.output.table.split(".")
        try:
            database = names[-2] if len(names) > 1 else self.spark.catalog.currentDatabase()
            location = self.spark.catalog.getDatabase(database).locationUri
        except Exception:  # noqa: BLE001 - a catalog without databases' locations: the warehouse
            location = self.spark.conf.get("spark.sql.warehouse.dir")
        root = storage.qualify(self.spark, f"{location.rstrip('/')}/_ndcg_spark/{names[-1]}")
        return publish.Place(storage.files_for(self.spark, root), self.command, self.output.partition)

    def locked(self, run_id: str, output):
        self.place = self._lock_place()
        if self.place is None:
            return contextlib.nullcontext(_NoLock())
        self.held = True
        return lease.locked(self.place, run_id, output.break_lock, output.lock_timeout)

    def recover(self) -> None:
        """Drop what earlier runs of the night left that no view shows: all of it when this run
        holds the night's lock; without one, the superseded runs and rows a day old."""
        self.drop_others(self.family.current_run(self.key, self.value), steps=False)

    def drop_others(self, keep: Optional[str], steps: bool = True) -> None:
        """Drop the night's partitions of every run but ``keep`` (the current one), runs rows last
        (``steps``: a publish's named steps, ``dropped:<member>``, for the fault tests)."""
        family = self.family
        named = set(family.run_ids(family.data(RUNS), self.key, self.value))
        for member in self.members():
            table = family.data(member)
            ids = [r for r in family.run_ids(table, self.key, self.value) if r != keep and self._droppable(r, named)]
            family.drop(table, self.key, self.value, ids, self.v2)
            if steps:
                publish.at_step(f"dropped:{member}")

    def _droppable(self, run_id: str, named: set) -> bool:
        if self.held or run_id in named:
            return True
        try:
            started = datetime.datetime.strptime(run_id.split("-", 1)[0], "%Y%m%dT%H%M%SZ")
        except ValueError:
            return False
        age = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - started
        return age > datetime.timedelta(hours=ORPHAN_HOURS)

    def stage(self, spark, run_id: str) -> TableStage:
        return TableStage(self, run_id)

    def tidy(self) -> None:
        if self.place is not None:
            publish.tidy(self.place, False)
            files = self.place.files
            files.remove_if_empty(files.root)
            files.remove_if_empty(files.root.rsplit("/", 1)[0])

    def runs(self) -> TableRuns:
        return TableRuns(self.spark, self.root)

    def texts(self, result: RunResult) -> Dict[str, str]:
        run_id = result.published.id if result.published else None
        rows = self.spark.table(self.family.data(RUNS)).where(F.col("run_id") == run_id)
        found = rows.select("manifest", "report").collect()
        if not found:
            return {}
        name = publish.COMMANDS[self.command][1]
        texts = {name: found[0]["manifest"]}
        if found[0]["report"] is not None:
            texts["report.html"] = found[0]["report"]
        return texts


class TableStage:
    """One run's rows in the family's storage tables, invisible until its runs row is written."""

    def __init__(self, sink: TableSink, run_id: str):
        self.sink, self.run_id = sink, run_id
        self.written: Dict[str, str] = {}
        self.files: Dict[str, str] = {}
        self.published = False

    def _shaped(self, name: str, df: DataFrame) -> DataFrame:
        if MEMBERS[name] == "rejected":
            # Both tables' set-aside rows in one table: which table, why, and the row as read (JSON).
            columns = [F.col(c) for c in df.columns if c != "reason"]
            df = df.select(
                F.lit(name.split("/", 1)[1]).alias("source"),
                F.col("reason"),
                F.to_json(F.struct(*columns)).alias("row"),
            )
        return df

    def write(self, name: str, df: DataFrame) -> None:
        sink, member = self.sink, MEMBERS[name]
        df = self._shaped(name, df)
        for column in (sink.key, "run_id"):
            if column in df.columns:
                raise ConfigError(f"column {column!r} of the output is also a column the output tables add; rename it")
        table = sink.family.data(member)
        _append(sink, table, df.withColumns({sink.key: F.lit(sink.value), "run_id": F.lit(self.run_id)}))
        self.written[name] = table

    def read(self, name: str) -> DataFrame:
        sink = self.sink
        rows = sink.spark.table(self.written[name]).where(
            (F.col(sink.key) == sink.value) & (F.col("run_id") == self.run_id)
        )
        if MEMBERS[name] == "rejected":
            rows = rows.where(F.col("source") == name.split("/", 1)[1])
        return rows.drop(sink.key, "run_id")

    def file(self, name: str, text: str) -> None:
        self.files[name] = text

    def describe(self) -> Dict[str, Any]:
        part = f"{self.sink.key}={self.sink.value}/run_id={self.run_id}"
        tables = {n: {"table": t, "view": self.sink.family.view(MEMBERS[n]), "partition": part}
                  for n, t in self.written.items()}  # fmt: skip
        return {"tables": tables, "files": sorted(self.files)}

    def publish(self, marker: Dict[str, Any], guard=None) -> None:
        """Views first (made once), then the runs row: the flip. Then the superseded rows go."""
        sink, family = self.sink, self.sink.family
        publish.at_step("staged")
        if guard is not None:
            guard()
        row = self._runs_row(marker)
        _append(sink, family.data(RUNS), row.limit(0))  # the runs table, empty, for the views to name
        _create_view(family, RUNS, _runs_view(family, sink.key))
        for member in sorted({MEMBERS[n] for n in self.written}):
            _create_view(family, member, _view(family, member, sink.key))
        _append(sink, family.data(RUNS), row)
        self.published = True
        publish.at_step("published")
        sink.drop_others(self.run_id)

    def _runs_row(self, marker: Dict[str, Any]) -> DataFrame:
        result = RunResult.from_json(marker)
        dumps = storage.strict_json
        values = (
            result.command,
            "quality_gate_failed" if result.failed else "ok",
            gates_summary(result),
            dumps([c.to_json() for c in result.checks]),
            dumps(result.rows),
            dumps(result.settings),
            dumps(result.input_rows),
            result.spark_version,
            result.duration_seconds,
            self.files.get("report.html"),
            dumps(marker, indent=2),
        )
        row = self.sink.spark.createDataFrame([values], RUN_COLUMNS)
        return row.withColumns(
            {"published_at": F.current_timestamp(), self.sink.key: F.lit(self.sink.value), "run_id": F.lit(self.run_id)}
        ).coalesce(1)

    def discard(self) -> None:
        """A run that did not publish drops its own rows (what a kill leaves, the next run drops)."""
        if self.published:
            return
        family = self.sink.family
        for table in sorted(set(self.written.values())):
            with contextlib.suppress(Exception):  # cancelled by a signal, say: the next run drops them
                family.drop(table, self.sink.key, self.sink.value, [self.run_id], self.sink.v2)


def _append(sink: TableSink, table: str, df: DataFrame) -> None:
    """Append ``df`` as new partitions (key, ``run_id``) of ``table``, created on first use."""
    if sink.family.exists(table):
        have = {c.name: c.dataType for c in sink.spark.catalog.listColumns(table)}
        mine = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        if set(have) != set(mine) or any(have[c] != t for c, t in mine.items()):
            raise ConfigError(
                f"table {table} has the columns {', '.join(have)}; this run's are {', '.join(mine)}: "
                "keep one configuration (segments, metrics) per output_table, or choose another"
            )
    writer = df.write.mode("append").partitionBy(sink.key, "run_id")
    if sink.output.table_format is not None:
        writer = writer.format(sink.output.table_format)
    writer.saveAsTable(table)


def _create_view(family: Family, member: str, query: str) -> None:
    """Create the view ``db.ndcg_<member>`` once (a run of another night may make it meanwhile)."""
    view = family.view(member)
    if family.exists(view):
        return
    try:
        family.spark.sql(f"CREATE VIEW {view} AS {query}")
    except Exception:
        if not family.exists(view):
            raise


def _view(family: Family, member: str, key: str) -> str:
    """The rows of each night's current run: those its runs row names."""
    return (
        f"SELECT d.* FROM {family.data(member)} d "
        f"LEFT SEMI JOIN {family.view(RUNS)} r ON d.{key} = r.{key} AND d.run_id = r.run_id"
    )


def _runs_view(family: Family, key: str) -> str:
    """Per night, the runs row published last."""
    columns = ", ".join([c.split()[0] for c in RUN_COLUMNS.split(", ")] + ["published_at", key, "run_id"])
    return (
        f"SELECT {columns} FROM (SELECT *, row_number() OVER (PARTITION BY {key} ORDER BY published_at DESC, "
        f"run_id DESC) AS _latest FROM {family.data(RUNS)}) WHERE _latest = 1"
    )
