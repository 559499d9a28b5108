"""One sink between a run and where its results go.

The pipeline (:mod:`ndcg_spark.job.pipeline`) computes named frames (``per_user``, ``summary``,
``rejected/recommendations``...), files (``report.html``) and a
:class:`~ndcg_spark.job.result.RunResult`, and hands them to a sink, which publishes them so
that readers only ever see whole results. The drop gate, the trend and ``history`` ask the sink
for earlier runs. There are two sinks:

* :class:`DirectorySink`: an output directory, with the staging folder, the journal, the marker
  and the lease of :mod:`ndcg_spark.job.publish` and :mod:`ndcg_spark.job.lease`;
* :class:`~ndcg_spark.job.tables.TableSink`: a family of catalog tables, each night's rows keyed
  by run id behind views, the runs row written last (:mod:`ndcg_spark.job.tables`).

:func:`sink_for` picks one from the config, once; nothing past it asks which kind it holds.
"""

from __future__ import annotations

from typing import Any, ContextManager, Dict, List, Optional, Protocol, Tuple

from pyspark.sql import DataFrame

from ndcg_spark.job import history, lease, publish, storage
from ndcg_spark.job.result import RunResult

RUN_DATE = history.RUN_DATE


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
    """Where a run's results go (:class:`DirectorySink`, :class:`~ndcg_spark.job.tables.TableSink`)."""

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


class DirectorySink:
    """An output directory: today's staging, journal, marker and lease (:mod:`ndcg_spark.job.publish`)."""

    def __init__(self, place: publish.Place):
        self.place, self.made = place, False

    @property
    def root(self) -> str:
        return self.place.files.root

    @property
    def shown(self) -> str:
        return self.place.files.shown

    def check(self, spark, config) -> None:
        publish.check_inputs(self.root, storage.input_paths(spark, config))
        publish.check_layout(self.place)
        self.made = not self.place.files.exists(self.root)

    def locked(self, run_id: str, output) -> ContextManager[lease.Lease]:
        return lease.locked(self.place, run_id, output.break_lock, output.lock_timeout)

    def recover(self) -> None:
        publish.recover(self.place)

    def stage(self, spark, run_id: str) -> publish.Staging:
        return publish.Staging(self.place, run_id, spark)

    def tidy(self) -> None:
        publish.tidy(self.place, self.made)

    def runs(self) -> history.DirectoryRuns:
        return history.DirectoryRuns(self.place.files)

    def texts(self, result: RunResult) -> Dict[str, str]:
        texts, place = {}, self.place
        for path in (place.marker, f"{place.marker_dir}/report.html"):
            text = place.files.read_text(path)
            if text is not None:
                texts[path.rsplit("/", 1)[-1]] = text
        return texts


def sink_for(spark, config) -> Sink:
    """The run's sink, made once from ``config.output``: a directory (its path made absolute and
    qualified with its file system) or a family of catalog tables."""
    storage.check_connect(spark, config)
    output = config.output
    if output.table is not None:
        from ndcg_spark.job.tables import TableSink

        return TableSink(spark, config.command, output)
    root = storage.qualify(spark, output.path)
    return DirectorySink(publish.Place(storage.files_for(spark, root), config.command, output.partition))


def runs_for(spark, config) -> Runs:
    """The runs ``ndcg-spark history`` shows: of ``config.output`` (a directory) or ``config.output_table``."""
    if config.output_table is not None:
        from ndcg_spark.job.tables import TableRuns

        return TableRuns(spark, config.output_table)
    return history.DirectoryRuns(storage.files_for(spark, config.output))
