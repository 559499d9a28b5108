"""The runs an output holds, read from their markers: the history table, the trend chart's rows,
and the previous run that the regression gate (:mod:`ndcg_spark.job.regression`) compares with.

A complete run of partition value ``D`` (a run date, or the value of ``--partition key=value``)
has its manifest at ``DIR/_manifests/key=D/summary.json`` (:class:`ndcg_spark.job.publish.Place`):
a directory there without one is not a complete run. Only the manifests are read (one small
file per run), through :class:`ndcg_spark.job.storage.Files`: Hadoop's FileSystem in classic
mode, so any file system the job writes to works (``hdfs://``, ``s3a://``).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Tuple

from pyspark.sql import DataFrame

from ndcg_spark.errors import ConfigError, InputDataError
from ndcg_spark.job import publish, storage
from ndcg_spark.job.console import text_table
from ndcg_spark.job.nights import unfinished
from ndcg_spark.job.result import RunResult
from ndcg_spark.job.targets import Partition
from ndcg_spark.job.verdict import gates_summary

RUN_DATE = "run_date"

#: Figures of each summary row the history shows: (summary column, header).
HISTORY_COLUMNS = (
    ("users", "users"),
    ("mean_ndcg", "mean_ndcg"),
    ("ndcg_ci_low", "ci_low"),
    ("ndcg_ci_high", "ci_high"),
    ("users_zero_idcg", "zero_idcg"),
    ("users_without_recommendations", "no_recs"),
    ("users_without_relevance", "no_relevance"),
    ("users_excluded", "excluded"),
)


# ----------------------------------------------------------------------------- the markers


def run_place(files: storage.Files, value: str, key: str = RUN_DATE) -> publish.Place:
    """The place of the evaluate run ``key=value`` in an output: its marker and tables."""
    return publish.Place(files, "evaluate", Partition(key, value))


def complete_runs(files: storage.Files, key: str = RUN_DATE) -> List[str]:
    """The partition values of ``key`` with a complete run in ``output``, ascending (as text:
    ISO dates sort by date). An output without partitioned runs has none.

    It costs a listing of ``_manifests``, then a status of each run's marker.

    Examples
    --------
    >>> complete_runs(storage.files_for(spark, "/data/ndcg"))  # doctest: +SKIP
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


def read_manifest(files: storage.Files, value: str, key: str = RUN_DATE) -> RunResult:
    """The result of the complete run of ``key=value`` in the output, read from its marker
    (``summary.json``)."""
    path = run_place(files, value, key).marker
    try:
        text = files.read_text(path)
        if text is None:
            raise FileNotFoundError("it does not exist")
        return RunResult.from_json(json.loads(text), "evaluate")
    except Exception as exc:  # OSError, bad JSON, or Hadoop's own errors through py4j
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"cannot read the manifest {path}: {reason}") from None


def read_history(
    files: storage.Files, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
) -> List[Tuple[str, RunResult]]:
    """(value, result) of the complete runs, oldest first: the ``last`` ones only when given,
    and only those before ``before`` when given."""
    values = [v for v in complete_runs(files, key) if before is None or v < before]
    if last is not None:
        values = values[-last:] if last > 0 else []
    return [(v, read_manifest(files, v, key)) for v in values]


def previous_run(files: storage.Files, before: str, key: str = RUN_DATE, *, passed_only: bool = False) -> Optional[str]:
    """The most recent complete run before ``before`` (compared as text) whose tables are there,
    or None (:func:`previous_intact_run`)."""
    return previous_intact_run(files, before, key, passed_only=passed_only)[0]


