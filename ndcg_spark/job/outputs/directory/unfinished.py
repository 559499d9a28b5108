"""The nights ``history`` finds besides the complete runs: what a run that did not finish left.

* **interrupted**: a staging folder with its journal (``publish.json``): the publish began and
  was cut short (a SIGKILL, a lost machine). The staged result is complete; its figures are the
  journal's marker, and the next run of the night completes the publish.
* **failed**: a run of the night that ended with an error (exit 1, 3 or 6) after the complete
  run, if any: it leaves a note, ``DIR/_ndcg_spark/failed/<key=value>.json``, naming its exit code
  and its one line. A later complete run of the night supersedes it.
* **running**: a live run holds the night's lock.
* **ended**: a dead run's lock or staging folder without a journal (a kill before the publish):
  the previous result stands, the next run clears what it left.
"""

from __future__ import annotations

import datetime
import json
import time
from dataclasses import dataclass
from typing import Any, Dict, List, Optional

from ndcg_spark.job.config.targets import Partition
from ndcg_spark.job.exits import EXIT_FAILURE, EXIT_INPUT, EXIT_SPARK_GONE
from ndcg_spark.job.outputs import lease
from ndcg_spark.job.outputs.directory.layout import STATE, Place
from ndcg_spark.job.outputs.directory.publish import JOURNAL, staged_marker
from ndcg_spark.job.outputs.files import LocalFiles
from ndcg_spark.job.result import RunResult, strict_json

#: The exit codes of a failed night (any failure, bad input, the JVM gone), noted for history.
FAILED_CODES = (EXIT_FAILURE, EXIT_INPUT, EXIT_SPARK_GONE)
INTERRUPTED = "the next run completes it (the figures above are its staged result)"


@dataclass(frozen=True)
class Night:
    """One night's unfinished run: its partition value, its status and what history says of it."""

    value: str
    status: str  # "interrupted", "failed", "running" or "ended"
    detail: str
    result: Optional[RunResult] = None  # interrupted: the staged result, as its marker will say

    def line(self, key: str) -> str:
        return f"{key}={self.value} {self.status}: {self.detail}"

    def to_json(self) -> Dict[str, Any]:
        return {"status": self.status, "detail": self.detail}


def failure_note(files, place_name: str) -> str:
    return files.path(STATE, "failed", f"{place_name}.json")


def record_failure(place: Place, exit_code: int, message: str) -> None:
    """Note a night's failed run of an output directory (the run's ``place``) for ``history`` (best
    effort: a note that cannot be written is left out, never a second error). Only in an output
    that already holds runs, so a failed run into a new output leaves nothing."""
    if place.partition is None or exit_code not in FAILED_CODES:
        return
    now = time.time()
    note = {
        "place": place.name,
        "failed": datetime.datetime.fromtimestamp(now, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "failed_epoch": now,
        "exit_code": exit_code,
        "error": message,
    }
    for files in (place.files, LocalFiles(place.files.root) if getattr(place.files, "local", False) else None):
        try:
            if files is not None and files.exists(files.path(STATE, "layout.json")):
                files.write_text(failure_note(files, place.name), strict_json(note) + "\n")
            return
        except Exception:  # noqa: BLE001 - the driver's JVM gone: a local output is written by Python
            continue


def unfinished(files, key: str) -> List[Night]:
    """The nights of partition ``key`` with an unfinished run, by value."""
    nights: Dict[str, Night] = {}
    prefix = f"{key}="
    for name in files.list(files.path(STATE, "staging")):
        if name.startswith(prefix):
            value = name[len(prefix) :]
            place = Place(files, "evaluate", Partition(key, value))
            for run_id in files.list(place.staging_root):
                journal = files.read_text(f"{place.staging_root}/{run_id}/{JOURNAL}")
                if journal is not None:
                    nights[value] = _interrupted(value, journal)
    for name in files.list(files.path(STATE, "locks")):
        if name.startswith(prefix) and name.endswith(".lock"):
            value = name[len(prefix) : -len(".lock")]
            if value in nights:
                continue
            place = Place(files, "evaluate", Partition(key, value))
            holder = lease.Lease(place, "").holder()
            if holder.state(time.time()) == "live":
                nights[value] = Night(value, "running", f"{holder.describe(time.time())} holds its lock")
            else:
                nights[value] = Night(
                    value, "ended", "its run ended before publishing (killed?); the next run breaks its lock"
                )
    for name in files.list(files.path(STATE, "failed")):
        if name.startswith(prefix) and name.endswith(".json"):
            value = name[len(prefix) : -len(".json")]
            night = _failed(files, key, value)
            if night is not None and value not in nights:
                nights[value] = night
    return [nights[v] for v in sorted(nights)]


def _interrupted(value: str, journal: str) -> Night:
    """A publish cut short, with its staged result read from its journal (if it reads)."""
    try:
        marker = staged_marker(journal)
        return Night(value, "interrupted", INTERRUPTED, RunResult.from_json(marker, "evaluate"))
    except (ValueError, KeyError, TypeError, AttributeError):
        return Night(value, "interrupted", "the next run completes it (its journal does not read as one; no figures)")


def _failed(files, key: str, value: str) -> Optional[Night]:
    """The failed run of a night, unless a complete run published after it."""
    place = Place(files, "evaluate", Partition(key, value))
    try:
        note = json.loads(files.read_text(failure_note(files, place.name)) or "")
    except ValueError:
        return None
    if not isinstance(note, dict) or not isinstance(note.get("failed_epoch", 0), (int, float)):
        return None
    published = files.modified(place.marker)
    if published is not None and published >= note.get("failed_epoch", 0):
        return None
    stands = "; the previous result stands" if published is not None else ""
    return Night(value, "failed", f"exit {note.get('exit_code')} at {note.get('failed')}: {note.get('error')}{stands}")
