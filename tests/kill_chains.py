"""SIGKILL chains of the job publishing Iceberg and Delta tables, each run in a process of its own
(:mod:`tests.table_faults`), for ``tests/test_table_format_processes.py`` (the tables on this
disk) and ``tests/test_table_formats_on_s3.py`` (on an S3 store): two files, so that
pytest-xdist runs them on two workers (``--dist loadfile``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ndcg_spark.job.exits import EXIT_OK
from tests import formats
from tests.publishing import DATE, ROOT, WAIT, kill_group

FORMAT = {"iceberg": "iceberg", "delta": "delta"}

#: Where the kill chain's processes are SIGKILLed: after the per-user rows' commit, after the
#: summary's, right after the runs row (the night's flip); then a plain retry runs to its end.
KILLS = ("written:per_user", "written:summary", "published", "-")


def table_args_for(base, family, model):
    inputs = base.parent / "inputs"
    return ["--recommendations", str(inputs / model), "--relevance", str(inputs / "rel"), "--format", "json",
            "--output-table", family, "--k", "3,5", "--run-date", DATE, "--conf", "spark.sql.shuffle.partitions=2"]  # fmt: skip


def start_faulted(setup_name, base, cwd, family, step, first=False, model="good", store=None):
    """The job on the setup's own metastore (under ``base``) in a process of its own, started in
    ``cwd``, paused at ``step`` (:mod:`tests.table_faults`); its tables on ``store`` (S3) if given."""
    job = [*table_args_for(base, family, model), "--output-table-format", FORMAT[setup_name],
           *formats.conf_flags(setup_name, base, store)]  # fmt: skip
    cmd = [sys.executable, "-m", "tests.table_faults", str(base / "seen.json"), step, str(base / "paused"),
           *(["--first"] if first else []), "--", *job]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT)}
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def make_inputs(folder: Path) -> None:
    """The in-process setup's inputs as JSON lines (``--format json``), written without a JVM."""
    recs = [(u, f"i{j}", float(10 - j)) for u in range(1, 31) for j in range(6)]
    rel = [(u, f"i{j}", float((u + j) % 4)) for u in range(1, 31) for j in range(0, 8, 2)]
    for name, rows, value in (("good", recs, "score"), ("rel", rel, "relevance")):
        (folder / name).mkdir(parents=True)
        lines = [json.dumps({"user_id": u, "item_id": i, value: v}) for u, i, v in rows]
        (folder / name / "part-0.json").write_text("\n".join(lines) + "\n")


def kill_chain(setup_name: str, family: str, tmp_path: Path, store=None) -> None:
    """A night published, then its re-runs SIGKILLed at each of ``KILLS``, each process started
    from another working directory: every reader sees the old night or the new one, whole; each
    next run breaks the dead run's lock (it lives with the tables, not in the working directory),
    and a plain retry completes with only its own rows kept. With ``store``, the tables (and so
    the locks) are on it and none is on this disk."""
    reason = formats.missing()
    if reason is not None:
        pytest.skip(reason)
    inputs = tmp_path / "inputs"
    make_inputs(inputs)
    base = tmp_path / "metastore"
    base.mkdir()
    top = "lake" if family.startswith("lake.") else "warehouse"  # the tables' folder on the store
    seen, errs, dead_locks = [], [], []
    for i, step in enumerate(KILLS):
        proc = start_faulted(setup_name, base, tmp_path / f"cwd{i}", family, step, first=i == 0, store=store)
        if step == "-":
            out, err = proc.communicate(timeout=WAIT)
            assert proc.returncode == 0, err[-3000:]
        else:
            deadline = time.time() + WAIT
            while not (base / "paused").exists():
                if proc.poll() is not None or time.time() > deadline:
                    kill_group(proc) if proc.poll() is None else None
                    pytest.fail(f"the job did not reach {step}: {proc.stderr.read()[-3000:]}")
                time.sleep(0.2)
            kill_group(proc)
            err = proc.stderr.read()
            (base / "paused").unlink()
            if store is not None:  # the dead run's lock, on the store beside its tables
                dead_locks.append([k for k in store.keys(f"{top}/") if "/locks/" in k and k.endswith(".lock")])
        errs.append(err)
        seen.append(json.loads((base / "seen.json").read_text()))
        assert not (tmp_path / f"cwd{i}" / "spark-warehouse").exists()  # nothing in the working directory
    first = seen[0]
    assert first["before"] == {} and first["first"] == EXIT_OK
    night1 = first["paused"]  # at the first kill: the first night, whole
    for record in seen:
        for at in ("before", "paused", "after"):
            if at not in record or not record[at]:
                continue
            view = record[at]
            ((date, shown, n),) = view["per_user"]
            assert view["summary"] == [[date, shown, 2]] and view["runs"] == [[date, shown, 1]] and n == 60, (at, view)
            assert view["figures"] == night1["figures"]
    # The dead runs' locks were broken by the next run, wherever it was started from.
    for err in errs[1:]:
        assert "breaking the lock of run" in err, err[-2000:]
    # Killed before the flip: the old night shown; right after it: the new one.
    assert seen[1]["before"]["runs"] == night1["runs"] and seen[2]["before"]["runs"] == night1["runs"]
    assert seen[3]["before"]["runs"] != night1["runs"]
    # The retry kept only its own rows.
    final = seen[3]["after"]
    (current,) = {r[1] for r in final["runs"]}
    for member in ("per_user", "summary", "runs"):
        assert final[f"{member}_data"] == [f"run_date={DATE}/run_id={current}"], member
    if store is not None:  # the tables' files and the locks on the store, none on this disk
        keys = store.keys(f"{top}/")
        assert any("ndcg_per_user_data/" in k for k in keys), keys[:20]
        assert len(dead_locks) == 3 and all(len(locks) == 1 for locks in dead_locks), dead_locks
        assert [k for k in keys if "/locks/" in k and k.endswith(".lock")] == []  # the retry released its own
        assert not list(base.glob("**/*.parquet")) and not (base / "warehouse").exists()
