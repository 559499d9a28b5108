"""The job on a real Spark standalone cluster and on Spark Connect, with faults, and its determinism.

One module-scoped stack (``tests/cluster.py``) serves every test: a standalone master and two
workers (1 core, 1 GiB each) and a Spark Connect server, all from the pip-installed pyspark,
bound to 127.0.0.1 on ports chosen at run time, and stopped by their own process ids. The
JVM start-ups overlap: the Connect server and a local ``ndcg-spark`` run start while the cluster
comes up, and the clean cluster run is submitted as soon as it is up.

The reference is the job run in this process on the suite's ``spark`` fixture (local[2], 4
shuffle partitions). Per-user figures must be identical to the last bit; summary means agree
to 1e-12 (a mean's floating-point sum depends on the order partial sums are merged in).

Marked ``cluster``; ``-m "not cluster"`` skips them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

import pytest
from chispa import assert_approx_df_equality, assert_df_equality

from tests import cluster as C

pytestmark = [
    pytest.mark.cluster,
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="uses /proc to find executor processes"),
]

#: What every run computes (the same flags on every engine).
JOB_FLAGS = ["--k", "5,10,20", "--gain", "exponential"]

#: spark-submit settings of the cluster runs: the documented line plus a live UI on a random
#: port (the fault tests watch it) and one task per input file (6 files -> 6 tasks per scan).
CLUSTER_CONF = {
    "spark.ui.enabled": "true",
    "spark.ui.port": "0",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.files.maxPartitionBytes": "1m",
}


# ----------------------------------------------------------------------------- the stack


@dataclass
class Stack:
    base: Path
    python: Path  # the interpreter without the editable install (see C.isolated_python)
    pyfiles: Path
    recs: Path
    rel: Path
    recs_one_file: Path
    rel_one_file: Path
    cluster: C.StandaloneCluster
    connect: C.ConnectServer
    local_runs: Dict[str, LocalRun] = field(default_factory=dict)
    clean: Optional[tuple] = None  # (Submission, output dir) of the clean cluster run

    def job_args(self, output: Path) -> List[str]:
        return ["--recommendations", str(self.recs), "--relevance", str(self.rel), "--output", str(output), *JOB_FLAGS]

    def submit_job(self, name: str) -> tuple[C.Submission, Path]:
        """``spark-submit --py-files ndcg_spark.zip evaluate_ndcg.py ...`` from a directory where
        the package is not importable, with the interpreter that cannot see the checkout."""
        work = self.base / "submit" / name
        work.mkdir(parents=True)
        shutil.copy(C.ROOT / "jobs" / "evaluate_ndcg.py", work / "evaluate_ndcg.py")
        out = work / "out"
        cmd = C.submit_command(
            self.cluster.url, self.pyfiles, work / "evaluate_ndcg.py", self.job_args(out), conf=CLUSTER_CONF
        )
        return C.start_submit(cmd, work, self.submit_env(), work / "driver.log"), out

    def submit_env(self) -> Dict[str, str]:
        """spark-submit's environment; first replaces any worker a fault test killed."""
        self.cluster.ensure_workers()
        env = self.cluster.env()
        env.pop("SPARK_DAEMON_MEMORY")
        env.pop("SPARK_DAEMON_JAVA_OPTS")
        env["SPARK_CONF_DIR"] = str(C.write_conf_dir(self.base / "submit-conf"))
        return env


@dataclass
class LocalRun:
    proc: subprocess.Popen
    out: Path
    log: Path


