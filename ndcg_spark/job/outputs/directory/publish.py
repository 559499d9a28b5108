"""How a run's outputs become visible: layout, lock, staging, publish, marker.

A run owns one *place* in an output directory: the whole directory, or one partition of it
(``run_date=2026-11-21``). Its result is a set of tables (``per_user/``, ``summary/``, ...), files
beside the marker (``report.html``) and the marker itself (``summary.json``), whose presence says
that the tables it describes are complete. The protocol keeps that true however a run ends:

1. The output's layout (which command made it, which partition key) is recorded once, in
   ``DIR/_ndcg_spark/layout.json``; a run that does not fit it is refused before anything is read.
2. A lock per place, ``DIR/_ndcg_spark/locks/<place>.lock``, is created atomically before
   anything is written and held as a lease (:mod:`ndcg_spark.job.outputs.lease`); a second run of the
   same place is refused while the first lives, and breaks its lock once it is gone.
3. Everything is written under ``DIR/_ndcg_spark/staging/<place>/<run id>/``, away from the live
   paths. A run that stops here leaves the previous result as it was.
4. Publish: the run checks that it still holds its lock and was not stopped by a signal, then
   writes a journal (``publish.json``) into the staging folder; then the marker is removed, each
   table and file renamed into place (or the previous run's removed, when this run has none),
   and the new marker written last.
5. The next run of the place, holding the lock, finishes a publish whose journal is there (the
   staged result was complete) and deletes staging folders without one.

Every path the job writes is the output's, made absolute and qualified with its file system
once, before the lock (:func:`ndcg_spark.job.outputs.files.qualify`): a journal names absolute paths
only, and one that names a path outside the output it was found in is refused.

So a reader sees the previous result with its marker, the new one with its marker, or no marker.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, Optional

from ndcg_spark.errors import ConfigError
from ndcg_spark.job import interrupts
from ndcg_spark.job.config.targets import shown
from ndcg_spark.job.outputs import contract
from ndcg_spark.job.outputs.contract import STATE
from ndcg_spark.job.outputs.directory.layout import COMPANION_FILES, Place, record_layout
from ndcg_spark.job.outputs.files import Files
from ndcg_spark.job.result import strict_json

#: The folder of the job's own state inside an output directory.

# ----------------------------------------------------------------------------- staging and publish


#: The journal's name in a staging folder: written before the publish begins, read to finish it.
JOURNAL = "publish.json"


def staged_marker(journal: str) -> Dict[str, Any]:
    """The marker a journal (its text) will publish: the staged run's manifest."""
    return json.loads(json.loads(journal)["marker_text"])


def recover(place: Place) -> List[str]:
    """Finish or clear what earlier runs of this place left (call it holding the lock).

    A staging folder with a journal holds a complete result whose publish was interrupted: the
    publish is finished. One without a journal is a run that stopped before publishing: deleted.
    Returns the run ids whose publish was finished.
    """
    files, finished = place.files, []
    # A writer killed on an object store leaves its multipart uploads open (stored, billed and
    # shown in no listing); no live run writes under this place's staging while we hold its lock.
    files.abort_uploads(place.staging_root)
    for run_id in files.list(place.staging_root):
        folder = f"{place.staging_root}/{run_id}"
        journal = files.read_text(f"{folder}/{JOURNAL}")
        if journal is not None:
            _apply(files, check_journal(place, json.loads(journal), f"{folder}/{JOURNAL}"))
            finished.append(run_id)
        files.delete(folder)
    return finished


def check_journal(place: Place, journal: Dict[str, Any], path: str) -> Dict[str, Any]:
    """The journal, if every path it names is under the output it was found in; otherwise a
    ConfigError (exit 2): the output was moved or copied during a publish, or the journal was
    written with relative paths, and applying it could write into another output."""
    root = place.files.root.rstrip("/") + "/"
    paths = [journal.get("folder"), journal.get("marker")]
    paths += [p for move in journal.get("moves") or [] for p in move[1:]] + list(journal.get("removes") or [])
    outside = [p for p in paths if not isinstance(p, str) or not p.startswith(root)]
    if outside or journal.get("output", root[:-1]) != root[:-1]:
        raise ConfigError(
            f"the publish journal {shown(path)} names {outside[0] if outside else journal.get('output')!r}, which is not "
            f"under the output {shown(root[:-1])}: the output was moved or copied while a publish was interrupted; "
            "delete that staging folder to discard the run it holds"
        )
    return journal


