"""The runs an output holds, read from their markers: the history table, the trend chart's rows,
and the previous run that the regression gate (:mod:`ndcg_spark.job.regression`) compares with.

A complete run of partition value ``D`` (a run date, or the value of ``--partition key=value``)
has its manifest at ``DIR/_manifests/key=D/summary.json``: a directory there without one is
not a complete run. Only the manifests are read (one small file per run).

Files are listed and read through Hadoop's FileSystem in classic mode, so any file system the
job writes to works (``hdfs://``, ``s3a://``); over Spark Connect the client has no Hadoop API
and reads its own file system, which is the only kind of output the job accepts there.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlparse

from pyspark.sql import DataFrame

from ndcg_spark.errors import InputDataError
from ndcg_spark.job import storage
from ndcg_spark.job.console import text_table

MANIFESTS = "_manifests"
MARKER = "summary.json"
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


def complete_runs(spark, output: str, key: str = RUN_DATE) -> List[str]:
    """The partition values of ``key`` with a complete run in ``output``, ascending (as text:
    ISO dates sort by date). An output without partitioned runs has none.

    Examples
    --------
    >>> complete_runs(spark, "/data/ndcg")  # doctest: +SKIP
    ['2026-11-20', '2026-11-21']
    """
    prefix = f"{key}="
    manifests = _join(output, MANIFESTS)
    if storage.is_connect(spark):
        local = _local(manifests)
        names = os.listdir(local) if os.path.isdir(local) else []
        names = [n for n in names if os.path.isfile(os.path.join(local, n, MARKER))]
    else:
        fs, folder = _hadoop(spark, manifests)
        # One glob: a listing of _manifests, then a status of each run's marker (no directory is read beyond that).
        found = fs.globStatus(spark._jvm.org.apache.hadoop.fs.Path(folder, f"*/{MARKER}")) or []
        names = [status.getPath().getParent().getName() for status in found if status.isFile()]
    return sorted(n[len(prefix) :] for n in names if n.startswith(prefix) and len(n) > len(prefix))


def read_manifest(spark, output: str, value: str, key: str = RUN_DATE) -> Dict[str, Any]:
    """The manifest (``summary.json``) of the complete run of ``key=value`` in ``output``."""
    path = _join(output, MANIFESTS, f"{key}={value}", MARKER)
    try:
        if storage.is_connect(spark):
            with open(_local(path), encoding="utf-8") as fh:
                text = fh.read()
        else:
            fs, file = _hadoop(spark, path)
            stream = fs.open(file)
            try:
                text = spark._jvm.org.apache.commons.io.IOUtils.toString(stream, "UTF-8")
            finally:
                stream.close()
        return json.loads(text)
    except Exception as exc:  # OSError, bad JSON, or Hadoop's own errors through py4j
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise InputDataError(f"cannot read the manifest {path}: {reason}") from None


def read_history(
    spark, output: str, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
) -> List[Tuple[str, Dict[str, Any]]]:
    """(value, manifest) of the complete runs, oldest first: the ``last`` ones only when given,
    and only those before ``before`` when given."""
    values = [v for v in complete_runs(spark, output, key) if before is None or v < before]
    if last is not None:
        values = values[-last:] if last > 0 else []
    return [(v, read_manifest(spark, output, v, key)) for v in values]


def previous_run(spark, output: str, before: str, key: str = RUN_DATE, *, passed_only: bool = False) -> Optional[str]:
    """The most recent complete run before ``before`` (compared as text), or None; with
    ``passed_only``, the most recent whose gates all passed (its manifest says so), so a bad
    night that persists is held against the last good one, night after night."""
    earlier = [v for v in complete_runs(spark, output, key) if v < before]
    if not passed_only:
        return earlier[-1] if earlier else None
    for value in reversed(earlier):
        if gates_passed(read_manifest(spark, output, value, key)):
            return value
    return None


def gates_passed(manifest: Dict[str, Any]) -> bool:
    """Whether every gate recorded in a manifest passed (``quality_gates``, ``regression_gate``)."""
    floors = all(g.get("passed", True) for g in manifest.get("quality_gates") or [])
    drops = all(g.get("passed", True) for g in (manifest.get("regression_gate") or {}).get("gates") or [])
    return floors and drops


def read_per_user(spark, output: str, value: str, key: str = RUN_DATE) -> DataFrame:
    """The per-user table of the run ``key=value`` (its partition directory, read as itself)."""
    return spark.read.parquet(storage.table_path(output, "per_user", (key, value)))


def _join(output: str, *names: str) -> str:
    return "/".join([output.rstrip("/"), *names])


def _local(path: str) -> str:
    return urlparse(path).path if path.startswith("file:") else path


def _hadoop(spark, path: str):
    Path = spark._jvm.org.apache.hadoop.fs.Path
    target = Path(path)
    return target.getFileSystem(spark._jsc.hadoopConfiguration()), target


# ----------------------------------------------------------------------------- the history table


def history_rows(runs: Sequence[Tuple[str, Dict[str, Any]]], key: str = RUN_DATE) -> List[Dict[str, Any]]:
    """One row per run, segment and k: the partition value under ``key``, the segment columns,
    ``k`` and the figures of :data:`HISTORY_COLUMNS` (``None`` where a run did not record one)."""
    rows = []
    segments = history_segments(runs)
    for value, manifest in runs:
        for m in manifest.get("metrics") or []:
            row = {key: value, **{c: m.get(c) for c in segments}, "k": m.get("k")}
            row.update({c: m.get(c) for c, _ in HISTORY_COLUMNS})
            rows.append(row)
    return rows


def history_segments(runs: Sequence[Tuple[str, Dict[str, Any]]]) -> List[str]:
    """The segment columns of any of the runs, in the order first met."""
    seen: List[str] = []
    for _, manifest in runs:
        group_by = (manifest.get("settings") or {}).get("group_by") or []
        seen += [c for c in ([group_by] if isinstance(group_by, str) else group_by) if c not in seen]
    return seen


def format_history(rows: List[Dict[str, Any]], segments: Sequence[str] = (), key: str = RUN_DATE) -> str:
    """The history as a fixed-width table (``k``, the partition value, the segments, the figures)."""
    if not rows:
        return "no complete run"
    return text_table(rows, HISTORY_COLUMNS, [key, *segments])


def history_record(output: str, rows: List[Dict[str, Any]], key: str = RUN_DATE) -> Dict[str, Any]:
    """The history as ``--json`` prints it: the output, the partition key, the runs and their rows."""
    return {"output": output, "key": key, "runs": sorted({r[key] for r in rows}), "rows": rows}


def trend_rows(
    runs: Sequence[Tuple[str, Dict[str, Any]]],
    current: Optional[Tuple[str, List[Dict[str, Any]]]] = None,
    key: str = RUN_DATE,
    last: int = 14,
) -> List[Dict[str, Any]]:
    """The rows of the report's trend chart: the history rows of the ``last`` runs, tonight's
    (``(value, metrics)``, whose manifest is not written yet when the report is) in place of a
    run of the same value."""
    runs = [(v, m) for v, m in runs if current is None or v != current[0]]
    if current is not None:
        runs.append((current[0], {"metrics": current[1]}))
    runs.sort(key=lambda run: run[0])
    return history_rows(runs[-last:] if last > 0 else [], key)


def history_text(spark, output: str, *, key: str = RUN_DATE, last: Optional[int] = None, as_json: bool = False) -> str:
    """What ``ndcg-spark history`` prints: the table of :func:`format_history`, or with
    ``as_json`` the one JSON document of :func:`history_record`."""
    runs = read_history(spark, output, key, last)
    rows = history_rows(runs, key)
    if as_json:
        return json.dumps(history_record(output, rows, key), default=str)
    return format_history(rows, history_segments(runs), key)
