"""The contract between a run and where its results go: :class:`Sink`, its :class:`Stage` and
its :class:`Runs`, and the hook :func:`at_step` every kind calls at the named steps of a publish.

A command (:mod:`ndcg_spark.job.commands`) computes named frames (``per_user``, ``summary``,
``rejected/recommendations``...), files (``report.html``) and a
:class:`~ndcg_spark.job.result.RunResult`, and hands them to a sink, which publishes them so
that readers only ever see whole results. The drop gate, the trend and ``history`` ask the sink
for earlier runs. Each kind of output is a module of :mod:`ndcg_spark.job.outputs` (``directory``,
``catalog``) that owns its layout and where its lock lives; :mod:`ndcg_spark.job.outputs.kinds`
chooses one, once, and nothing past it asks which kind it holds.
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any, Callable, ContextManager, Dict, List, Optional, Protocol, Tuple

from pyspark.sql import DataFrame

from ndcg_spark.job.config.targets import RUN_DATE
from ndcg_spark.job.result import RunResult

#: The folder of the job's own state (layout, locks, staging) inside an output directory, and
#: beside a database's tables for a table family's locks.
STATE = "_ndcg_spark"
#: What each command writes: its tables, and its marker's name (its manifest's, in a table family).
COMMANDS = {
    "evaluate": (("per_user", "summary", "rejected/recommendations", "rejected/relevance"), "summary.json"),
    "compare": (("per_user", "comparison"), "comparison.json"),
}


def _no_fault(step: str) -> None:
    pass


#: Called at each named step of a publish (``staged``, ``marker_removed``, ``removed:NAME``,
#: ``moved:NAME``, ``dropped:MEMBER``, ``published``); the fault tests replace it to pause or fail
#: the run there. Every kind calls it through this module, so one replacement reaches them all.
at_step: Callable[[str], None] = _no_fault


def new_run_id() -> str:
    """A run's id: its start time (UTC, to the second) and 8 random hex digits."""
    return datetime.datetime.now(datetime.UTC).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:8]


class Stage(Protocol):
    """One run's result on its way to readers: written in full, then published at once."""

    def write(self, name: str, df: DataFrame) -> None:
        """Write the frame of the table ``name`` (invisible to readers until :meth:`publish`)."""

    def read(self, name: str) -> DataFrame:
        """Table ``name`` as this run wrote it."""

    def file(self, name: str, text: str) -> None:
        """A file published with the result (``report.html``)."""

    def describe(self) -> Dict[str, Any]:
        """What the published result holds (:class:`~ndcg_spark.job.result.Published`'s
        ``tables`` and ``files``)."""

    def publish(self, marker: Dict[str, Any], guard: Optional[Any] = None) -> None:
        """Make the result visible whole; ``guard()`` right before the point of no return."""

    def discard(self) -> None:
        """Remove what a run that did not publish wrote."""


class Runs(Protocol):
    """The earlier published runs a sink holds, as the drop gate, the trend and ``history`` read them."""

    root: str
    shown: str

    def key(self) -> str: ...

    def history(
        self, key: str = RUN_DATE, last: Optional[int] = None, before: Optional[str] = None
    ) -> List[Tuple[str, RunResult]]: ...

    def previous(
        self, before: str, key: str = RUN_DATE, *, passed_only: bool = False
    ) -> Tuple[Optional[str], List[str]]: ...

    def per_user(self, spark, value: str, key: str = RUN_DATE) -> DataFrame: ...

    def missing(self, value: str, key: str, result: RunResult) -> List[str]: ...

    def unfinished(self, key: str = RUN_DATE) -> List[Any]: ...


class Sink(Protocol):
    """Where a run's results go (:class:`~ndcg_spark.job.outputs.directory.folder.DirectorySink`,
    :class:`~ndcg_spark.job.outputs.catalog.tables.TableSink`)."""

    #: The output, qualified (a directory) or as named (a table family), as the manifest records it.
    root: str
    shown: str

    def check(self, spark, config) -> None:
        """Refuse (exit 2) a run that does not fit the output, before anything is read."""

    def locked(self, run_id: str, output) -> ContextManager[Any]:
        """Hold the run's place while the block runs; yields what ``broke`` a lock and ``ensure()``."""

    def recover(self) -> None:
        """Finish or clear what an earlier run of the place left (holding its lock)."""

    def stage(self, spark, run_id: str) -> Stage: ...

    def tidy(self) -> None:
        """Remove what the run made for itself only (empty folders)."""

    def runs(self) -> Runs: ...

    def texts(self, result: RunResult) -> Dict[str, str]:
        """The manifest and report as published (MLflow's artifacts), by name."""

    def note_failure(self, exit_code: int, message: str) -> None:
        """Note, for ``history``, that the run failed with ``exit_code`` and ``message`` (best
        effort: a note that cannot be written is left out, never a second error)."""


class Kind(Protocol):
    """One kind of output (a module of :mod:`ndcg_spark.job.outputs`, or any object with these
    functions): whether it serves an output, its sink, the runs ``history`` reads, and what it
    refuses before Spark starts."""

    def serves(self, path: Optional[str], table: Optional[str]) -> bool:
        """Whether an output given as ``path`` (``--output``) or ``table`` (``--output-table``) is of this kind."""

    def sink(self, spark, config) -> Sink:
        """The run's sink, made once."""

    def runs(self, spark, path: Optional[str], table: Optional[str]) -> Runs:
        """The runs ``history`` shows (``spark`` None: read without Spark, :meth:`without_spark`)."""

    def without_spark(self, path: Optional[str], table: Optional[str]) -> bool:
        """Whether ``history`` reads the runs without starting Spark."""

    def refuse_early(self, config) -> None:
        """Refuse, before Spark starts, a run the output would refuse (its layout, a live lock)."""
