"""The runs an output holds, read from their markers, and the gate on the change from the last one.

A complete run of partition value ``D`` (a run date, or the value of ``--partition key=value``)
has its manifest at ``DIR/_manifests/key=D/summary.json``: a directory there without one is
not a complete run. Only the manifests are read to list and show the history (one small file
per run); the regression gate reads the previous run's per-user table, pairs it with tonight's
in Spark and collects a few summary rows.

Files are listed and read through Hadoop's FileSystem in classic mode, so any file system the
job writes to works (``hdfs://``, ``s3a://``); over Spark Connect the client has no Hadoop API
and reads its own file system, which is the only kind of output the job accepts there.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import urlparse

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ndcg_spark._sql import ident
from ndcg_spark._stats import paired_t_test
from ndcg_spark.errors import InputDataError
from ndcg_spark.job import storage
from ndcg_spark.job.console import text_table
from ndcg_spark.job.gates import ChangeGate, parse_change_gates, segment_text
from ndcg_spark.options import Cutoff, k_label

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
        # One listing for every marker (a glob), not a call per directory: cheap on object stores.
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
    except (OSError, ValueError) as exc:
        raise InputDataError(f"cannot read the manifest {path}: {exc}") from None


def read_history(
    spark, output: str, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
) -> List[Tuple[str, Dict[str, Any]]]:
    """(value, manifest) of the complete runs, oldest first: the ``last`` ones only when given,
    and only those before ``before`` when given."""
    values = [v for v in complete_runs(spark, output, key) if before is None or v < before]
    if last is not None:
        values = values[-last:] if last > 0 else []
    return [(v, read_manifest(spark, output, v, key)) for v in values]


def previous_run(spark, output: str, before: str, key: str = RUN_DATE) -> Optional[str]:
    """The most recent complete run before ``before`` (compared as text), or None."""
    earlier = [v for v in complete_runs(spark, output, key) if v < before]
    return earlier[-1] if earlier else None


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


# ----------------------------------------------------------------------------- the regression gate


def parse_drop_gates(spec: Any, group_by: Sequence[str] = (), cutoffs: Optional[Sequence[Cutoff]] = None):
    """``--fail-if-drop [column=value:]k:drop[,...]``; ``drop`` absolute (``0.02``) or a share
    of the previous run's mean (``2%``). Raises ConfigError (one line) on a bad spelling."""
    return parse_change_gates(spec, "fail_if_drop", group_by, cutoffs)


def paired_change(
    current: DataFrame, previous: DataFrame, group_by: Sequence[str], user_col: str
) -> List[Dict[str, Any]]:
    """Per segment and k, the paired change of NDCG from ``previous`` to ``current`` over the
    users in both (same segment, user and k).

    The pairing and the sums run in Spark; one row per segment and k is collected, and the 95%
    interval of the mean difference is computed from it as ``compare`` does (paired t).

    Returns
    -------
    list of dict
        Segments, ``k``, ``users_in_common``, ``mean_previous``, ``mean_current``,
        ``mean_difference`` (current - previous), ``std_difference``, ``difference_ci_low``,
        ``difference_ci_high``, ``t_statistic``, ``p_value``; segments then k ascending, the
        whole list last.
    """
    keys = [*group_by, user_col, "k"]
    missing = [c for c in keys if c not in previous.columns]
    if missing:
        raise InputDataError(
            f"the previous run's per-user table has no column {missing[0]!r}: it was evaluated with other segments"
        )
    renamed = previous.select(
        *[F.col(ident(c)).alias(f"__previous_{i}") for i, c in enumerate(keys)],
        F.col("ndcg").alias("__ndcg_previous"),
    )
    # Null-safe: k is null for the whole list, and a segment value may be null.
    condition = None
    for i, c in enumerate(keys):
        equal = F.col(ident(c)).eqNullSafe(F.col(f"__previous_{i}"))
        condition = equal if condition is None else condition & equal
    pairs = current.select(*[F.col(ident(c)) for c in keys], F.col("ndcg")).join(renamed, condition, "inner")
    d = F.col("ndcg") - F.col("__ndcg_previous")
    summary = pairs.groupBy(*[F.col(ident(c)) for c in (*group_by, "k")]).agg(
        F.count(F.lit(1)).alias("users_in_common"),
        F.avg("__ndcg_previous").alias("mean_previous"),
        F.avg("ndcg").alias("mean_current"),
        F.avg(d).alias("mean_difference"),
        F.stddev_samp(d).alias("std_difference"),
    )
    order = [*group_by, "k"]
    rows = sorted((r.asDict() for r in summary.collect()), key=lambda r: [(r[c] is None, r[c]) for c in order])
    for r in rows:
        r.update(paired_t_test(r["users_in_common"], r["mean_difference"], r["std_difference"]))
    return rows


