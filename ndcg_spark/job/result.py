"""A run's result as one typed value: what the job computed, the gates it held, where it wrote.

The manifest (``summary.json``, or ``comparison.json`` for ``compare``) is its serialisation:
:meth:`RunResult.to_json` writes it and :meth:`RunResult.from_json` reads it back, so the
console, the finished line, ``history``, MLflow and the exit code all read the same fields,
whether of tonight's run or of a marker published long ago.

The manifest's format is versioned (``schema_version``). Version 1 is the first released one;
its first markers carry neither ``schema_version`` nor ``command`` (their reader knows which
marker it read: ``summary.json`` or ``comparison.json``). A later format gets the next number
and its own branch in :meth:`RunResult.from_json`; a marker of a version this code does not know
is refused, never half read.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ndcg_spark.errors import InputDataError
from ndcg_spark.job.config.gate_specs import NDCG, Gate, summary_column
from ndcg_spark.options import Cutoff, k_label

#: The manifest format this code writes.
SCHEMA_VERSION = 1
#: The manifest formats this code reads.
READS = (1,)


@dataclass(frozen=True)
class Checked:
    """One gate held against one row it selects (or against nothing, when it selects no row).

    The figures are those of the row the gate read; a kind leaves the others None.

    Attributes
    ----------
    gate : Gate
    segment : dict
        The row's segment values (the gate's filter when it selected no row).
    passed : bool
    threshold : float or None
        The floor; the drop allowed as an NDCG difference (None: relative, with no earlier mean);
        the margin.
    users : int or None
        Users in the mean (floor), users in common (drop), pairs (worse); None when no row.
    mean : float or None
        Mean NDCG (floor); tonight's mean over the users in common (drop).
    mean_previous : float or None
        The earlier run's mean over the users in common (drop).
    mean_difference, difference_ci_low, difference_ci_high : float or None
        The paired difference and its 95% interval (drop: tonight - earlier; worse: candidate -
        baseline).
    baseline_model, candidate_model : str or None
        The pair a ``worse`` gate held.
    """

    gate: Gate
    segment: Dict[str, Any]
    passed: bool
    threshold: Optional[float] = None
    users: Optional[int] = None
    mean: Optional[float] = None
    mean_previous: Optional[float] = None
    mean_difference: Optional[float] = None
    difference_ci_low: Optional[float] = None
    difference_ci_high: Optional[float] = None
    baseline_model: Optional[str] = None
    candidate_model: Optional[str] = None
    #: Whether the gate selected a row at all.
    found: bool = field(default=True)

    @property
    def kind(self) -> str:
        return self.gate.kind

    @property
    def k(self) -> Cutoff:
        return self.gate.k

    def to_json(self) -> Dict[str, Any]:
        """The record the manifest keeps (``quality_gates``, ``regression_gate.gates``, ``non_inferiority``)."""
        head = {"gate": self.gate.describe(), "segment": self.segment, "k": self.k}
        if self.gate.metric != NDCG:
            # A beyond-accuracy figure: a floor records it under its summary column's name
            # (``mean_novelty``, ``catalog_coverage``), a drop under ``mean_current`` as NDCG's.
            head["metric"] = self.gate.metric
        interval = {"difference_ci_low": self.difference_ci_low, "difference_ci_high": self.difference_ci_high}
        if self.kind == "floor":
            body = {"threshold": self.threshold, "users": self.users, summary_column(self.gate.metric): self.mean}
        elif self.kind == "drop":
            body = {
                "threshold": self.threshold,
                "users_in_common": self.users if self.found else 0,
                "mean_previous": self.mean_previous,
                "mean_current": self.mean,
                "mean_difference": self.mean_difference,
                **interval,
            }
        else:
            body = {
                "margin": self.threshold,
                "baseline_model": self.baseline_model,
                "candidate_model": self.candidate_model,
                "pairs": self.users,
                "mean_difference": self.mean_difference,
                **interval,
            }
        return {**head, **body, "passed": self.passed}

    @classmethod
    def from_json(cls, kind: str, record: Mapping[str, Any]) -> Checked:
        """A record as :meth:`to_json` wrote it (missing figures read as None)."""
        get = record.get
        amount = get("margin") if kind == "worse" else get("threshold")
        gate = RecordedGate(
            kind,
            (),
            get("k"),
            math.nan if amount is None else amount,
            metric=get("metric") or NDCG,
            text=get("gate") or "",
        )
        users = {"floor": get("users"), "drop": get("users_in_common"), "worse": get("pairs")}[kind]
        return cls(
            gate,
            dict(get("segment") or {}),
            bool(get("passed", True)),
            threshold=get("margin") if kind == "worse" else get("threshold"),
            users=users,
            mean=get(summary_column(gate.metric)) if kind == "floor" else get("mean_current"),
            mean_previous=get("mean_previous"),
            mean_difference=get("mean_difference"),
            difference_ci_low=get("difference_ci_low"),
            difference_ci_high=get("difference_ci_high"),
            baseline_model=get("baseline_model"),
            candidate_model=get("candidate_model"),
            found=not (kind == "floor" and users is None) and not (kind == "worse" and users is None),
        )


@dataclass(frozen=True)
class RecordedGate(Gate):
    """A gate as a manifest recorded it: its spelling kept as written (``text``), its k and amount
    the record's own values (a relative drop's amount as the NDCG figure it came to), never read
    from the spelling again. It words a verdict; it is not held against rows again."""

    text: str = ""

    def describe(self) -> str:
        return self.text or super().describe()


@dataclass(frozen=True)
class DropOutcome:
    """The regression gate's decision (``--fail-if-drop``).

    Attributes
    ----------
    current, previous : str or None
        The partition values compared (``previous`` None: no earlier complete run, and the gate
        passes).
    checked : tuple of Checked
        One per (gate, segment it selects).
    message : str
        One line: what was compared and the decision (the first failure when any).
    skipped : tuple of str
        The later runs passed over because a table of theirs is gone.
    """

    current: Optional[str]
    previous: Optional[str]
    checked: Tuple[Checked, ...] = ()
    message: str = ""
    skipped: Tuple[str, ...] = ()

    @property
    def failed(self) -> bool:
        """Whether any gate failed (the job then exits 4, its outputs written)."""
        return any(not c.passed for c in self.checked)

    def to_json(self) -> Dict[str, Any]:
        return {
            "current": self.current,
            "previous": self.previous,
            "skipped": list(self.skipped),
            "gates": [c.to_json() for c in self.checked],
            "message": self.message,
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> DropOutcome:
        checked = tuple(Checked.from_json("drop", g) for g in record.get("gates") or [])
        skipped = tuple(record.get("skipped") or ())
        return cls(record.get("current"), record.get("previous"), checked, record.get("message") or "", skipped)


@dataclass(frozen=True)
class Published:
    """Where a run was published and what its marker vouches for.

    Attributes
    ----------
    id : str
        The run's id (also its staging folder's name).
    output : str
        The output, absolute and qualified (``file:/data/ndcg``, ``hdfs://nn/ndcg``).
    broke_lock_of : str or None
        The holder whose abandoned lock this run broke, in words.
    tables : dict
        Each table's path relative to the output and its data files.
    files : list of str
        The files published beside the marker (``report.html``).
    """

    id: Optional[str]
    output: Optional[str]
    broke_lock_of: Optional[str] = None
    tables: Optional[Dict[str, Any]] = None
    files: Tuple[str, ...] = ()

    def to_json(self) -> Dict[str, Any]:
        return {
            "id": self.id,
            "output": self.output,
            "broke_lock_of": self.broke_lock_of,
            "tables": self.tables,
            "files": list(self.files),
        }

    @classmethod
    def from_json(cls, record: Mapping[str, Any]) -> Published:
        return cls(
            record.get("id"),
            record.get("output"),
            record.get("broke_lock_of"),
            dict(record.get("tables") or {}),
            tuple(record.get("files") or ()),
        )


@dataclass(frozen=True)
class RunResult:
    """One run of ``ndcg-spark`` (``command`` ``evaluate``) or ``ndcg-spark compare``.

    Attributes
    ----------
    command : {"evaluate", "compare"}
    schema_version : int
        The manifest format the result was written in (:data:`SCHEMA_VERSION` for a new one).
    settings : dict
        The config as run (:meth:`~ndcg_spark.job.config.parsing.EvaluateConfig.to_dict`).
    input_rows : dict
        Rows read per table (per model and table for ``compare``).
    spark_version : str or None
    partition : dict or None
        ``{key: value}`` of a partitioned run.
    metrics : tuple of dict
        The summary's rows (``evaluate``).
    rows : dict or None
        The row accounting: every input row as used or set aside for a reason (``evaluate``).
    comparison : tuple of dict
        compare's rows, one per pair, segment and k (``compare``).
    floors : tuple of Checked
        The ``--fail-below`` gates as held.
    drop : DropOutcome or None
        The ``--fail-if-drop`` gate's decision (None when not asked for).
    worse : tuple of Checked
        The ``--fail-if-worse`` gates as held.
    published : Published or None
        Set once the result is staged for publishing.
    duration_seconds : float or None
    """

    command: str
    settings: Dict[str, Any] = field(default_factory=dict)
    input_rows: Dict[str, Any] = field(default_factory=dict)
    spark_version: Optional[str] = None
    partition: Optional[Dict[str, str]] = None
    metrics: Tuple[Dict[str, Any], ...] = ()
    rows: Optional[Dict[str, Any]] = None
    comparison: Tuple[Dict[str, Any], ...] = ()
    floors: Tuple[Checked, ...] = ()
    drop: Optional[DropOutcome] = None
    worse: Tuple[Checked, ...] = ()
    published: Optional[Published] = None
    duration_seconds: Optional[float] = None
    schema_version: int = SCHEMA_VERSION

    @property
    def checks(self) -> Tuple[Checked, ...]:
        """Every gate held, in the order the job holds them: floors, drops, then margins."""
        return (*self.floors, *(self.drop.checked if self.drop else ()), *self.worse)

    @property
    def gated(self) -> bool:
        """Whether any gate was asked for (a drop gate with no earlier run counts: it passed)."""
        return bool(self.checks) or self.drop is not None

    @property
    def failed(self) -> Tuple[Checked, ...]:
        """The gates that failed (the job then exits 4, its outputs written)."""
        return tuple(c for c in self.checks if not c.passed)

    @property
    def figures(self) -> Tuple[Dict[str, Any], ...]:
        """The rows the run reports: the summary's, or compare's."""
        return self.comparison if self.command == "compare" else self.metrics

    @property
    def group_by(self) -> List[str]:
        """The segment columns, as the settings record them."""
        group_by = self.settings.get("group_by") or []
        return [group_by] if isinstance(group_by, str) else list(group_by)

    @property
    def output(self) -> Optional[str]:
        """The qualified output the run was published to (None before it is staged)."""
        return self.published.output if self.published else None

    def finished(self, published: Published, duration_seconds: float) -> RunResult:
        """This result as published: where, and how long the run took."""
        return replace(self, published=published, duration_seconds=duration_seconds)

    def to_json(self) -> Dict[str, Any]:
        """The manifest: plain JSON values, in the order a reader meets them."""
        if self.command == "compare":
            body: Dict[str, Any] = {
                "comparison": list(self.comparison),
                "non_inferiority": [c.to_json() for c in self.worse],
            }
        else:
            body = {
                "metrics": list(self.metrics),
                "rows": self.rows,
                "quality_gates": [c.to_json() for c in self.floors],
                "regression_gate": self.drop.to_json() if self.drop else None,
            }
        return {
            "schema_version": self.schema_version,
            "command": self.command,
            **body,
            "partition": self.partition,
            "settings": self.settings,
            "input_rows": self.input_rows,
            "spark_version": self.spark_version,
            "run": self.published.to_json() if self.published else None,
            "duration_seconds": self.duration_seconds,
        }

    @classmethod
    def from_json(cls, manifest: Mapping[str, Any], command: Optional[str] = None) -> RunResult:
        """A manifest as :meth:`to_json` wrote it, in any format of :data:`READS`.

        ``command`` is the marker's (``summary.json``: ``evaluate``, ``comparison.json``:
        ``compare``); a manifest that records its command says it itself, and one that does not
        (version 1's first markers) and is read without it is an ``evaluate`` marker.

        Raises
        ------
        InputDataError
            A manifest of a format this code does not read (written by a later ndcg-spark).
        """
        version = manifest.get("schema_version", 1)
        if version not in READS:
            raise InputDataError(
                f"manifest schema_version {version!r} is not one this ndcg-spark reads "
                f"({', '.join(map(str, READS))}); read it with the ndcg-spark that wrote it, or a later one"
            )
        get = manifest.get
        drop, run = get("regression_gate"), get("run")
        return cls(
            command or get("command") or "evaluate",
            dict(get("settings") or {}),
            dict(get("input_rows") or {}),
            get("spark_version"),
            get("partition"),
            tuple(get("metrics") or ()),
            get("rows"),
            tuple(get("comparison") or ()),
            tuple(Checked.from_json("floor", g) for g in get("quality_gates") or []),
            DropOutcome.from_json(drop) if isinstance(drop, dict) else None,
            tuple(Checked.from_json("worse", g) for g in get("non_inferiority") or []),
            Published.from_json(run) if isinstance(run, dict) else None,
            get("duration_seconds"),
            version,
        )


def gates_summary(result: RunResult) -> str:
    """A run's gates in a few words, as ``history`` shows them: ``-`` (none set), ``passed``, or
    ``failed:`` and which (``floor@10``, ``drop@10 of model=a``, ``worse@10``; a gate on a
    beyond-accuracy figure names it: ``floor:novelty@10``).

    Examples
    --------
    >>> floor = {"segment": {"model": "a"}, "k": 10, "passed": False}
    >>> gates_summary(RunResult.from_json({"quality_gates": [floor], "regression_gate": {"gates": []}}))
    'failed: floor@10 of model=a'
    """
    if not result.gated:
        return "-"
    failed = [f"{c.kind}{_metric_text(c)}@{k_label(c.k)}{of_segment(c)}" for c in result.failed]
    return "failed: " + ", ".join(failed) if failed else "passed"


def _metric_text(c: Checked) -> str:
    return "" if c.gate.metric == NDCG else f":{c.gate.metric}"


def of_segment(c: Checked) -> str:
    """`` of model=a`` for a gate held on a segment, empty for the whole table."""
    segment = segment_text(c)
    return f" of {segment}" if segment else ""


def segment_text(c: Checked) -> str:
    return ", ".join(f"{col}={v}" for col, v in c.segment.items())


def strict_json(record: Any, **kwargs) -> str:
    """JSON that strict parsers read: a float that is not a number (NaN, infinity) becomes null.

    Examples
    --------
    >>> strict_json({"mean_ndcg": float("nan"), "k": [1, float("inf")]})
    '{"mean_ndcg": null, "k": [1, null]}'
    """
    return json.dumps(_finite(record), allow_nan=False, default=str, **kwargs)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
