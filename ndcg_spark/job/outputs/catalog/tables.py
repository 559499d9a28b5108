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
3. removes the rows of the night's earlier runs, now superseded: drops their partitions (a V1
   table) or deletes them (Iceberg, Delta: one ``DELETE`` per table; :mod:`.capabilities` says which).

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
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark.errors import ConfigError
from ndcg_spark.job.config.targets import Partition
from ndcg_spark.job.outputs import contract, lease
from ndcg_spark.job.outputs.catalog.capabilities import (
    TableName,
    catalog_step,
    check_catalog,
    check_format,
    check_views,
    lock_location,
)
from ndcg_spark.job.outputs.catalog.family import (
    RUN_COLUMNS,
    RUNS,
    STORED_BYTES,
    Family,
    TableRuns,
    create_view,
    night_view,
    runs_view,
    sql_literal,
)
from ndcg_spark.job.outputs.contract import COMMANDS, STATE
from ndcg_spark.job.outputs.files import Files, files_for, is_connect, qualify
from ndcg_spark.job.result import RunResult, gates_summary, strict_json

#: The pipeline's frames and the member of the family each goes to.
MEMBERS = {
    "per_user": "per_user",
    "summary": "summary",
    "rejected/recommendations": "rejected",
    "rejected/relevance": "rejected",
    "comparison": "comparison",
}
#: Hours after which a partition no runs row names is dropped by a run that holds no lock.
ORPHAN_HOURS = 24


@dataclass(frozen=True)
class LockPlace:
    """Where a night's lock lives: a folder of the job's beside the database's tables
    (``<database location>/_ndcg_spark/<name>/_ndcg_spark/locks/<key=value>.lock``)."""

    files: Files
    command: str
    partition: Partition

    @property
    def name(self) -> str:
        return self.partition.directory

    @property
    def lock_path(self) -> str:
        return self.files.path(STATE, "locks", f"{self.name}.lock")


class _NoLock:
    """Where no lock can be held (Spark Connect): nothing broken, nothing to lose."""

    broke = None

    def ensure(self) -> None:
        pass


class _Named:
    """The lock's files, named in messages as the table family (``output ev.ndcg is locked ...``)."""

    def __init__(self, files: Files, name: str):
        self._files, self.shown = files, name

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._files, attr)