@dataclass(frozen=True)
class RegressionOutcome:
    """The regression gate's decision.

    Attributes
    ----------
    current, previous : str or None
        The partition values compared (``previous`` None: no earlier complete run).
    checked : list of dict
        One record per (gate, segment it selects): ``gate``, ``segment``, ``k``, ``threshold``
        (as an NDCG difference), ``users_in_common``, ``mean_previous``, ``mean_current``,
        ``mean_difference``, ``difference_ci_low``, ``difference_ci_high``, ``passed``.
    message : str
        One line: what was compared and the decision (the first failure when any).
    """

    current: str
    previous: Optional[str]
    checked: List[Dict[str, Any]] = field(default_factory=list)
    message: str = ""

    @property
    def failed(self) -> bool:
        """Whether any gate failed (the job then exits 4, its outputs written)."""
        return any(not g["passed"] for g in self.checked)

    def to_dict(self) -> Dict[str, Any]:
        """The decision as the manifest records it."""
        return {"current": self.current, "previous": self.previous, "gates": self.checked, "message": self.message}


def check_drops(
    gates: Sequence[ChangeGate],
    changes: List[Dict[str, Any]],
    group_by: Sequence[str] = (),
    *,
    point_estimate: bool = False,
) -> List[Dict[str, Any]]:
    """Each drop gate held against every row of :func:`paired_change` it selects.

    A gate fails a segment when NDCG fell by more than its threshold (the previous mean less
    tonight's, over the users in common) and, unless ``point_estimate``, the 95% interval of the
    paired difference lies below 0 (a fall the interval cannot tell from noise passes). A
    relative threshold is a share of the previous mean. A gate that selects no row with users
    in common fails: a typo in a filter must not let a run through.
    """
    checked = []
    for gate in gates:
        selected = [r for r in changes if gate.selects(r)]
        for r in selected:
            threshold = gate.threshold(r["mean_previous"])
            high = r["difference_ci_high"]
            exceeds = threshold is not None and -r["mean_difference"] > threshold
            sure = point_estimate or (high is not None and high < 0)
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": {c: r[c] for c in group_by},
                    "k": gate.k,
                    "threshold": threshold,
                    **{c: r[c] for c in ("users_in_common", "mean_previous", "mean_current", "mean_difference")},
                    "difference_ci_low": r["difference_ci_low"],
                    "difference_ci_high": high,
                    "passed": not (exceeds and sure),
                }
            )
        if not selected:
            checked.append(
                {
                    "gate": gate.describe(),
                    "segment": dict(gate.where),
                    "k": gate.k,
                    "threshold": gate.amount if not gate.relative else None,
                    "users_in_common": 0,
                    **dict.fromkeys(("mean_previous", "mean_current", "mean_difference")),
                    **dict.fromkeys(("difference_ci_low", "difference_ci_high")),
                    "passed": False,
                }
            )
    return checked


def regression_gate(
    spark,
    output: str,
    current_value: str,
    current_per_user: DataFrame,
    gates: Sequence[ChangeGate],
    group_by: Sequence[str],
    user_col: str,
    *,
    key: str = RUN_DATE,
    point_estimate: bool = False,
) -> RegressionOutcome:
    """``--fail-if-drop``: tonight's per-user NDCG against the most recent earlier complete run's.

    Parameters
    ----------
    spark : SparkSession
    output : str
        The job's output directory, which holds the earlier runs.
    current_value : str
        Tonight's partition value (the run date).
    current_per_user : DataFrame
        Tonight's per-user figures (``EvaluationResult.per_user``; cache it, it is read again).
    gates : sequence of ChangeGate
        From :func:`parse_drop_gates`.
    group_by : sequence of str
        The segment columns.
    user_col : str
        The user column.
    key : str
        The partition column (``run_date``, or the key of ``--partition``).
    point_estimate : bool
        Fail on the mean difference alone, whatever its interval.

    Returns
    -------
    RegressionOutcome
        With no earlier run, no gate is checked and the message says so (the gate passes).
    """
    previous = previous_run(spark, output, current_value, key)
    if previous is None:
        return RegressionOutcome(
            current_value,
            None,
            [],
            f"regression gate: no complete run before {key}={current_value} in {output}; passed",
        )
    changes = paired_change(current_per_user, read_per_user(spark, output, previous, key), group_by, user_col)
    checked = check_drops(gates, changes, group_by, point_estimate=point_estimate)
    failed = [g for g in checked if not g["passed"]]
    shown = failed[0] if failed else (checked[0] if checked else None)
    verdict = "failed" if failed else "passed"
    line = f"regression gate {verdict}: {key} {previous} -> {current_value}"
    if shown is not None:
        line += ", " + describe_change(shown)
    if len(failed) > 1:
        line += f"; {len(failed) - 1} more gate(s) failed, see summary.json"
    if failed:
        line += " (outputs were written)"
    return RegressionOutcome(current_value, previous, checked, line)


def describe_change(g: Dict[str, Any]) -> str:
    """``NDCG@10 of model=v2: 480 users in common, difference -0.0312, 95% interval [...], limit -0.02``."""
    segment = segment_text(g["segment"], list(g["segment"]))
    of = f" of {segment}" if segment else ""
    text = f"NDCG@{k_label(g['k'])}{of}: {g['users_in_common']} users in common"
    if g["mean_difference"] is None:
        return text + " (nothing to compare)"
    text += f", difference {g['mean_difference']:+.6f}"
    if g["difference_ci_low"] is not None:
        text += f", 95% interval [{g['difference_ci_low']:+.6f}, {g['difference_ci_high']:+.6f}]"
    if g["threshold"] is not None:
        text += f", allowed drop {g['threshold']:.6f}"
    return text