def start_local_run(stack_base: Path, name: str, master: str, args: List[str], defaults: Dict[str, str]) -> LocalRun:
    """``ndcg-spark --master local[N] ...`` as a user runs it, with extra Spark defaults."""
    work = stack_base / "local" / name
    work.mkdir(parents=True)
    conf_dir = C.write_conf_dir(work / "conf", defaults)
    env = C.clean_env(Path(sys.executable), SPARK_CONF_DIR=str(conf_dir))
    out = work / "out"
    script = Path(sys.executable).parent / "ndcg-spark"
    log = work / "run.log"
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            [str(script), "--master", master, *args, "--output", str(out)],
            cwd=work,
            env=env,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return LocalRun(proc, out, log)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """Everything at once, so that JVM start-ups and jobs overlap: the Connect server and a
    local[1] run start, the cluster comes up, and the clean cluster run is submitted at once
    (the in-process reference is computed while it runs)."""
    if C.NO_CONNECT_SERVER:
        pytest.skip(C.NO_CONNECT_SERVER)
    base = tmp_path_factory.mktemp("cluster")
    python = C.isolated_python(base / "venv")
    pyfiles = C.build_pyfiles(base / "dist" / "ndcg_spark.zip")
    tables = C.make_tables(users=3000)
    recs, rel = C.write_inputs(base / "data" / "six-files", tables, files=6)
    recs1, rel1 = C.write_inputs(base / "data" / "one-file", tables, files=1, row_group_size=None)
    # A Hive catalog (embedded Derby under the server's folder): the table output is written there.
    hive = {"spark.sql.catalogImplementation": "hive"}
    connect = C.ConnectServer(base / "connect", python, conf={"spark.sql.shuffle.partitions": "3", **hive})
    cluster = C.StandaloneCluster(base / "cluster", python, workers=2, worker_cores=1, worker_memory="1g")
    s = Stack(base, python, pyfiles, recs, rel, recs1, rel1, cluster, connect)
    try:
        connect.begin()
        # Determinism: one core, one input file, one shuffle partition, ndcg-spark as users run it.
        s.local_runs["local[1]"] = start_local_run(
            base,
            "local1",
            "local[1]",
            ["--recommendations", str(recs1), "--relevance", str(rel1), *JOB_FLAGS],
            {"spark.sql.shuffle.partitions": "1", "spark.ui.enabled": "false"},
        )
        cluster.start()
        s.clean = s.submit_job("clean")
        yield s
    finally:
        if s.clean is not None:
            C.stop_process(s.clean[0].proc)
        for run in s.local_runs.values():
            C.stop_process(run.proc)
        connect.stop()
        cluster.stop()


@pytest.fixture(scope="module")
def local_out(spark, stack):
    """The job in this process on the suite's local ``spark`` session (local[2], 4 shuffle
    partitions): the reference."""
    from ndcg_spark.job import main, parse_config

    out = stack.base / "local-in-process"
    config, _ = parse_config(stack.job_args(out))
    main(spark, config)
    return out


@pytest.fixture(scope="module")
def clean_cluster_run(stack):
    sub, out = stack.clean
    code = sub.wait()
    assert code == 0, C.tail(sub.log, 80) + "\n" + stack.cluster.logs()
    return sub, out


# ----------------------------------------------------------------------------- comparisons


def _sorted(df):
    from pyspark.sql import functions as F

    keys = [c for c in ("user_id", "k") if c in df.columns]
    return df.orderBy(*[F.col(c).asc_nulls_last() for c in keys])


def _frames(spark, out: Path):
    return _sorted(spark.read.parquet(str(out / "per_user"))), _sorted(spark.read.parquet(str(out / "summary")))


def assert_same_results(spark, out: Path, reference: Path) -> None:
    """Per-user figures identical (every column, every bit); summary to 1e-12, counts exactly."""
    per_user, summary = _frames(spark, out)
    ref_per_user, ref_summary = _frames(spark, reference)
    assert ref_per_user.count() > 0
    assert_df_equality(per_user, ref_per_user, ignore_nullable=True)
    assert_approx_df_equality(summary, ref_summary, 1e-12, ignore_nullable=True)
    manifest, ref_manifest = (json.loads((p / "summary.json").read_text()) for p in (out, reference))
    assert manifest["rows"] == ref_manifest["rows"] and manifest["input_rows"] == ref_manifest["input_rows"]
    for m, r in zip(manifest["metrics"], ref_manifest["metrics"], strict=True):
        assert m["k"] == r["k"] and m["users"] == r["users"]
        assert abs(m["mean_ndcg"] - r["mean_ndcg"]) <= 1e-12


# ----------------------------------------------------------------------------- packaging