class TableSink:
    """A run's results as a family of catalog tables (see the module)."""

    def __init__(self, spark, command: str, output):
        self.spark, self.command, self.output = spark, command, output
        self.family = Family(spark, output.table)
        self.name = self.family.table_name  # as written in messages; its catalog and schema resolved
        self.root = self.shown = output.table
        self.key, self.value = output.partition.key, output.partition.value
        self.place: Optional[LockPlace] = None
        self.held = False

    def members(self) -> List[str]:
        """The family's members this command writes, the runs last."""
        return [*sorted({MEMBERS[n] for n in COMMANDS[self.command][0]}), RUNS]

    def check(self, spark, config) -> None:
        name = self.name
        check_catalog(spark, name)
        if not spark.catalog.databaseExists(name.namespace):
            written = TableName.parse(self.root).namespace or name.schema
            raise ConfigError(f"output_table {self.root}: database {written!r} does not exist; create it first")
        check_format(spark, name, self.output.table_format)
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
        if not self.family.view_exists(self.family.view(RUNS)):
            # Before anything is computed: a catalog that cannot hold the views is refused now.
            check_views(spark, name, self.family.name)

    def _lock_place(self) -> Optional[LockPlace]:
        """The night's lock, a file with the family's tables (their namespace's location in their
        catalog), wherever the job is started from: classic mode only."""
        if is_connect(self.spark):
            return None
        location = lock_location(self.spark, self.name)
        root = qualify(self.spark, f"{location.rstrip('/')}/_ndcg_spark/{self.output.table.split('.')[-1]}")
        files = _Named(files_for(self.spark, root), self.root)
        return LockPlace(files, self.command, self.output.partition)

    def locked(self, run_id: str, output):
        self.place = self._lock_place()
        if self.place is None:
            return contextlib.nullcontext(_NoLock())
        self.held = True
        return lease.locked(self.place, run_id, output.break_lock, output.lock_timeout)

    def recover(self) -> None:
        """Drop what earlier runs of the night left that no view shows: all of it when this run
        holds the night's lock; without one, the superseded runs and rows a day old."""
        self.drop_others(steps=False)

    def drop_others(self, steps: bool = True) -> None:
        """Drop the night's partitions of every run but the current one, runs rows last (``steps``:
        a publish's named steps, ``dropped:<member>``, for the fault tests).

        The runs with a runs row are listed before the current one is read: a run whose row was
        written meanwhile is then either current or not listed, so a run without the lock (over
        Spark Connect) never drops the rows of a night that another run has just published."""
        family = self.family
        named = set(family.run_ids(family.data(RUNS), self.key, self.value))
        keep = family.current_run(self.key, self.value)
        for member in self.members():
            table = family.data(member)
            ids = [r for r in family.run_ids(table, self.key, self.value) if r != keep and self._droppable(r, named)]
            with catalog_step(self.name, f"remove superseded rows from {table}"):
                family.drop(table, self.key, self.value, ids)
            if steps:
                contract.at_step(f"dropped:{member}")

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
            files = self.place.files
            for path in (files.path(STATE, "locks"), files.path(STATE)):
                files.remove_if_empty(path)
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
        name = COMMANDS[self.command][1]
        texts = {name: found[0]["manifest"]}
        if found[0]["report"] is not None:
            texts["report.html"] = found[0]["report"]
        return texts

    def note_failure(self, exit_code: int, message: str) -> None:
        """Nothing to note: ``history --output-table`` shows the published nights (the runs view);
        what a failed run wrote, no view shows, and the night's next run drops it."""


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
        contract.at_step(f"written:{name}")  # one commit of a V2 table: the kill tests stop here

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
        contract.at_step("staged")
        if guard is not None:
            guard()
        row = self._runs_row(marker)
        with catalog_step(sink.name, "create the family's views"):
            if not family.exists(family.data(RUNS)):  # for the views to name; no commit of its own
                _create(sink, family.data(RUNS), row)
            create_view(family, RUNS, runs_view(family, sink.key))
            for member in sorted({MEMBERS[n] for n in self.written}):
                create_view(family, member, night_view(family, member, sink.key))
        with catalog_step(sink.name, "append the night's runs row"):
            _append(sink, family.data(RUNS), row)
        self.published = True
        contract.at_step("published")
        sink.drop_others()

    def _runs_row(self, marker: Dict[str, Any]) -> DataFrame:
        result = RunResult.from_json(marker, self.sink.command)
        dumps = strict_json
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
            self._stored_bytes(),
        )
        sink = self.sink
        row = sink.spark.createDataFrame([values], RUN_COLUMNS)
        runs = sink.family.data(RUNS)
        if sink.family.exists(runs) and STORED_BYTES not in sink.spark.table(runs).columns:
            row = row.drop(STORED_BYTES)  # a family made before the column: its runs rows stay as they are
        return row.withColumns(
            {"published_at": F.current_timestamp(), sink.key: F.lit(sink.value), "run_id": F.lit(self.run_id)}
        ).coalesce(1)

    def _stored_bytes(self) -> Optional[int]:
        """The bytes of data files this run's rows take in the storage tables, as the format tells
        (Iceberg's ``files`` metadata table; the files Spark reads them from, Delta's and
        Parquet's); None where it does not."""
        sink, total = self.sink, 0
        where = f"{sink.key} = {sql_literal(sink.value)} AND run_id = {sql_literal(self.run_id)}"
        for table in sorted(set(self.written.values())):
            if sink.family.kinds.provider(table) == "iceberg":
                query = (f"SELECT sum(file_size_in_bytes) FROM {table}.files "
                         f"WHERE partition.{sink.key} = {sql_literal(sink.value)} AND partition.run_id = {sql_literal(self.run_id)}")  # fmt: skip
            else:
                query = (f"SELECT sum(size) FROM (SELECT DISTINCT _metadata.file_path, _metadata.file_size AS size "
                         f"FROM {table} WHERE {where})")  # fmt: skip
            try:
                total += sink.spark.sql(query).collect()[0][0] or 0
            except Exception:  # noqa: BLE001 - a format or catalog that does not tell
                return None
        return total

    def discard(self) -> None:
        """A run that did not publish drops its own rows (what a kill leaves, the next run drops)."""
        if self.published:
            return
        family = self.sink.family
        for table in sorted(set(self.written.values())):
            with contextlib.suppress(Exception):  # cancelled by a signal, say: the next run drops them
                family.drop(table, self.sink.key, self.sink.value, [self.run_id])


