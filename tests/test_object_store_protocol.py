"""What the publish protocol does for object stores, held on the local file system in this process
(the same code the S3 runs take: tests/test_object_store.py runs them on a real S3 API).

* A folder rename that an object store was doing file by file when its run died leaves part of
  the table in place and the rest in staging: the retry moves the rest in, loses no file, and the
  night is whole.
* Where the store cannot create the lock exclusively (S3A before Hadoop 3.4.2), a run reads its
  lock back after a settle and stops when another run's put came last.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from ndcg_spark.job import run
from ndcg_spark.job.config.targets import Partition
from ndcg_spark.job.exits import EXIT_FAILURE, EXIT_OK
from ndcg_spark.job.outputs import contract, lease
from ndcg_spark.job.outputs.directory.layout import Place
from ndcg_spark.job.outputs.files import LocalFiles
from tests.publishing import DATE, PLACE, args, check_invariant

pytestmark = pytest.mark.job


def test_a_folder_rename_half_done_by_an_object_store_is_finished_by_the_retry(
    spark, inputs, published, tmp_path, monkeypatch
):
    out = tmp_path / "out"
    shutil.copytree(published, out)
    good = {m["k"]: m["mean_ndcg"] for m in check_invariant(spark, out)["metrics"]}
    moved = []

    def dies_mid_rename(step):
        # What S3A's rename leaves when killed: the data files copied into place and deleted from
        # staging, the _SUCCESS object not yet.
        if step != "removed:per_user":
            return
        (staging,) = (out / "_ndcg_spark" / "staging" / PLACE).iterdir()
        source, target = staging / "tables" / "per_user", out / "per_user" / PLACE
        target.mkdir(parents=True)
        for part in sorted(source.glob("part-*")):
            part.rename(target / part.name)
            moved.append(part.name)
        assert (source / "_SUCCESS").exists()
        raise OSError("killed while renaming per_user")

    monkeypatch.setattr(contract, "at_step", dies_mid_rename)
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_FAILURE
    assert moved and check_invariant(spark, out) is None  # no manifest: being published

    recovered = []

    def look_once_recovered(step):
        # The retry finished the killed run's publish before staging its own: that night is
        # whole, every file its manifest names in place (a delete of the half-moved table, then
        # a rename of the rest, would have lost the data files).
        if step == "staged":
            recovered.append(check_invariant(spark, out))

    monkeypatch.setattr(contract, "at_step", look_once_recovered)
    assert run(args(inputs, out, "worse", "--run-date", DATE)) == EXIT_OK
    assert recovered[0] is not None and set(moved) <= set(recovered[0]["run"]["tables"]["per_user"]["files"])
    marker = check_invariant(spark, out)  # every file the manifest names is there, with its figures
    worse = {m["k"]: m["mean_ndcg"] for m in marker["metrics"]}
    assert all(worse[k] < good[k] for k in good)
    assert not (out / "_ndcg_spark" / "staging").exists()


class _LookThenPut(LocalFiles):
    """A store whose create is a look then a put (S3A before 3.4.2): ``rival`` puts its lock
    between this run's put and its read-back, the last put standing."""

    exclusive = False

    def __init__(self, root: str, rival=None):
        super().__init__(root)
        self.rival = rival

    def create_new(self, path: str, text: str) -> bool:
        if self.exists(path):
            return False
        self.write_text(path, text)
        if self.rival is not None:
            self.write_text(path, json.dumps(self.rival))
        return True


def _rival(now: float) -> dict:
    return {"run_id": "20261121T020001Z-0badf00d", "pid": 4242, "host": "worker-9", "user": "etl",
            "started": "2026-11-21T02:00:01Z", "started_epoch": now, "lock_timeout": 300}  # fmt: skip


def test_where_the_lock_is_a_look_then_a_put_the_run_whose_put_came_last_holds_it(tmp_path, monkeypatch):
    import time

    monkeypatch.setattr(lease, "SETTLE", 0.05)
    root = str(tmp_path / "out")
    place = Place(_LookThenPut(root, _rival(time.time())), "evaluate", Partition("run_date", DATE))
    held = lease.Lease(place, "tonight")
    with pytest.raises(lease.OutputLocked) as refused:
        held.acquire()
    assert "is locked by run 20261121T020001Z-0badf00d (pid 4242 on worker-9, user etl" in str(refused.value)
    assert json.loads(Path(place.lock_path).read_text())["run_id"] == "20261121T020001Z-0badf00d"
    assert not list(Path(place.lock_path).parent.glob("*.tonight.lease"))  # it wrote nothing of its own

    alone = Place(_LookThenPut(str(tmp_path / "alone")), "evaluate", Partition("run_date", DATE))
    held = lease.Lease(alone, "tonight")
    assert held.acquire() is None
    assert json.loads(Path(alone.lock_path).read_text())["run_id"] == "tonight"
    held.release()
    assert not Path(alone.lock_path).exists()
