"""An output directory as a kind of output: its sink (:class:`DirectorySink`: the layout, the
lease, the staging, journal and marker of :mod:`.publish`), its runs (:mod:`.runs`), and the
refusals that need no Spark.

A local output (a ``file:`` URI, or a plain path that holds the job's state folder while no
cluster's default file system could be meant) is read by Python before the JVM starts, so a
scheduler hears in a second what the run would say after Spark started: a run that does not fit
its layout (a ``--run-date`` into an undated output, say; exit 2) and a live run's lock (exit 5).
Anything else (an output on HDFS or an object store) is checked once Spark runs.
"""

from __future__ import annotations

import os
from typing import Any, ContextManager, Dict, Optional
from urllib.parse import urlparse

from ndcg_spark.job.outputs import lease
from ndcg_spark.job.outputs.directory import publish
from ndcg_spark.job.outputs.directory.layout import STATE, Place, check_inputs, check_layout
from ndcg_spark.job.outputs.directory.runs import DirectoryRuns, reads_without_spark
from ndcg_spark.job.outputs.directory.unfinished import record_failure
from ndcg_spark.job.outputs.files import LocalFiles, files_for, input_paths, qualify
from ndcg_spark.job.result import RunResult


class DirectorySink:
    """An output directory: today's staging, journal, marker and lease (:mod:`.publish`)."""

    def __init__(self, place: Place):
        self.place, self.made = place, False

    @property
    def root(self) -> str:
        return self.place.files.root

    @property
    def shown(self) -> str:
        return self.place.files.shown

    def check(self, spark, config) -> None:
        check_inputs(self.root, input_paths(spark, config))
        check_layout(self.place)
        self.made = not self.place.files.exists(self.root)

    def locked(self, run_id: str, output) -> ContextManager[lease.Lease]:
        return lease.locked(self.place, run_id, output.break_lock, output.lock_timeout)

    def recover(self) -> None:
        publish.recover(self.place)

    def stage(self, spark, run_id: str) -> publish.Staging:
        return publish.Staging(self.place, run_id, spark)

    def tidy(self) -> None:
        publish.tidy(self.place, self.made)

    def runs(self) -> DirectoryRuns:
        return DirectoryRuns(self.place.files)

    def texts(self, result: RunResult) -> Dict[str, str]:
        texts, place = {}, self.place
        for path in (place.marker, f"{place.marker_dir}/report.html"):
            text = place.files.read_text(path)
            if text is not None:
                texts[path.rsplit("/", 1)[-1]] = text
        return texts

    def note_failure(self, exit_code: int, message: str) -> None:
        record_failure(self.place, exit_code, message)


# ----------------------------------------------------------------------------- the kind


def serves(path: Optional[str], table: Optional[str]) -> bool:
    """An output directory: any ``--output`` (the kinds before it in
    :data:`~ndcg_spark.job.outputs.kinds.KINDS` claim theirs first)."""
    return path is not None


def sink(spark, config) -> DirectorySink:
    """The directory's sink: its path made absolute and qualified with its file system, once."""
    root = qualify(spark, config.output.path)
    return DirectorySink(Place(files_for(spark, root), config.command, config.output.partition))


def runs(spark, path: Optional[str], table: Optional[str]) -> DirectoryRuns:
    return DirectoryRuns(files_for(spark, path))


def without_spark(path: Optional[str], table: Optional[str]) -> bool:
    return reads_without_spark(path)


def local_root(config) -> Optional[str]:
    """``file:/abs/path`` of the output when it is surely on this machine's file system, else None."""
    path, master = config.output.path, config.master
    if path.startswith("file:"):
        return f"file:{os.path.normpath(urlparse(path).path)}"
    if "://" in path:
        return None
    local = os.path.abspath(path)
    # Under spark-submit, or with a cluster's master, a plain path is on the default file system.
    on_cluster = os.environ.get("SPARK_ENV_LOADED") or (master and not master.startswith("local"))
    if on_cluster and not config.remote or not os.path.isdir(os.path.join(local, STATE)):
        return None
    return f"file:{local}"


def refuse_early(config: Any) -> None:
    """Refuse, before Spark starts, a run that a local output's layout (exit 2) or live lock
    (exit 5) would refuse."""
    root = local_root(config)
    if root is None:
        return
    place = Place(LocalFiles(root), config.command, config.output.partition)
    check_layout(place)
    lease.refuse_if_held(place, config.output.break_lock)