def _append(sink: TableSink, table: str, df: DataFrame) -> None:
    """Append ``df`` as new partitions (key, ``run_id``) of ``table``, created on first use.

    An existing V2 table takes the rows in its own format (``DataFrameWriterV2.append``: one
    commit), whatever ``output_table_format`` says; a V1 table, as Spark's writer appends."""
    family = sink.family
    if family.exists(table):
        have = {c.name: c.dataType for c in sink.spark.catalog.listColumns(table)}
        mine = {f.name: f.dataType.simpleString() for f in df.schema.fields}
        if set(have) != set(mine) or any(have[c] != t for c, t in mine.items()):
            raise ConfigError(
                f"table {table} has the columns {', '.join(have)}; this run's are {', '.join(mine)}: "
                "keep one configuration (segments, metrics) per output_table, or choose another"
            )
        if family.kinds.v2(table):
            df.writeTo(table).append()
            return
    elif not sink.name.in_session_catalog:
        # A catalog plugin's table: created through the catalog, in its default format unless
        # one is asked for (another run may create it meanwhile: then append).
        writer = df.writeTo(table).partitionedBy(F.col(sink.key), F.col("run_id"))
        if sink.output.table_format is not None:
            writer = writer.using(sink.output.table_format)
        try:
            writer.create()
        except Exception:
            if not family.exists(table):
                raise
            df.writeTo(table).append()
        return
    writer = df.write.mode("append").partitionBy(sink.key, "run_id")
    if sink.output.table_format is not None:
        writer = writer.format(sink.output.table_format)
    writer.saveAsTable(table)


def _create(sink: TableSink, table: str, df: DataFrame) -> None:
    """Create ``table`` empty with ``df``'s columns, partitioned by (key, ``run_id``): a V2 format's
    by DDL, which commits nothing (an empty append is an empty snapshot); a V1 table, as Spark's
    writer makes it (no partition)."""
    fmt = sink.output.table_format
    if fmt is None and sink.name.in_session_catalog:
        _append(sink, table, df.limit(0))
        return
    columns = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in df.schema.fields)
    using = f" USING {fmt}" if fmt is not None else ""
    sink.spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({columns}){using} PARTITIONED BY ({sink.key}, run_id)")


# ----------------------------------------------------------------------------- the kind


def serves(path: Optional[str], table: Optional[str]) -> bool:
    """A family of catalog tables: ``--output-table``."""
    return table is not None


def sink(spark, config) -> TableSink:
    return TableSink(spark, config.command, config.output)


def runs(spark, path: Optional[str], table: Optional[str]) -> TableRuns:
    return TableRuns(spark, table)


def without_spark(path: Optional[str], table: Optional[str]) -> bool:
    return False  # a catalog is read through Spark


def refuse_early(config: Any) -> None:
    """Nothing to refuse before Spark: the catalog says where the tables are."""

    # The lock lives beside the database's tables (:meth:`TableSink._lock_place`), found through
    # the catalog once Spark runs.
