"""A run's lock on its place, held as a lease: renewed while the run lives, broken by the next run
once its holder is gone.

The lock, ``DIR/_ndcg_spark/locks/<place>.lock``, is created atomically (an exclusive create) and
never rewritten: it names its run (run id, host, process id, user, start time, the machine's
identity). Beside it each holder keeps its own lease, ``<place>.<run id>.lease``, which a thread
of the driver rewrites every :func:`renew_every` seconds with the time of the renewal. A holder
never writes anything another run owns, so a late renewal cannot overwrite the lock of a run that
took over.

A lock whose holder is gone is broken by the next run without being asked, with one line on
stderr (and the holder in the manifest's ``run.broke_lock_of``):

* on the same machine (host name, boot and process namespace) when the holder's process is gone;
* on any machine when its lease has not been renewed for the holder's ``lock_timeout`` seconds.

``--break-lock`` also breaks a lease that missed three renewals (a run stalled or gone on
another machine); ``--break-lock force`` breaks any lock, a live run's included. A lock with a
fresh lease is otherwise never taken. Where the store cannot create a file exclusively (S3A
before Hadoop 3.4.2) a run reads its lock back :data:`SETTLE` seconds after putting it and stops
if another run's put came last. A run checks that it still holds its lock right before its
publish (:meth:`Lease.ensure`); one that lost it stops there (exit 5), touching nothing live.
"""

from __future__ import annotations

import datetime
import getpass
import json
import os
import socket
import sys
import threading
import time
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional

from ndcg_spark.job.config.targets import FORCE, LOCK_TIMEOUT  # lock_timeout and break_lock's values
from ndcg_spark.job.exits import OutputLocked
from ndcg_spark.job.outputs.files import LocalFiles
from ndcg_spark.job.result import strict_json

#: Renewals a lease may miss before ``--break-lock`` (without force) breaks it.
MISSED = 3
#: Seconds a run waits before reading back a lock it put without an exclusive create: longer than
#: a competitor's look-then-put takes, unless that competitor stalls between the two.
SETTLE = 2.0


def renew_every(timeout: float) -> float:
    """Seconds between renewals of a lease: every 30 s, more often for a short ``lock_timeout``."""
    return max(0.5, min(30.0, timeout / 5))


def _read_first(path: str) -> Optional[str]:
    try:
        with open(path, encoding="ascii") as fh:
            return fh.read().strip() or None
    except OSError:
        return None


def machine() -> Dict[str, Any]:
    """This process's machine: host name, boot id and process-id namespace (Linux), so two
    containers that share a host name are not taken for one machine."""
    try:
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        namespace = None
    return {
        "host": socket.gethostname(),
        "boot_id": _read_first("/proc/sys/kernel/random/boot_id"),
        "pid_ns": namespace,
    }