class Staging:
    """Where one run writes its result before publishing it."""

    def __init__(self, place: Place, run_id: str, spark=None):
        self.place, self.run_id, self.spark = place, run_id, spark
        self.folder = f"{place.staging_root}/{run_id}"
        self.written: Dict[str, str] = {}

    def table(self, name: str) -> str:
        """The staging path of table ``name``; the table is published if written there."""
        self.written[name] = f"{self.folder}/tables/{name}"
        return self.written[name]

    def write(self, name: str, df) -> None:
        """Write the frame of table ``name`` (``per_user``, ``rejected/relevance``...) as Parquet
        into staging."""
        # Spark's default save mode stops if the folder is there: no earlier run wrote it.
        df.write.parquet(self.table(name))

    def read(self, name: str):
        """Table ``name`` as written (its rows read back from staging)."""
        return self.spark.read.parquet(self.written[name])

    def file(self, name: str, text: str) -> None:
        """A file published beside the marker (``report.html``)."""
        path = f"{self.folder}/files/{name}"
        self.place.files.write_text(path, text)
        self.written[name] = path

    def describe(self) -> Dict[str, Any]:
        """What the marker vouches for: each table's live path (relative to the output) and data
        files, and the files beside the marker."""
        root = self.place.files.root.rstrip("/") + "/"
        tables = {}
        for name in self.place.tables:
            if name in self.written:
                live = self.place.table(name)
                files = self.place.files.data_files(self.written[name])
                tables[name] = {"path": live[len(root) :], "files": files}
        companions = [n for n in COMPANION_FILES if n in self.written]
        return {"tables": tables, "files": companions}

    def publish(self, marker: Dict[str, Any], guard: Optional[Callable[[], None]] = None) -> None:
        """Put the staged result in place, the marker last (see the module's protocol).

        ``guard`` is called right before the journal is written: it raises to stop the run there
        (a signal received, the lock lost), which leaves the previous result as it was."""
        place, files = self.place, self.place.files
        record_layout(place)
        moves = [(n, self.written[n], place.table(n)) for n in place.tables if n in self.written]
        moves += [(n, self.written[n], f"{place.marker_dir}/{n}") for n in COMPANION_FILES if n in self.written]
        removes = [place.table(n) for n in place.tables if n not in self.written]
        removes += [f"{place.marker_dir}/{n}" for n in COMPANION_FILES if n not in self.written]
        journal = {
            "run_id": self.run_id,
            "output": files.root,
            "folder": self.folder,
            "marker": place.marker,
            "marker_text": strict_json(marker, indent=2) + "\n",
            "moves": moves,
            "removes": removes,
        }
        contract.at_step("staged")
        if guard is not None:
            guard()
        files.write_text(f"{self.folder}/{JOURNAL}", strict_json(journal, indent=2))
        _apply(files, journal)

    def discard(self) -> None:
        """Delete the staging folder of a run that did not publish (one whose publish began is
        left to the next run to finish), and the place's staging folder once empty."""
        files = self.place.files
        if not files.exists(f"{self.folder}/{JOURNAL}"):
            if interrupts.received() is not None:
                interrupts.tasks_ended()  # a cancelled task still writing would remake the folder
            files.delete(self.folder)
            if interrupts.received() is not None:
                _settle(files, self.folder)
        if not files.list(self.place.staging_root):
            files.delete(self.place.staging_root)


def _settle(files: Files, folder: str, quiet: float = 1.0, longest: float = 10.0) -> None:
    """Delete ``folder`` again while it comes back: the tasks of a job cancelled by a signal end
    on their own time, and one still writing makes its files anew after the first delete."""
    deadline, quiet_since = time.time() + longest, time.time()
    while time.time() < deadline and time.time() - quiet_since < quiet:
        time.sleep(0.2)
        if files.exists(folder):
            files.delete(folder)
            quiet_since = time.time()


def tidy(place: Place, made_output: bool) -> None:
    """Remove the empty folders a run made for its lock and staging, and the output folder if the
    run made it and it is empty: a run that published nothing into a new output leaves nothing."""
    files = place.files
    for path in (place.staging_root, files.path(STATE, "staging"), files.path(STATE, "locks"), files.path(STATE)):
        files.remove_if_empty(path)
    if made_output:
        files.remove_if_empty(files.root)


def _journal_there(files: Files, journal: Dict[str, Any]) -> None:
    """Go on only while the journal is there: a run that took the lock by force may have finished
    this publish (and published its own result since); then nothing more is written."""
    if not files.exists(f"{journal['folder']}/{JOURNAL}"):
        raise OSError(f"the publish of run {journal['run_id']} was finished by another run; nothing more was written")


def _vouched(journal: Dict[str, Any]) -> Dict[str, set]:
    """Each staged table's data files, as the marker the journal publishes lists them (Spark
    names them with its write's own id: no other run's file has one of these names)."""
    try:
        tables = json.loads(journal["marker_text"])["run"]["tables"]
        return {name: set(table["files"]) for name, table in tables.items()}
    except (KeyError, TypeError, ValueError):
        return {}


def _apply(files: Files, journal: Dict[str, Any]) -> None:
    """The publish itself; idempotent, so an interrupted one is finished by running it again."""
    files.delete(journal["marker"])
    contract.at_step("marker_removed")
    vouched = _vouched(journal)
    for name, source, target in journal["moves"]:
        if not files.exists(source):
            continue
        if name in vouched and files.exists(target) and set(files.data_files(target)) <= vouched[name]:
            # Both there, the target holding only this run's files: an object store's folder
            # rename (a copy per file, then deletes) died part way; the rest is moved in.
            files.move_into(source, target)
        else:
            files.delete(target)
            contract.at_step(f"removed:{name}")
            files.rename(source, target)
        contract.at_step(f"moved:{name}")
    _journal_there(files, journal)
    for path in journal["removes"]:
        files.delete(path)
    _journal_there(files, journal)
    files.write_text(journal["marker"], journal["marker_text"])
    contract.at_step("published")
    files.delete(journal["folder"])
