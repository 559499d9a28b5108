"""Iceberg and Delta tables in processes of their own: SIGKILLs at each commit of a publish, and
a run over Spark Connect. A file apart from ``tests/test_table_formats.py`` so that
pytest-xdist runs its JVMs beside that file's in-process tests (``--dist loadfile``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ndcg_spark.job.exits import EXIT_OK
from tests import formats
from tests.publishing import DATE, ROOT, WAIT, kill_group

pytestmark = [pytest.mark.formats, pytest.mark.job]

FORMAT = {"iceberg": "iceberg", "delta": "delta"}


# ----------------------------------------------------------------------------- processes of their own


def start_faulted(setup_name, base, cwd, family, step, first=False, model="good"):
    """The job on the setup's own metastore (under ``base``) in a process of its own, started in
    ``cwd``, paused at ``step`` (:mod:`tests.table_faults`)."""
    job = [*table_args_for(base, family, model), "--output-table-format", FORMAT[setup_name],
           *formats.conf_flags(setup_name, base)]  # fmt: skip
    cmd = [sys.executable, "-m", "tests.table_faults", str(base / "seen.json"), step, str(base / "paused"),
           *(["--first"] if first else []), "--", *job]  # fmt: skip
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONPATH": str(ROOT)}
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.Popen(cmd, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # fmt: skip


def table_args_for(base, family, model):
    inputs = base.parent / "inputs"
    return ["--recommendations", str(inputs / model), "--relevance", str(inputs / "rel"), "--format", "json",
            "--output-table", family, "--k", "3,5", "--run-date", DATE, "--conf", "spark.sql.shuffle.partitions=2"]  # fmt: skip


#: Where the kill chain's processes are SIGKILLed: after the per-user rows' commit, after the
#: summary's, right after the runs row (the night's flip); then a plain retry runs to its end.
KILLS = ("written:per_user", "written:summary", "published", "-")


@pytest.mark.process
@pytest.mark.parametrize(
    "setup_name, family",
    [("iceberg", "default.ndcg"), ("delta", "default.ndcg"), ("iceberg", "lake.ev.ndcg")],
    ids=["iceberg", "delta", "iceberg-jdbc-catalog"],
)
def test_sigkills_at_each_commit_leave_whole_nights_and_a_plain_retry_completes(setup_name, family, tmp_path):
    """A night published, then its re-runs SIGKILLed at each commit, each process started from
    another working directory: every reader sees the old night or the new one, whole; each next
    run breaks the dead run's lock (it lives with the tables, not in the working directory), and
    a plain retry completes with only its own rows kept. In the session catalog, and in Iceberg's
    JDBC catalog under its own name (``lake.ev.ndcg``: its views are the catalog's own)."""
    reason = formats.missing()
    if reason is not None:
        pytest.skip(reason)
    inputs = tmp_path / "inputs"
    make_inputs(inputs)
    base = tmp_path / "metastore"
    base.mkdir()
    seen, errs = [], []
    for i, step in enumerate(KILLS):
        proc = start_faulted(setup_name, base, tmp_path / f"cwd{i}", family, step, first=i == 0)
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


def make_inputs(folder: Path) -> None:
    """The in-process setup's inputs as JSON lines (``--format json``), written without a JVM."""
    recs = [(u, f"i{j}", float(10 - j)) for u in range(1, 31) for j in range(6)]
    rel = [(u, f"i{j}", float((u + j) % 4)) for u in range(1, 31) for j in range(0, 8, 2)]
    for name, rows, value in (("good", recs, "score"), ("rel", rel, "relevance")):
        (folder / name).mkdir(parents=True)
        lines = [json.dumps({"user_id": u, "item_id": i, value: v}) for u, i, v in rows]
        (folder / name / "part-0.json").write_text("\n".join(lines) + "\n")


CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


class ForegroundConnectServer:
    """Spark Connect's server through ``spark-submit`` in a process group of this test's: PySpark
    4.1's package ships the server's jar but not ``sbin/start-connect-server.sh``, which
    :class:`tests.cluster.ConnectServer` starts it with."""

    def __init__(self, base: Path, conf: dict):
        from tests import cluster as C

        self.port = C.free_port()
        cmd = [str(C.SPARK_SUBMIT), "--master", "local[2]", "--class", CONNECT_SERVER_CLASS,
               "--conf", f"spark.connect.grpc.binding.address={C.LOCALHOST}",
               "--conf", f"spark.connect.grpc.binding.port={self.port}", "--conf", "spark.ui.enabled=false",
               "--driver-java-options", f"-Dderby.system.home={base}",
               *[flag for key, value in conf.items() for flag in ("--conf", f"{key}={value}")], "spark-internal"]  # fmt: skip
        self.log = open(base / "server.log", "wb")  # noqa: SIM115 - closed by stop()
        env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_SUBMIT")}
        self.proc = subprocess.Popen(cmd, cwd=base, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)  # fmt: skip
        deadline = time.time() + C.START_TIMEOUT
        while not C.port_open(self.port):
            if self.proc.poll() is not None or time.time() > deadline:
                self.stop()
                raise AssertionError(f"the Connect server did not start:\n{(base / 'server.log').read_text()[-3000:]}")
            time.sleep(0.5)
        self.url = f"sc://localhost:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(60)
        self.log.close()


@pytest.mark.cluster
@pytest.mark.parametrize("setup_name", formats.SETUPS)
def test_a_run_over_spark_connect_publishes_in_the_format(setup_name, tmp_path):
    """The job as a Spark Connect client of a server configured with the format: its night
    published and replaced, the figures the folder output's (no lock: the client cannot reach the
    warehouse's file system)."""
    reason = formats.missing()
    if reason is not None:
        pytest.skip(reason)
    from tests import cluster as C

    if not any(C.SPARK_HOME.glob("jars/spark-connect_*.jar")):
        pytest.skip(C.NO_CONNECT_SERVER)
    inputs = tmp_path / "inputs"
    make_inputs(inputs)
    base = tmp_path / "server"
    base.mkdir()
    conf = {**formats.settings(setup_name, base), "spark.sql.shuffle.partitions": "2"}
    server = ForegroundConnectServer(base, conf)
    try:
        job = ["--recommendations", str(inputs / "good"), "--relevance", str(inputs / "rel"), "--format", "json",
               "--k", "3,5", "--run-date", DATE, "--output-table", "default.ndcg"]  # fmt: skip
        first = C.run_connect_job(server.url, [*job, "--output-table-format", FORMAT[setup_name]], tmp_path / "1.log")
        again = C.run_connect_job(server.url, job, tmp_path / "2.log")
        folder = C.run_connect_job(server.url, [*job[:-2], "--output", str(tmp_path / "folder")], tmp_path / "3.log")
    finally:
        server.stop()
    assert first["remote"] and again["remote"]
    means = {m["k"]: m["mean_ndcg"] for m in folder["manifest"]["metrics"]}
    for result in (first, again):
        assert {m["k"]: m["mean_ndcg"] for m in result["manifest"]["metrics"]} == means
    assert first["manifest"]["run"]["id"] != again["manifest"]["run"]["id"]
