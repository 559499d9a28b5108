"""Iceberg and Delta tables in processes of their own: SIGKILLs at each commit of a publish, and
a run over Spark Connect. A file apart from ``tests/test_table_formats.py`` so that
pytest-xdist runs its JVMs beside that file's in-process tests (``--dist loadfile``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests import formats, kill_chains
from tests.kill_chains import FORMAT, make_inputs
from tests.publishing import DATE

pytestmark = [pytest.mark.formats, pytest.mark.job]


# ----------------------------------------------------------------------------- processes of their own


@pytest.mark.process
@pytest.mark.parametrize("setup_name", formats.SETUPS)
def test_sigkills_at_each_commit_leave_whole_nights_and_a_plain_retry_completes(setup_name, tmp_path):
    """A night published in the session catalog, its re-runs SIGKILLed at each commit, then a plain
    retry (:func:`tests.kill_chains.kill_chain`): readers see a whole night at every kill, the next
    run breaks the dead run's lock wherever it is started from, the retry keeps only its own rows.
    (Iceberg's JDBC catalog under its own name, and Delta with its S3 log store: on S3,
    tests/test_table_formats_on_s3.py.)"""
    kill_chains.kill_chain(setup_name, "default.ndcg", tmp_path)


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
