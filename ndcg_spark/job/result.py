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

from dataclasses import dataclass, field, replace
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ndcg_spark.errors import InputDataError
from ndcg_spark.job.checks import Checked

#: The manifest format this code writes.
SCHEMA_VERSION = 1
#: The manifest formats this code reads.
READS = (1,)


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
        The config as run (:meth:`~ndcg_spark.job.config.EvaluateConfig.to_dict`).
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