def test_pyfiles_zip_is_the_package_without_caches(stack):
    import zipfile

    with zipfile.ZipFile(stack.pyfiles) as zf:
        names = set(zf.namelist())
    package = C.ROOT / "ndcg_spark"
    expected = {
        f"ndcg_spark/{p.relative_to(package).as_posix()}"
        for p in package.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    assert names == expected
    assert "ndcg_spark/log4j2.properties" in names and "ndcg_spark/job/cli.py" in names
    # Reproducible: two builds of the same sources give the same bytes.
    first, second = (C.build_pyfiles(stack.base / "dist" / name) for name in ("a.zip", "b.zip"))
    assert first.read_bytes() == second.read_bytes()


def test_package_is_importable_only_through_the_zip(stack, tmp_path):
    """The submitting interpreter cannot import ndcg_spark by itself (so the cluster runs below
    really use --py-files), and imports it from the zip once the zip is on its path."""
    env = C.clean_env(stack.python)
    probe = "import ndcg_spark, sys; print(ndcg_spark.__file__)"
    alone = subprocess.run(
        [str(stack.python), "-c", probe], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert alone.returncode != 0 and "No module named 'ndcg_spark'" in alone.stderr, alone.stdout
    zipped = subprocess.run(
        [str(stack.python), "-c", probe],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(stack.pyfiles)},
        timeout=120,
    )
    assert zipped.returncode == 0, zipped.stderr
    assert zipped.stdout.strip() == str(stack.pyfiles / "ndcg_spark" / "__init__.py")


# ----------------------------------------------------------------------------- standalone cluster


def test_cluster_listens_on_loopback_only(stack):
    cluster = stack.cluster
    assert len(cluster.alive_workers()) == 2
    for daemon in [cluster.master, *cluster.live_worker_daemons()]:
        sockets = C.listening_sockets(daemon.pid)
        assert {(C.LOCALHOST, daemon.port), (C.LOCALHOST, daemon.webui_port)} <= sockets, (daemon.name, sockets)
        assert {address for address, _ in sockets} == {C.LOCALHOST}, (daemon.name, sockets)


def test_spark_submit_on_standalone_cluster_matches_local(spark, stack, local_out, clean_cluster_run):
    sub, out = clean_cluster_run
    log = sub.output()
    # Finished: so the driver imported the job's modules from the zip, the one place the submit's
    # interpreter and folder can import them from (test_package_is_importable_only_through_the_zip).
    # (No job's call site names the zip any more: the run collects nothing through Python.)
    assert "ndcg_spark.finished" in log and '"status": "ok"' in log
    # Tasks ran on two executors on two different workers.
    granted = C.granted_executors(log)
    assert len(set(granted.values())) == 2, granted
    assert len(C.executors_that_finished_tasks(log)) == 2, "tasks did not spread over both executors"
    assert_same_results(spark, out, local_out)


def test_pyfiles_reach_driver_and_executors(stack):
    """The driver and an executor's Python workers import ndcg_spark from the shipped zip.

    (The job itself runs no Python on executors - DataFrame API only - so this probe maps a
    Python function over the cluster, as a job with Python UDFs would; one executor suffices.)"""
    work = stack.base / "submit" / "probe"
    work.mkdir(parents=True)
    (work / "probe.py").write_text(C.PROBE_SCRIPT)
    cmd = C.submit_command(
        stack.cluster.url, stack.pyfiles, work / "probe.py", [], cores_max=1, conf={"spark.ui.enabled": "false"}
    )
    sub = C.start_submit(cmd, work, stack.submit_env(), work / "driver.log")
    assert sub.wait() == 0, C.tail(sub.log, 60)
    report = json.loads([line for line in sub.output().splitlines() if line.startswith('{"driver"')][-1])
    # The driver imports from the zip named on the command line (the job's modules are imported
    # before the SparkContext exists); executors from their copy among the application's files.
    assert report["driver"] == str(stack.pyfiles / "ndcg_spark" / "__init__.py"), report
    assert report["executors"], report
    for path, cwd in report["executors"]:
        assert path.endswith(os.path.join("ndcg_spark.zip", "ndcg_spark", "__init__.py")), report
        assert not path.startswith(str(C.ROOT)) and cwd.startswith(str(stack.cluster.base / "work-")), report


def test_job_survives_a_killed_executor(spark, stack, clean_cluster_run):
    """kill -9 of an executor JVM while it runs a task: the task is retried (up to
    spark.task.maxFailures = 4 attempts, the default), the master launches a replacement
    executor, lost cached/shuffle blocks are recomputed, and the job's output is unchanged. (A
    killed worker daemon takes its executor with it: the same loss, the same recovery.)"""
    sub, out = stack.submit_job("kill-executor")
    try:
        victim = C.kill_when_busy(stack.cluster, sub)
        # Meanwhile: the driver and the surviving executor listen on loopback only.
        for pid in [sub.proc.pid, *stack.cluster.executors(victim.app_id).values()]:
            assert {address for address, _ in C.listening_sockets(pid)} <= {C.LOCALHOST}, pid
    finally:
        code = sub.wait()
    log = sub.output()
    assert code == 0, C.tail(sub.log, 80)
    assert f"Lost executor {victim.executor_id}" in log, C.tail(sub.log, 80)
    assert C.task_lost_with_executor(log, victim.executor_id), "no task was running on the killed executor"
    assert len(C.granted_executors(log)) >= 3, "the master did not launch a replacement executor"
    assert_same_results(spark, out, clean_cluster_run[1])


# ----------------------------------------------------------------------------- Spark Connect


@pytest.fixture(scope="module")
def connect_run(stack):
    """``ndcg-spark --remote sc://...``: the console script as a Spark Connect client of the
    token-authenticated server, in a process of its own (a Python process holds either classic
    sessions or Connect sessions, and this one holds the suite's classic ``spark``). The token
    comes from SPARK_CONNECT_AUTHENTICATE_TOKEN (read by the client), not from the command line."""
    connect = stack.connect.wait_ready()
    out = stack.base / "connect-cli-out"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = connect.token
    script = Path(sys.executable).parent / "ndcg-spark"
    proc = subprocess.run(
        [str(script), "--remote", f"sc://localhost:{connect.port}", *stack.job_args(out)],
        cwd=stack.base,
        env=env,
        capture_output=True,
        text=True,
        timeout=C.JOB_TIMEOUT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out


def test_ndcg_spark_remote_matches_local(spark, stack, connect_run, local_out):
    """One job over Spark Connect (the library's stages and the job's outputs both run on the
    session the client made): the figures of the in-process run, to the last bit."""
    proc, out = connect_run
    assert '"status": "ok"' in proc.stdout
    assert json.loads((out / "summary.json").read_text())["spark_version"].startswith("4.")
    assert_same_results(spark, out, local_out)
    # The server is bound to loopback only and refuses a wrong token.
    sockets = C.listening_sockets(stack.connect.pid())
    assert (C.LOCALHOST, stack.connect.port) in sockets and {a for a, _ in sockets} == {C.LOCALHOST}, sockets
    connect = stack.connect
    bad = C.run_connect_job(
        connect.url.replace(connect.token, "x" * len(connect.token)),
        [],
        stack.base / "connect-bad.log",
        check=False,
        probe_only=True,
    )
    assert bad["ok"] is False and "UNAUTHENTICATED" in bad["error"].upper(), bad


#: One Connect client process runs the job's command lines one after another (a client startup
#: each would cost more than the tiny runs), printing each one's last line on stdout.
CONNECT_RUNS = """
import json, sys
from ndcg_spark.job import run
for argv in json.loads(sys.argv[1]):
    print(json.dumps({"code": run(argv)}), flush=True)
"""


def test_table_output_over_spark_connect(stack, inputs):
    """``--output-table`` over ``--remote``: two nights into the server's Hive catalog (the second's
    drop gate reads the first's per-user rows from the tables), then ``history --output-table``;
    the client's file system is never used (its working folder stays empty)."""
    connect = stack.connect.wait_ready()
    work = stack.base / "connect-tables"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
    env.update(SPARK_CONNECT_AUTHENTICATE_TOKEN=connect.token, PYTHONPATH=str(C.ROOT))
    remote = ["--remote", f"sc://localhost:{connect.port}"]
    job = [*remote, "--recommendations", inputs["good"], "--relevance", inputs["rel"], "--k", "3,5",
           "--output-table", "nightly"]  # fmt: skip
    runs = [[*job, "--run-date", "2026-11-21"], [*job, "--run-date", "2026-11-22", "--fail-if-drop", "5:0.01"],
            ["history", *remote, "--output-table", "nightly", "--json"]]  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", CONNECT_RUNS, json.dumps(runs)], cwd=work, env=env,
                          capture_output=True, text=True, timeout=C.JOB_TIMEOUT)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [line["code"] for line in lines if "code" in line] == [0, 0, 0], proc.stderr[-3000:]
    first, second, shown = [line for line in lines if "code" not in line]
    assert second["gates"] == "passed" and first["output"] == "nightly"
    assert shown["runs"] == ["2026-11-21", "2026-11-22"] and len(shown["rows"]) == 2 * 2
    for night, finished in zip(shown["runs"], (first, second), strict=True):
        figures = {str(r["k"]): r["mean_ndcg"] for r in shown["rows"] if r["run_date"] == night}
        assert figures == finished["mean_ndcg"]
    assert list(work.iterdir()) == []


def test_connect_errors_are_the_local_one_liners(spark, stack, tmp_path, capsys):
    """Over ``--remote``: a missing path, a file not of the declared format and a bad row exit 3
    with the message a local run prints; a relative path and an output the client cannot write
    to exit 2 with one line. The runs go to the server at once, in parallel."""
    from ndcg_spark.job import run

    connect = stack.connect.wait_ready()
    bad = tmp_path / "bad"
    spark.createDataFrame([(1, "a", 1.0)], "user_id int, item_id string, score double").write.parquet(str(bad / "recs"))
    spark.createDataFrame([(1, "a", -1.0)], "user_id int, item_id string, relevance double").write.parquet(
        str(bad / "negative")
    )
    (bad / "text.parquet").write_text("user_id,item_id,relevance\n1,a,1\n")
    recs, out = str(bad / "recs"), str(tmp_path / "out")
    cases = {
        "missing": (3, ["--recommendations", str(bad / "nowhere"), "--relevance", str(bad / "negative")]),
        "format": (3, ["--recommendations", recs, "--relevance", str(bad / "text.parquet")]),
        "bad row": (3, ["--recommendations", recs, "--relevance", str(bad / "negative")]),
        "relative": (2, ["--recommendations", "bad/recs", "--relevance", str(bad / "negative")]),
        "remote output": (
            2,
            ["--recommendations", recs, "--relevance", str(bad / "negative"), "--output", "s3a://b/o"],
        ),
    }
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
    env["SPARK_CONNECT_AUTHENTICATE_TOKEN"] = connect.token
    script = Path(sys.executable).parent / "ndcg-spark"
    procs = {
        name: subprocess.Popen(
            [str(script), "--remote", f"sc://localhost:{connect.port}", "--output", f"{out}-{i}", *args],
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, (name, (_, args)) in enumerate(cases.items())
    }
    errors = {}
    for i, (name, (code, args)) in enumerate(cases.items()):
        errors[name] = procs[name].communicate(timeout=C.JOB_TIMEOUT)[1]
        assert procs[name].returncode == code, (name, errors[name][-2000:])
        assert errors[name].count("\n") == 1 and errors[name].startswith("ndcg-spark: error: "), (name, errors[name])
        if code == 3:
            assert run(["--output", f"{out}-{i}", *args]) == code
            assert errors[name] == capsys.readouterr().err, name
    assert "'bad/recs' is a relative path: over Spark Connect it would resolve on the server" in errors["relative"]
    assert "cannot reach a s3a:// URI" in errors["remote output"]


# ----------------------------------------------------------------------------- determinism


def test_same_figures_on_every_engine_and_partitioning(spark, stack, local_out, clean_cluster_run, connect_run):
    """Identical per-user values, and means to 1e-12, across: in-process local[2] (2 input
    splits, 4 shuffle partitions: the reference); ``ndcg-spark --master local[1]`` (one input
    file, 1 shuffle partition); in-process with ~20 input splits and 13 uncoalesced shuffle
    partitions; the standalone cluster (6 input tasks, 8 shuffle partitions, 2 executors);
    Spark Connect (3 shuffle partitions)."""
    from ndcg_spark import evaluate
    from ndcg_spark.job import parse_config

    outputs = {"standalone": clean_cluster_run[1], "connect": connect_run[1]}
    for name, run in stack.local_runs.items():
        try:
            code = run.proc.wait(C.JOB_TIMEOUT)
        except subprocess.TimeoutExpired:
            C.stop_process(run.proc)
            raise
        assert code == 0, C.tail(run.log, 60)
        outputs[name] = run.out
    for out in outputs.values():
        assert_same_results(spark, out, local_out)

    options = dataclasses.asdict(parse_config(stack.job_args(stack.base / "unused"))[0].options)
    with spark_conf(
        spark,
        {
            "spark.sql.shuffle.partitions": "13",
            "spark.sql.files.maxPartitionBytes": "64k",
            "spark.sql.adaptive.coalescePartitions.enabled": "false",
        },
    ):
        recs, rel = spark.read.parquet(str(stack.recs)), spark.read.parquet(str(stack.rel))
        assert recs.rdd.getNumPartitions() >= 12, recs.rdd.getNumPartitions()
        result = evaluate(recs, rel, **options)
        per_user, summary = _frames(spark, local_out)
        assert_df_equality(_sorted(result.per_user), per_user, ignore_nullable=True)
        assert_approx_df_equality(_sorted(result.summary), summary, 1e-12, ignore_nullable=True)


@contextlib.contextmanager
def spark_conf(spark, values: Dict[str, str]):
    old = {key: spark.conf.get(key, None) for key in values}
    for key, value in values.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        for key, value in old.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
