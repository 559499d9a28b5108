"""The runs an output directory holds, read from their markers: the complete ones, their
manifests and per-user tables, the previous intact run, and (:mod:`.unfinished`) the nights a run
left unfinished; :class:`DirectoryRuns` answers what the drop gate, the trend and ``history`` ask.

A complete run of partition value ``D`` (a run date, or the value of ``--partition key=value``)
has its manifest at ``DIR/_manifests/key=D/summary.json`` (:class:`~.layout.Place`): a directory
there without one is not a complete run. Only the manifests are read (one small file per run),
through :class:`~ndcg_spark.job.outputs.files.Files`: Hadoop's FileSystem in classic mode, so any
file system the job writes to works (``hdfs://``, ``s3a://``).
"""

from __future__ import annotations

import json
import os
from typing import Any, List, Optional, Tuple

from pyspark.sql import DataFrame

from ndcg_spark.errors import ConfigError, InputDataError
from ndcg_spark.job.config.targets import RUN_DATE, Partition
from ndcg_spark.job.exits import first_line
from ndcg_spark.job.outputs.directory.layout import STATE, Place, recorded_layout
from ndcg_spark.job.outputs.directory.unfinished import unfinished
from ndcg_spark.job.outputs.files import Files
from ndcg_spark.job.result import RunResult


def run_place(files: Files, value: str, key: str = RUN_DATE) -> Place:
    """The place of the evaluate run ``key=value`` in an output: its marker and tables."""
    return Place(files, "evaluate", Partition(key, value))


def complete_runs(files: Files, key: str = RUN_DATE) -> List[str]:
    """The partition values of ``key`` with a complete run in ``output``, ascending (as text:
    ISO dates sort by date). An output without partitioned runs has none.

    It costs a listing of ``_manifests``, then a status of each run's marker.

    Examples
    --------
    >>> complete_runs(files_for(spark, "/data/ndcg"))  # doctest: +SKIP
    ['2026-11-20', '2026-11-21']
    """
    prefix = f"{key}="
    values = []
    for name in files.list(files.path("_manifests")):
        if name.startswith(prefix) and len(name) > len(prefix):
            value = name[len(prefix) :]
            if files.exists(run_place(files, value, key).marker):
                values.append(value)
    return sorted(values)


def read_manifest(files: Files, value: str, key: str = RUN_DATE) -> RunResult:
    """The result of the complete run of ``key=value`` in the output, read from its marker
    (``summary.json``)."""
    path = run_place(files, value, key).marker
    try:
        text = files.read_text(path)
        if text is None:
            raise FileNotFoundError("it does not exist")
        return RunResult.from_json(json.loads(text), "evaluate")
    except Exception as exc:  # OSError, bad JSON, or Hadoop's own errors through py4j
        reason = first_line(exc)
        raise InputDataError(f"cannot read the manifest {path}: {reason}") from None


def read_history(
    files: Files, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
) -> List[Tuple[str, RunResult]]:
    """(value, result) of the complete runs, oldest first: the ``last`` ones only when given,
    and only those before ``before`` when given."""
    values = [v for v in complete_runs(files, key) if before is None or v < before]
    if last is not None:
        values = values[-last:] if last > 0 else []
    return [(v, read_manifest(files, v, key)) for v in values]


def previous_run(files: Files, before: str, key: str = RUN_DATE, *, passed_only: bool = False) -> Optional[str]:
    """The most recent complete run before ``before`` (compared as text) whose tables are there,
    or None (:func:`previous_intact_run`)."""
    return previous_intact_run(files, before, key, passed_only=passed_only)[0]


def previous_intact_run(
    files: Files, before: str, key: str = RUN_DATE, *, passed_only: bool = False
) -> Tuple[Optional[str], List[str]]:
    """(the most recent complete run before ``before`` whose tables are there, or None; the
    later runs skipped because a table of theirs is gone). With ``passed_only``, the most recent
    whose gates all passed (its manifest says so), so a bad night that persists is held against
    the last good one, night after night."""
    earlier = [v for v in complete_runs(files, key) if v < before]
    skipped = []
    for value in reversed(earlier):
        result = read_manifest(files, value, key)
        if passed_only and not gates_passed(result):
            continue
        if missing_tables(files, value, key, result):
            skipped.append(value)
            continue
        return value, skipped
    return None, skipped


def missing_tables(files: Files, value: str, key: str, result: RunResult) -> List[str]:
    """The tables a run's marker vouches for that are no longer there (deleted by hand, say)."""
    tables = (result.published.tables if result.published else None) or {}
    return [name for name, t in tables.items() if not files.exists(files.path(t.get("path", "")))]


def gates_passed(result: RunResult) -> bool:
    """Whether every gate a run recorded passed (its floors and its drop gate)."""
    return not result.failed


def read_per_user(spark, files: Files, value: str, key: str = RUN_DATE) -> DataFrame:
    """The per-user table of the run ``key=value`` (its partition directory, read as itself)."""
    return spark.read.parquet(run_place(files, value, key).table("per_user"))


def partition_key(files: Files) -> str:
    """The partition key of an output of dated (or partitioned) ``ndcg-spark`` runs, from its
    recorded layout; a ConfigError (exit 2) for an output that holds no such runs."""
    output, layout = files.root, recorded_layout(files)
    if layout is None:
        raise ConfigError(f"output {output} holds no ndcg-spark runs")
    if layout.get("command") != "evaluate":
        raise ConfigError(
            f"output {output} holds the results of 'ndcg-spark {layout.get('command')}', which has no history"
        )
    if layout.get("partition_key") is None:
        raise ConfigError(
            f"output {output} holds one run, not dated runs: its figures are in summary.json (write runs with --run-date)"
        )
    return layout["partition_key"]


class DirectoryRuns:
    """The earlier runs of an output directory, read from their markers by the functions above:
    what the regression gate, the trend and ``history`` ask of a sink
    (:class:`~ndcg_spark.job.outputs.catalog.family.TableRuns` answers the same for catalog tables)."""

    def __init__(self, files: Files):
        self.files = files

    @property
    def root(self) -> str:
        return self.files.root

    @property
    def shown(self) -> str:
        return self.files.shown

    def key(self) -> str:
        return partition_key(self.files)

    def history(
        self, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
    ) -> List[Tuple[str, RunResult]]:
        return read_history(self.files, key, last, before)

    def previous(self, before: str, key: str = RUN_DATE, *, passed_only: bool = False):
        return previous_intact_run(self.files, before, key, passed_only=passed_only)

    def per_user(self, spark, value: str, key: str = RUN_DATE) -> DataFrame:
        return read_per_user(spark, self.files, value, key)

    def missing(self, value: str, key: str, result: RunResult) -> List[str]:
        return missing_tables(self.files, value, key, result)

    def unfinished(self, key: str = RUN_DATE) -> List[Any]:
        """The nights a run left unfinished (:func:`~ndcg_spark.job.outputs.directory.unfinished.unfinished`)."""
        return unfinished(self.files, key)


def reads_without_spark(output: Optional[str]) -> bool:
    """Whether ``output`` is a local folder of ours, whose markers Python reads as well as Hadoop
    would (no Spark to start): a plain path, not a URI, holding our state folder. A plain path
    that is not there locally may be on the default file system of a cluster: Spark reads it."""
    if output is None:  # catalog tables: read through Spark
        return False
    return "://" not in output and not output.startswith("file:") and os.path.isdir(os.path.join(output, STATE))