def previous_intact_run(
    files: storage.Files, before: str, key: str = RUN_DATE, *, passed_only: bool = False
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


def missing_tables(files: storage.Files, value: str, key: str, result: RunResult) -> List[str]:
    """The tables a run's marker vouches for that are no longer there (deleted by hand, say)."""
    tables = (result.published.tables if result.published else None) or {}
    return [name for name, t in tables.items() if not files.exists(files.path(t.get("path", "")))]


def gates_passed(result: RunResult) -> bool:
    """Whether every gate a run recorded passed (its floors and its drop gate)."""
    return not result.failed


def read_per_user(spark, files: storage.Files, value: str, key: str = RUN_DATE) -> DataFrame:
    """The per-user table of the run ``key=value`` (its partition directory, read as itself)."""
    return spark.read.parquet(run_place(files, value, key).table("per_user"))


def partition_key(files: storage.Files) -> str:
    """The partition key of an output of dated (or partitioned) ``ndcg-spark`` runs, from its
    recorded layout; a ConfigError (exit 2) for an output that holds no such runs."""
    output, layout = files.root, publish.recorded_layout(files)
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
    (:class:`ndcg_spark.job.tables.TableRuns` answers the same for catalog tables)."""

    def __init__(self, files: storage.Files):
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
        """The nights a run left unfinished (:func:`ndcg_spark.job.nights.unfinished`)."""
        return unfinished(self.files, key)


def runs_of(source) -> Any:
    """The earlier runs of ``source``: a sink's runs as they are, an output's :class:`Files` as
    :class:`DirectoryRuns`."""
    return source if hasattr(source, "per_user") else DirectoryRuns(source)


# ----------------------------------------------------------------------------- the history table


def history_rows(runs: Sequence[Tuple[str, RunResult]], key: str = RUN_DATE) -> List[Dict[str, Any]]:
    """One row per run, segment and k: the partition value under ``key``, the segment columns,
    ``k`` and the figures of :data:`HISTORY_COLUMNS` (``None`` where a run did not record one)."""
    rows = []
    segments = history_segments(runs)
    for value, result in runs:
        gates = gates_summary(result)
        for m in result.metrics:
            row = {key: value, **{c: m.get(c) for c in segments}, "k": m.get("k")}
            row.update({c: m.get(c) for c, _ in HISTORY_COLUMNS})
            row["gates"] = gates
            rows.append(row)
    return rows


def history_segments(runs: Sequence[Tuple[str, RunResult]]) -> List[str]:
    """The segment columns of any of the runs, in the order first met."""
    seen: List[str] = []
    for _, result in runs:
        seen += [c for c in result.group_by if c not in seen]
    return seen


def format_history(rows: List[Dict[str, Any]], segments: Sequence[str] = (), key: str = RUN_DATE) -> str:
    """The history as a fixed-width table (``k``, the partition value, the segments, the figures)."""
    if not rows:
        return "no complete run"
    # The run's gates last: a few words that would push the figures apart if they stood first.
    return text_table(rows, (*HISTORY_COLUMNS, ("gates", "gates")), [key, *segments])


def history_record(
    output: str, rows: List[Dict[str, Any]], key: str = RUN_DATE, broken: Optional[Dict[str, List[str]]] = None
) -> Dict[str, Any]:
    """The history as ``--json`` prints it: the output, the partition key, the runs, their rows,
    and the runs whose tables are gone (``broken``: value -> the missing tables)."""
    runs = sorted({r[key] for r in rows})
    return {"output": output, "key": key, "runs": runs, "rows": rows, "broken": broken or {}}


def broken_lines(broken: Dict[str, List[str]], key: str = RUN_DATE) -> List[str]:
    """One line per run whose manifest stands but whose tables are gone."""
    return [
        f"broken: {key}={value}: its {', '.join(tables)} table(s) are missing (the figures are its manifest's; "
        "the regression gate skips it; re-run the date to restore it)"
        for value, tables in sorted(broken.items())
    ]


def trend_rows(
    runs: Sequence[Tuple[str, RunResult]],
    current: Optional[Tuple[str, List[Dict[str, Any]]]] = None,
    key: str = RUN_DATE,
    last: int = 14,
    group_by: Sequence[str] = (),
) -> List[Dict[str, Any]]:
    """The rows of the report's trend chart: the history rows of the ``last`` runs, tonight's
    (``(value, metrics)`` segmented by ``group_by``, whose manifest is not written yet when the
    report is) in place of a run of the same value."""
    runs = [(v, m) for v, m in runs if current is None or v != current[0]]
    if current is not None:
        runs.append((current[0], RunResult("evaluate", {"group_by": list(group_by)}, metrics=tuple(current[1]))))
    runs.sort(key=lambda run: run[0])
    return history_rows(runs[-last:] if last > 0 else [], key)


def history_text(source, *, key: str = RUN_DATE, last: Optional[int] = None, as_json: bool = False) -> str:
    """What ``ndcg-spark history`` prints for ``source`` (an output's Files, or a sink's runs):
    the table of :func:`format_history`, a line per broken run (:func:`broken_lines`) and one per
    night a run left unfinished (:mod:`ndcg_spark.job.nights`), or with ``as_json`` the one JSON
    document of :func:`history_record` (with ``unfinished``)."""
    earlier = runs_of(source)
    runs = earlier.history(key, last)
    broken = {v: m for v, m in ((v, earlier.missing(v, key, m)) for v, m in runs) if m}
    # The nights a run left unfinished; an interrupted publish with its staged figures among the runs.
    nights = earlier.unfinished(key)
    staged = {n.value: n.result for n in nights if n.result is not None}
    runs = sorted([(v, r) for v, r in runs if v not in staged] + list(staged.items()), key=lambda run: run[0])
    runs = runs[-last:] if last else runs
    if last and runs:
        nights = [n for n in nights if n.value >= runs[0][0]]
    rows = history_rows(runs, key)
    if as_json:
        record = history_record(earlier.root, rows, key, broken)
        record["unfinished"] = {n.value: n.to_json() for n in nights}
        return storage.strict_json(record)
    table = format_history(rows, history_segments(runs), key)
    return "\n".join([table, *broken_lines(broken, key), *(n.line(key) for n in nights)])


@dataclass(frozen=True)
class HistoryConfig:
    """``ndcg-spark history``: the output whose runs to show, how many, and how."""

    output: Optional[str]
    last: Optional[int] = None
    as_json: bool = False
    master: Optional[str] = None
    remote: Optional[str] = None
    #: The family of catalog tables of the runs, instead of an output directory.
    output_table: Optional[str] = None
    spark: Tuple[Tuple[str, str], ...] = ()

    command = "history"

    @classmethod
    def parse(cls, argv: Sequence[str]) -> Tuple[HistoryConfig, bool]:
        """(config, verbose) from the command line (after ``history``)."""
        from ndcg_spark.job import settings
        from ndcg_spark.job.flags import build_parser

        args = vars(build_parser(settings.HISTORY).parse_args(list(argv)))
        verbose = args.pop("verbose")
        # --json and --last were read by argparse; the others, keys of a run's config too, here.
        args.update(settings.parse_values({k: v for k, v in args.items() if settings.BY_NAME[k].toml}, "history"))
        if args["output"] is None and args["output_table"] is None:
            raise ConfigError("the following arguments are required: --output (or --output-table)")
        if args["output"] is not None and args["output_table"] is not None:
            raise ConfigError("give --output (the output directory of the runs) or --output-table, not both")
        if args["output"] is not None and not args["output"].strip():
            raise ConfigError("output is required: the output directory of the runs")
        args["spark"] = args["spark"] or ()
        if args["master"] and args["remote"]:
            raise ConfigError("give master or remote (Spark Connect), not both")
        return cls(**args), verbose


def reads_without_spark(output: Optional[str]) -> bool:
    """Whether ``output`` is a local folder of ours, whose markers Python reads as well as Hadoop
    would (no Spark to start): a plain path, not a URI, holding our state folder. A plain path
    that is not there locally may be on the default file system of a cluster: Spark reads it."""
    if output is None:  # catalog tables: read through Spark
        return False
    return "://" not in output and not output.startswith("file:") and os.path.isdir(os.path.join(output, publish.STATE))


def show(spark, config: HistoryConfig) -> str:
    """The text ``ndcg-spark history`` prints for ``config`` (``spark`` None: a local output read
    without Spark, :func:`reads_without_spark`)."""
    from ndcg_spark.job.sinks import runs_for

    runs = runs_for(spark, config)
    return history_text(runs, key=runs.key(), last=config.last, as_json=config.as_json)