def _iso(epoch: float) -> str:
    return datetime.datetime.fromtimestamp(epoch, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _pid_running(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it is there
        return True
    return True


class Holder:
    """The run a lock names, read from the lock and its lease."""

    def __init__(self, text: Optional[str], lease: Optional[str], modified: Optional[float]):
        try:
            self.record = json.loads(text or "")
            if not isinstance(self.record, dict):
                raise ValueError
        except ValueError:
            self.record = {}
        try:
            renewed = json.loads(lease or "").get("renewed_epoch")
        except (ValueError, AttributeError):
            renewed = None
        started = self.record.get("started_epoch")
        times = [t for t in (renewed, started) if isinstance(t, (int, float))]
        if not times and isinstance(modified, (int, float)):  # no record to read: the lock's own time
            times = [modified]
        #: When the holder last showed it was alive (None: cannot tell).
        self.renewed = max(times) if times else None
        self.timeout = self.record.get("lock_timeout") or LOCK_TIMEOUT

    @property
    def run_id(self) -> Optional[str]:
        return self.record.get("run_id")

    def on_this_machine(self) -> bool:
        here, r = machine(), self.record
        return all(r.get(key) == here[key] for key in ("host", "boot_id", "pid_ns")) and r.get("host") is not None

    def state(self, now: float) -> str:
        """``gone`` (its process is not running here, or its lease expired), ``stalled`` (it
        missed three renewals) or ``live``."""
        if self.on_this_machine() and not _pid_running(self.record.get("pid")):
            return "gone"
        age = None if self.renewed is None else now - self.renewed
        if age is None or age > self.timeout:
            return "gone"
        return "stalled" if age > MISSED * renew_every(self.timeout) else "live"

    def describe(self, now: Optional[float] = None) -> str:
        """Which run, where and since when (and when its lease was last renewed)."""
        r = self.record
        try:
            text = f"run {r['run_id']} (pid {r['pid']} on {r['host']}, user {r['user']}, started {r['started']}"
        except KeyError:
            return "a run that left no owner record"
        if now is not None and self.renewed is not None:
            text += f", lease renewed {max(0, round(now - self.renewed))} s ago"
        return text + ")"


class Lease:
    """This run's hold on a place's lock (:func:`locked`)."""

    def __init__(self, place, run_id: str, timeout: float = LOCK_TIMEOUT):
        self.place, self.files, self.run_id, self.timeout = place, place.files, run_id, float(timeout)
        self.lost_to: Optional[str] = None
        #: The holder whose lock this run broke to take it (in words), or None.
        self.broke: Optional[str] = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        # The renewing thread and ensure() (the main thread, right before a publish) each renew:
        # one at a time, or both write the lease's one temporary file and one's move finds it gone.
        self._renewal = threading.Lock()

    @property
    def path(self) -> str:
        return self.place.lock_path

    def lease_path(self, run_id: str) -> str:
        return self.path[: -len(".lock")] + f".{run_id}.lease"

    def holder(self) -> Holder:
        text = self.files.read_text(self.path)
        run_id = Holder(text, None, None).run_id
        lease = self.files.read_text(self.lease_path(run_id)) if run_id else None
        return Holder(text, lease, self.files.modified(self.path))

    def _owner(self) -> str:
        now = time.time()
        return strict_json(
            {
                "run_id": self.run_id,
                "command": self.place.command,
                "place": self.place.name,
                "output": self.files.root,
                **machine(),
                "pid": os.getpid(),
                "user": getpass.getuser(),
                "started": _iso(now),
                "started_epoch": now,
                "lock_timeout": self.timeout,
            }
        )

    def acquire(self, break_lock: Any = False) -> Optional[str]:
        """Take the lock; the holder whose lock was broken (in words), or None. Raises
        :class:`OutputLocked` when a live run holds it."""
        files, where = self.files, f"output {self.files.shown} ({self.place.name})"
        broken = None
        for _ in range(3):
            if files.create_new(self.path, self._owner()):
                if not files.exclusive and not self._kept():
                    holder = self.holder()
                    raise OutputLocked(self._refusal(where, holder, time.time(), "live", bool(break_lock)))
                self.renew()
                return broken
            text = files.read_text(self.path)
            if text is None:  # released between the two calls
                continue
            holder, now = self.holder(), time.time()
            state = holder.state(now)
            force = break_lock == FORCE
            if state == "live" and not force or state == "stalled" and not (break_lock or force):
                raise OutputLocked(self._refusal(where, holder, now, state, bool(break_lock)))
            if files.read_text(self.path) != text:  # another run broke it first
                continue
            broken = holder.describe(now)
            why = {"gone": "its run is gone", "stalled": "its lease is stalled", "live": "forced"}[state]
            print(f"ndcg-spark: breaking the lock of {broken} on {where}: {why}", file=sys.stderr, flush=True)
            files.delete(self.path)
            if holder.run_id:
                files.delete(self.lease_path(holder.run_id))
        raise OutputLocked(f"{where} was locked again by {self.holder().describe(time.time())}")

    def _kept(self) -> bool:
        """Where the store cannot create exclusively (S3A before Hadoop 3.4.2: a look, then a
        put), two runs started together may both have put the lock; the last put stands. Each
        reads it back once any put begun alongside its own has landed: the one not named stops."""
        time.sleep(SETTLE)
        return Holder(self.files.read_text(self.path), None, None).run_id == self.run_id

    def _refusal(self, where: str, holder: Holder, now: float, state: str, asked: bool) -> str:
        line = f"{where} is locked by {holder.describe(now)}, "
        if state == "stalled":
            return line + f"whose lease is older than {MISSED} renewals; run again with --break-lock to take it"
        line += "which is running"
        if asked:
            return line + "; --break-lock does not take a live run's lock (--break-lock force does, see docs/job.md)"
        return line + f"; its lock is broken by itself once its lease is {round(holder.timeout)} s old"

    def renew(self) -> bool:
        """Renew the lease if the lock is still this run's; whether it is."""
        with self._renewal:
            return self._renew()

    def _renew(self) -> bool:
        holder = Holder(self.files.read_text(self.path), None, None)
        if holder.run_id != self.run_id:
            self.lost_to = self.lost_to or holder.describe()
            return False
        now = time.time()
        lease = {"run_id": self.run_id, "renewed": _iso(now), "renewed_epoch": now}
        self.files.write_text(self.lease_path(self.run_id), strict_json(lease) + "\n")
        return True

    def ensure(self) -> None:
        """Right before a publish: renew, or stop (exit 5) when the lock is no longer this run's."""
        if self.lost_to is not None or not self.renew():
            raise self.lost()

    def lost(self) -> OutputLocked:
        return OutputLocked(
            f"output {self.files.shown} ({self.place.name}): this run lost its lock to {self.lost_to} and "
            "stopped, writing nothing more: the output is as that run has it"
        )

    def start(self) -> None:
        self._thread = threading.Thread(target=self._renewing, name="ndcg-spark-lease", daemon=True)
        self._thread.start()

    def _renewing(self) -> None:
        interval = renew_every(self.timeout)
        while not self._stop.wait(interval):
            try:
                if not self.renew():
                    return
            except Exception:  # noqa: BLE001 - a failed renewal is retried; ensure() decides before the publish
                pass

    def release(self) -> None:
        """Stop renewing, and remove the lock and the lease if they are still this run's."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        try:
            self._release(self.files)
        except Exception:
            # The driver's JVM gone (killed, out of memory): a local output's lock is released by Python.
            if not getattr(self.files, "local", False):
                raise
            self._release(LocalFiles(self.files.root))

    def _release(self, files) -> None:
        if Holder(files.read_text(self.path), None, None).run_id == self.run_id:
            files.delete(self.path)
        files.delete(self.lease_path(self.run_id))


def refuse_if_held(place, break_lock: Any = False) -> None:
    """Raise the :class:`OutputLocked` that :meth:`Lease.acquire` would for ``place``'s holder (a
    live one, or a stalled one without ``--break-lock``), without taking the lock: read before
    Spark starts, so a scheduler's second run is refused in a second."""
    probe = Lease(place, "")
    if place.files.read_text(probe.path) is None:
        return
    holder, now = probe.holder(), time.time()
    state = holder.state(now)
    if state == "live" and break_lock != FORCE or state == "stalled" and not break_lock:
        where = f"output {place.files.shown} ({place.name})"
        raise OutputLocked(probe._refusal(where, holder, now, state, bool(break_lock)))


@contextmanager
def locked(place, run_id: str, break_lock: Any = False, timeout: float = LOCK_TIMEOUT) -> Iterator[Lease]:
    """Hold the place's lock while the block runs, renewing its lease; the lock is released
    however the block ends. A failure of a run that lost its lock is reported as that loss."""
    lease = Lease(place, run_id, timeout)
    lease.broke = lease.acquire(break_lock)
    lease.start()
    try:
        yield lease
    except BaseException as exc:
        if lease.lost_to is None and not _still_held(lease):
            lease.lost_to = lease.holder().describe(time.time())
        if lease.lost_to is not None:
            raise lease.lost() from exc
        raise
    finally:
        lease.release()


def _still_held(lease: Lease) -> bool:
    try:
        return Holder(lease.files.read_text(lease.path), None, None).run_id == lease.run_id
    except Exception:  # noqa: BLE001 - cannot tell: report the run's own failure
        return True
