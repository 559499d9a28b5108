"""A real Spark standalone cluster, a Spark Connect server and spark-submit, from the pip-installed pyspark.

Used by ``tests/test_cluster.py``. Everything binds to 127.0.0.1 on ports chosen at run time,
writes under a temporary directory, and is stopped by the process ids this module started
(never by name: other Spark processes may run on the same machine).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence

import pyspark

from tests.helpers import QUICK_JVM

ROOT = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
SPARK_SUBMIT = SPARK_HOME / "bin" / "spark-submit"
LOCALHOST = "127.0.0.1"
#: Why the Connect server cannot start from this pip package, or None: PySpark 3.5's has no server
#: (its jar comes from Maven, which the tests do not reach).
NO_CONNECT_SERVER = (
    None
    if (SPARK_HOME / "sbin" / "start-connect-server.sh").exists() and any(SPARK_HOME.glob("jars/spark-connect_*.jar"))
    else f"the pip package of PySpark {pyspark.__version__} has no Spark Connect server (it comes from Maven)"
)

#: Generous: another heavy process (a benchmark) may share the two cores.
START_TIMEOUT = 180
JOB_TIMEOUT = 420

QUIET_LOG4J = """\
rootLogger.level = warn
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss.SSS} %p %c{1}: %m%n
# What the fault tests look for in the driver's log.
logger.scheduler.name = org.apache.spark.scheduler
logger.scheduler.level = info
logger.standalone.name = org.apache.spark.scheduler.cluster
logger.standalone.level = info
logger.master.name = org.apache.spark.deploy.master.Master
logger.master.level = info
logger.worker.name = org.apache.spark.deploy.worker.Worker
logger.worker.level = info
"""


class ClusterError(RuntimeError):
    pass


# ----------------------------------------------------------------------------- small utilities


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now (the daemons are told not to retry other ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOCALHOST, 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1)
        return s.connect_ex((LOCALHOST, port)) == 0


def get_json(url: str, timeout: float = 10):
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.loads(response.read().decode())


def wait_for(
    what: str,
    check: Callable[[], object],
    timeout: float,
    interval: float = 0.25,
    alive: Optional[Sequence[subprocess.Popen]] = None,
    logs: Sequence[Path] = (),
):
    """Poll ``check`` until it returns something truthy; fail with the logs' tails on timeout
    or as soon as one of the ``alive`` processes has exited."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = check()
        except (OSError, http.client.HTTPException, ValueError):
            value = None
        if value:
            return value
        dead = [p for p in (alive or ()) if p.poll() is not None]
        if dead or time.monotonic() > deadline:
            reason = f"process {dead[0].pid} exited with {dead[0].returncode}" if dead else f"{timeout:.0f}s passed"
            raise ClusterError(f"waiting for {what}: {reason}\n" + "\n".join(tail(p) for p in logs))
        time.sleep(interval)


def tail(path: Path, lines: int = 40) -> str:
    try:
        text = Path(path).read_text(errors="replace").splitlines()
    except OSError:
        return f"--- {path}: (missing)"
    return f"--- {path} (last {lines} lines)\n" + "\n".join(text[-lines:])


def process_table() -> Dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process we can see (Linux /proc)."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read().decode(errors="replace")
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except (OSError, IndexError, ValueError):
            continue
        table[int(entry)] = (ppid, cmdline)
    return table


def _tcp_listeners() -> Dict[int, tuple[str, int]]:
    """socket inode -> (address, port) of every listening TCP socket (Linux /proc/net)."""
    found = {}
    for name, family in (("/proc/net/tcp", socket.AF_INET), ("/proc/net/tcp6", socket.AF_INET6)):
        try:
            lines = Path(name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            parts = line.split()
            if len(parts) < 10 or parts[3] != "0A":  # 0A = LISTEN
                continue
            hex_ip, hex_port = parts[1].split(":")
            raw = bytes.fromhex(hex_ip)
            raw = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))  # 32-bit words, little-endian
            address = socket.inet_ntop(family, raw)
            if address.startswith("::ffff:"):
                address = address[len("::ffff:") :]
            found[int(parts[9])] = (address, int(hex_port, 16))
    return found


def listening_sockets(pid: int) -> set:
    """(address, port) of the TCP sockets process ``pid`` listens on."""
    listeners = _tcp_listeners()
    found = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return found
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = int(target[len("socket:[") : -1])
            if inode in listeners:
                found.add(listeners[inode])
    return found


def descendants(pids: Sequence[int]) -> List[int]:
    table = process_table()
    found, frontier = [], set(pids)
    while frontier:
        children = {pid for pid, (ppid, _) in table.items() if ppid in frontier and pid not in found}
        found.extend(sorted(children))
        frontier = children
    return found


def stop_pid(pid: int, grace: float = 20) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds, one process we started."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)  # our child: reap it
            if done:
                return
        except ChildProcessError:  # not our child (an executor): poll for existence
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
        time.sleep(0.2)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def stop_process(proc: subprocess.Popen, grace: float = 20) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(grace)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(30)


# ----------------------------------------------------------------------------- packaging


def build_pyfiles(output: Path) -> Path:
    """``python scripts/build_pyfiles.py -o output``, the documented build command."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "build_pyfiles.py"), "-o", str(output)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if proc.returncode != 0:
        raise ClusterError(f"build_pyfiles failed:\n{proc.stdout}\n{proc.stderr}")
    with zipfile.ZipFile(output) as zf:
        names = zf.namelist()
    if "ndcg_spark/__init__.py" not in names or any("__pycache__" in n or n.endswith(".pyc") for n in names):
        raise ClusterError(f"unexpected zip contents: {names}")
    return output


def isolated_python(where: Path) -> Path:
    """An interpreter with this environment's third-party packages but WITHOUT the project.

    The test venv installs ``ndcg_spark`` in editable mode: a ``.pth`` file in site-packages puts
    a finder on ``sys.meta_path`` that imports the package from the checkout in every Python
    started from the venv, whatever PYTHONPATH or the working directory (a non-editable install
    would put the package itself there). So: a second, empty venv (``--without-pip``: 0.1 s)
    whose site-packages links to every entry of ours except the project's own (``ndcg_spark``,
    its metadata, its editable finder) and except ``.pth`` files. It has pyspark, pyarrow,
    pandas, ...; like a cluster node where only pyspark is installed, it imports ``ndcg_spark``
    only from --py-files.
    """
    import site
    import sysconfig

    python = where / "bin" / "python"
    if python.exists():
        return python
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    purelib = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()
    )
    ours = [Path(p) for p in site.getsitepackages() if Path(p).is_dir()] or [Path(sysconfig.get_paths()["purelib"])]
    for site_dir in ours:
        for entry in sorted(site_dir.iterdir()):
            name = entry.name.lower().replace("-", "_")
            if entry.suffix == ".pth" or name.startswith(("ndcg_spark", "__editable__")) or name == "__pycache__":
                continue
            if not (purelib / entry.name).exists():
                (purelib / entry.name).symlink_to(entry)
    return python


def clean_env(python: Path, **extra: str) -> Dict[str, str]:
    """The environment of a spark-submit or daemon: ours minus anything Python- or Spark-specific."""
    drop = (
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYSPARK_SUBMIT_ARGS",
        "SPARK_CONF_DIR",
        "SPARK_ENV_LOADED",
        "SPARK_HOME",
        "SPARK_MASTER",
        "SPARK_REMOTE",
        "SPARK_CONNECT_MODE_ENABLED",
        "VIRTUAL_ENV",
        "SPARK_CONNECT_AUTHENTICATE_TOKEN",
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
    )
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("SPARK_LOCAL")}
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP=LOCALHOST,
        SPARK_LOCAL_HOSTNAME=LOCALHOST,
        PYSPARK_PYTHON=str(python),
        PYSPARK_DRIVER_PYTHON=str(python),
        PATH=f"{Path(python).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONHASHSEED="0",
    )
    env.update(extra)
    return env


def daemon_env(python: Path, base: Path, **extra: str) -> Dict[str, str]:
    """``clean_env`` for a Spark daemon whose conf, logs, pids and scratch live under ``base``."""
    return clean_env(
        python,
        SPARK_CONF_DIR=str(base / "conf"),
        SPARK_LOG_DIR=str(base / "logs"),
        SPARK_PID_DIR=str(base / "pids"),
        SPARK_LOCAL_DIRS=str(base / "local"),
        **extra,
    )


#: Every driver and executor the tests start takes the suite's quick JVM flags (tests/helpers.py).
JVM_DEFAULTS = {"spark.driver.defaultJavaOptions": QUICK_JVM, "spark.executor.defaultJavaOptions": QUICK_JVM}


def write_conf_dir(where: Path, defaults: Optional[Dict[str, str]] = None) -> Path:
    """A SPARK_CONF_DIR of our own: quiet logs, the quick JVM flags, nothing from the machine."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "log4j2.properties").write_text(QUIET_LOG4J)
    values = {**JVM_DEFAULTS, **(defaults or {})}
    (where / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in values.items()))
    return where


# ----------------------------------------------------------------------------- standalone cluster


@dataclass
class Daemon:
    name: str
    proc: subprocess.Popen
    log: Path
    port: int
    webui_port: int

    @property
    def pid(self) -> int:
        return self.proc.pid


@dataclass
class StandaloneCluster:
    """A master and workers (``spark-class ...Master`` / ``...Worker``) on 127.0.0.1."""

    base: Path
    python: Path
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    master: Optional[Daemon] = None
    worker_daemons: List[Daemon] = field(default_factory=list)
    seen_executors: Dict[int, str] = field(default_factory=dict)  # pid -> command line

    @property
    def url(self) -> str:
        return f"spark://{LOCALHOST}:{self.master.port}"

    @property
    def json_url(self) -> str:
        return f"http://{LOCALHOST}:{self.master.webui_port}/json/"

    def state(self) -> dict:
        return get_json(self.json_url)

    def alive_workers(self) -> List[dict]:
        return [w for w in self.state()["workers"] if w["state"] == "ALIVE"]

    def env(self) -> Dict[str, str]:
        return daemon_env(
            self.python,
            self.base,
            SPARK_DAEMON_MEMORY="512m",
            # Master and workers do little work: quick start, few GC threads on a small machine.
            SPARK_DAEMON_JAVA_OPTS=QUICK_JVM,
        )

    def _daemon(self, name: str, args: List[str], port: int, webui_port: int) -> Daemon:
        log = self.base / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        with open(log, "ab") as fh:
            proc = subprocess.Popen(
                [str(SPARK_CLASS), *args],
                stdout=fh,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=self.env(),
                cwd=self.base,
            )
        return Daemon(name, proc, log, port, webui_port)

    def start(self) -> StandaloneCluster:
        # Fail fast on a port taken between free_port() and the bind, instead of silently moving
        # to the next port (spark.port.maxRetries); start() then tries again with new ports.
        write_conf_dir(self.base / "conf", {"spark.port.maxRetries": "0", "spark.master.rest.enabled": "false"})
        for attempt in range(3):
            try:
                self._start_master()
                break
            except ClusterError:
                self.stop()
                if attempt == 2:
                    raise
        for _ in range(self.workers):
            self.add_worker()
        self.wait_for_workers(self.workers)
        return self

    def _start_master(self) -> None:
        port, webui = free_port(), free_port()
        self.master = self._daemon(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                LOCALHOST,
                "--port",
                str(port),
                "--webui-port",
                str(webui),
            ],
            port,
            webui,
        )
        wait_for(
            "the master's JSON UI",
            lambda: self.state()["status"] == "ALIVE",
            START_TIMEOUT,
            alive=[self.master.proc],
            logs=[self.master.log],
        )

    def add_worker(self) -> Daemon:
        index = len(self.worker_daemons) + 1
        for attempt in range(3):
            port, webui = free_port(), free_port()
            work_dir = self.base / f"work-{index}"
            daemon = self._daemon(
                f"worker-{index}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    LOCALHOST,
                    "--port",
                    str(port),
                    "--webui-port",
                    str(webui),
                    "--cores",
                    str(self.worker_cores),
                    "--memory",
                    self.worker_memory,
                    "--work-dir",
                    str(work_dir),
                    self.url,
                ],
                port,
                webui,
            )
            self.worker_daemons.append(daemon)
            try:
                wait_for(
                    f"worker {index} to register",
                    lambda port=port: any(w["port"] == port and w["state"] == "ALIVE" for w in self.state()["workers"]),
                    START_TIMEOUT,
                    alive=[daemon.proc],
                    logs=[daemon.log, self.master.log],
                )
                return daemon
            except ClusterError:
                stop_process(daemon.proc)
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def wait_for_workers(self, n: int) -> None:
        wait_for(
            f"{n} alive workers",
            lambda: len(self.alive_workers()) >= n,
            START_TIMEOUT,
            alive=[self.master.proc],
            logs=[self.master.log],
        )

    def ensure_workers(self) -> None:
        """Replace workers a test killed, so the next job again has ``workers`` of them."""
        while len(self.live_worker_daemons()) < self.workers:
            self.add_worker()
        self.wait_for_workers(self.workers)

    def live_worker_daemons(self) -> List[Daemon]:
        return [d for d in self.worker_daemons if d.proc.poll() is None]

    def executors(self, app_id: Optional[str] = None) -> Dict[str, int]:
        """executor id -> pid of the CoarseGrainedExecutorBackend JVMs our workers launched."""
        workers = {d.pid for d in self.worker_daemons}
        found = {}
        for pid, (ppid, cmd) in process_table().items():
            if ppid not in workers or "CoarseGrainedExecutorBackend" not in cmd:
                continue
            args = cmd.split()
            if app_id is not None and ("--app-id" not in args or args[args.index("--app-id") + 1] != app_id):
                continue
            found[args[args.index("--executor-id") + 1]] = pid
            self.seen_executors[pid] = cmd
        return found

    def stop(self) -> None:
        # Executors first (children of the workers; an orphan of a killed worker exits by itself,
        # but make sure), then workers, then the master: each by its own pid.
        live = [d.pid for d in self.worker_daemons if d.proc.poll() is None]
        table = process_table()
        leftover = {pid: table[pid][1] for pid in descendants(live) if pid in table}
        leftover.update(self.seen_executors)
        for daemon in self.worker_daemons:
            stop_process(daemon.proc)
        for pid, cmdline in leftover.items():
            if command_line(pid) == cmdline:  # still that process, not a reused pid
                stop_pid(pid, grace=5)
        if self.master is not None:
            stop_process(self.master.proc)

    def logs(self) -> str:
        return "\n".join(tail(d.log) for d in [self.master, *self.worker_daemons] if d is not None)


def command_line(pid: int) -> Optional[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return None


def pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


# ----------------------------------------------------------------------------- spark-submit


def submit_command(
    master: str,
    pyfiles: Path,
    script: Path,
    job_args: Sequence[str],
    *,
    conf: Optional[Dict[str, str]] = None,
    cores_max: int = 2,
) -> List[str]:
    """The spark-submit line of docs/cluster.md section 4 (client deploy mode; SPARK_LOCAL_IP in
    the environment binds the driver to 127.0.0.1)."""
    cmd = [
        str(SPARK_SUBMIT),
        "--master",
        master,
        "--deploy-mode",
        "client",
        "--py-files",
        str(pyfiles),
        "--driver-memory",
        "1g",
        "--executor-cores",
        "1",
        "--executor-memory",
        "512m",
        "--conf",
        f"spark.cores.max={cores_max}",
    ]
    for key, value in (conf or {}).items():
        cmd += ["--conf", f"{key}={value}"]
    return cmd + [str(script), *job_args]


@dataclass
class Submission:
    proc: subprocess.Popen
    log: Path
    started: float

    def wait(self, timeout: float = JOB_TIMEOUT) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            stop_process(self.proc)
            raise ClusterError(f"spark-submit did not finish in {timeout}s\n{tail(self.log, 80)}") from None

    def output(self) -> str:
        return self.log.read_text(errors="replace")


def start_submit(cmd: Sequence[str], cwd: Path, env: Dict[str, str], log: Path) -> Submission:
    with open(log, "wb") as fh:
        proc = subprocess.Popen(
            list(cmd), cwd=cwd, env=env, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )
    return Submission(proc, log, time.monotonic())


def driver_rest(ui_port: int, path: str = ""):
    """The running application's monitoring REST API (the driver's UI, on a port we chose)."""
    apps = get_json(f"http://{LOCALHOST}:{ui_port}/api/v1/applications", timeout=5)
    app_id = apps[0]["id"]
    return app_id, (
        get_json(f"http://{LOCALHOST}:{ui_port}/api/v1/applications/{app_id}/{path}", timeout=5) if path else None
    )


# ----------------------------------------------------------------------------- faults


@dataclass
class Victim:
    executor_id: str
    executor_pid: int
    worker_pid: int
    app_id: str


def driver_ui_port(driver_pid: int) -> Optional[int]:
    """The port of the driver's UI (spark.ui.port=0: a random one): of the ports the driver JVM
    listens on (RPC, block manager, py4j, UI), the one that answers the monitoring REST API."""
    for address, port in sorted(listening_sockets(driver_pid)):
        try:
            if isinstance(get_json(f"http://{address}:{port}/api/v1/applications", timeout=3), list):
                return port
        except (OSError, http.client.HTTPException, ValueError):
            continue
    return None


def _active_tasks(port: int, app_id: str, executor_id: str) -> int:
    executors = get_json(f"http://{LOCALHOST}:{port}/api/v1/applications/{app_id}/executors", timeout=10)
    return sum(e["activeTasks"] for e in executors if e["id"] == executor_id)


def kill_when_busy(
    cluster: StandaloneCluster, sub: Submission, min_completed: int = 3, timeout: float = JOB_TIMEOUT
) -> Victim:
    """SIGKILL an executor while it is running one of the job's tasks, once ``min_completed``
    tasks have finished.

    No timing luck: poll the driver's REST API until an executor of the app has an active task,
    freeze that executor with SIGSTOP (a frozen task cannot finish), wait a second for any
    status update already in flight, and kill only if the driver still counts the task as
    running there; otherwise SIGCONT it and poll again.
    """
    deadline = time.monotonic() + timeout
    port = None
    while sub.proc.poll() is None:
        if time.monotonic() > deadline:
            raise ClusterError(f"no busy executor within {timeout}s\n{tail(sub.log)}")
        port = port or driver_ui_port(sub.proc.pid)
        try:
            if port is None:
                raise ValueError("no UI yet")
            app_id, executors = driver_rest(port, "executors")
        except (OSError, http.client.HTTPException, ValueError, IndexError, KeyError):
            time.sleep(0.2)
            continue
        executors = [e for e in executors if e["id"] != "driver" and e.get("isActive", True)]
        completed = sum(e["completedTasks"] for e in executors)
        busy = [e["id"] for e in executors if e["activeTasks"] > 0]
        if completed < min_completed or not busy:
            time.sleep(0.05)
            continue
        pids = cluster.executors(app_id)
        for executor_id in busy:
            pid = pids.get(executor_id)
            if pid is None:
                continue
            os.kill(pid, signal.SIGSTOP)
            killed = False
            try:
                time.sleep(1.0)
                try:
                    running = _active_tasks(port, app_id, executor_id)
                    worker_pid = process_table()[pid][0]
                except (OSError, http.client.HTTPException, ValueError, KeyError):
                    running = 0
                if running == 0:
                    continue
                os.kill(pid, signal.SIGKILL)
                killed = True
                return Victim(executor_id, pid, worker_pid, app_id)
            finally:
                if not killed:
                    try:  # resume it: the executor goes on
                        os.kill(pid, signal.SIGCONT)
                    except ProcessLookupError:
                        pass
        time.sleep(0.05)
    raise ClusterError(f"the job ended (exit {sub.proc.returncode}) before an executor was seen busy\n{tail(sub.log)}")


def granted_executors(log: str) -> Dict[str, str]:
    """executor id -> worker host:port, from the driver log."""
    return dict(re.findall(r"Granted executor ID \S+?/(\d+) on hostPort (\S+)", log))


def executors_that_finished_tasks(log: str) -> set:
    return set(re.findall(r"Finished task \S+ in stage .* \(executor (\d+)\)", log))


#: How the driver logs a task lost with an executor that died for a reason other than the task.
UNRELATED_EXECUTOR_LOSS = "its executor exited for a reason unrelated to the task"


def task_lost_with_executor(log: str, executor_id: str) -> bool:
    """Did the driver log a task that failed because its executor went away? Spark words it
    two ways, depending on whether it blames the task ("Lost task ... ExecutorLostFailure
    (executor N exited caused by one of the running tasks)", counted towards
    spark.task.maxFailures) or not (UNRELATED_EXECUTOR_LOSS, not counted); which one depends on
    how the driver learns of the loss first."""
    return UNRELATED_EXECUTOR_LOSS in log or any(
        "Lost task" in line and re.search(rf"executor {executor_id}\b", line) for line in log.splitlines()
    )


# ----------------------------------------------------------------------------- Spark Connect


@dataclass
class ConnectServer:
    """``sbin/start-connect-server.sh`` on 127.0.0.1 with a pre-shared token, stopped by its pid file."""

    base: Path
    python: Path
    master: str = "local[2]"
    conf: Dict[str, str] = field(default_factory=dict)
    port: int = 0
    token: str = ""
    _script: Optional[subprocess.Popen] = None
    _ready: bool = False

    def env(self) -> Dict[str, str]:
        return daemon_env(
            self.python,
            self.base,
            SPARK_IDENT_STRING="ndcg-spark-tests",
            # The token travels in the environment, not on the command line (visible in ps).
            SPARK_CONNECT_AUTHENTICATE_TOKEN=self.token,
        )

    @property
    def url(self) -> str:
        # "localhost", not 127.0.0.1: with a token and without use_ssl=true, the Python client
        # uses gRPC local (loopback) credentials only when the host is "localhost"; for any
        # other host it insists on TLS. The server itself listens on 127.0.0.1 only.
        return f"sc://localhost:{self.port}/;token={self.token}"

    def pid(self) -> Optional[int]:
        files = list((self.base / "pids").glob("*SparkConnectServer*.pid"))
        try:
            return int(files[0].read_text().strip()) if files else None
        except (OSError, ValueError):
            return None

    def log(self) -> Path:
        files = sorted((self.base / "logs").glob("*SparkConnectServer*.out"))
        return files[-1] if files else self.base / "logs" / "missing.out"

    def command(self) -> List[str]:
        cmd = [
            str(SPARK_HOME / "sbin" / "start-connect-server.sh"),
            "--master",
            self.master,
            "--conf",
            f"spark.connect.grpc.binding.address={LOCALHOST}",
            "--conf",
            f"spark.connect.grpc.binding.port={self.port}",
            "--conf",
            f"spark.driver.host={LOCALHOST}",
            "--conf",
            f"spark.driver.bindAddress={LOCALHOST}",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            f"spark.sql.warehouse.dir={self.base / 'warehouse'}",
            "--driver-java-options",
            f"-Dderby.system.home={self.base}",
        ]
        for key, value in self.conf.items():
            cmd += ["--conf", f"{key}={value}"]
        return cmd

    def begin(self) -> ConnectServer:
        """Launch the start script and return at once (the JVM boots in the background)."""
        import secrets

        self.token = self.token or secrets.token_hex(16)
        write_conf_dir(self.base / "conf", {"spark.port.maxRetries": "0"})
        self.port = free_port()
        self._script = subprocess.Popen(
            self.command(),
            env=self.env(),
            cwd=self.base,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return self

    def wait_ready(self) -> ConnectServer:
        """Block until the server listens (relaunching on new ports, twice at most, if it died)."""
        if self._ready:
            return self
        for attempt in range(3):
            if self._script is None:
                self.begin()
            try:
                self._script.wait(120)
                wait_for(
                    "the Spark Connect server's port", self._listening, START_TIMEOUT, interval=0.5, logs=[self.log()]
                )
                self._ready = True
                return self
            except (ClusterError, subprocess.TimeoutExpired):
                self.stop()
                self._script = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _listening(self) -> bool:
        pid = self.pid()
        if pid is not None and not pid_exists(pid):
            raise ClusterError(f"Spark Connect server (pid {pid}) exited\n{tail(self.log())}")
        return port_open(self.port)

    def stop(self) -> None:
        if self._script is not None and self._script.poll() is None:
            self._script.wait(120)
        pid = self.pid()
        subprocess.run(
            [str(SPARK_HOME / "sbin" / "stop-connect-server.sh")],
            env=self.env(),
            cwd=self.base,
            timeout=120,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        # The script sent SIGTERM; wait, then SIGKILL - if the pid is still our server's.
        if (
            pid is not None
            and "SparkConnectServer" in (command_line(pid) or "")
            and str(self.base) in (command_line(pid) or "")
        ):
            stop_pid(pid)


def run_connect_job(url: str, job_args: Sequence[str], log: Path, check: bool = True, probe_only: bool = False) -> dict:
    """``python -m tests.cluster connect-job ...``: ``ndcg_spark.job.main`` on a Connect session
    in a fresh client process (no JVM in it). Returns the JSON it prints last."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPARK_", "PYSPARK_SUBMIT"))}
    env["NDCG_TEST_CONNECT_URL"] = url  # not in argv: it carries the token
    cmd = [sys.executable, "-m", "tests.cluster", "connect-job", *(["--probe-only"] if probe_only else []), *job_args]
    with open(log, "wb") as fh:
        proc = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=fh, timeout=JOB_TIMEOUT)
    lines = [line for line in proc.stdout.decode(errors="replace").splitlines() if line.startswith("{")]
    result = json.loads(lines[-1]) if lines else {"ok": False, "error": "no output"}
    if check and (proc.returncode != 0 or not result.get("ok")):
        raise ClusterError(f"Connect client failed: {result.get('error')}\n{tail(log, 60)}")
    return result


def _connect_job_main(argv: List[str]) -> int:
    url = os.environ["NDCG_TEST_CONNECT_URL"]
    probe_only = argv[:1] == ["--probe-only"]
    try:
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(url).getOrCreate()
        remote = type(spark).__module__.startswith("pyspark.sql.connect")
        if probe_only:
            spark.range(1).count()
            print(json.dumps({"ok": True, "remote": remote}))
            return 0
        from ndcg_spark.job import main, parse_config

        config, _ = parse_config(argv)
        manifest = main(spark, config).to_json()
        print(
            json.dumps(
                {"ok": True, "remote": remote, "spark_version": manifest["spark_version"], "manifest": manifest},
                default=str,
            )
        )
        return 0
    except Exception as exc:  # noqa: BLE001 - reported to the test as JSON
        print(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
        return 1


# ----------------------------------------------------------------------------- probe

#: Submitted with --py-files: where do the driver and an executor's Python workers import
#: ndcg_spark from? (The cwd of a Python worker is its executor's work directory.)
PROBE_SCRIPT = """\
import json, os
from pyspark.sql import SparkSession

import ndcg_spark

spark = SparkSession.builder.getOrCreate()


def where(_):
    import ndcg_spark, os
    yield (ndcg_spark.__file__, os.getcwd())


found = sorted(set(spark.sparkContext.parallelize(range(2), 2).mapPartitions(where).collect()))
print(json.dumps({"driver": ndcg_spark.__file__, "executors": found}))
spark.stop()
"""


def input_partitions(spark, path: Path, max_bytes: str) -> int:
    key = "spark.sql.files.maxPartitionBytes"
    old = spark.conf.get(key)
    spark.conf.set(key, max_bytes)
    try:
        return spark.read.parquet(str(path)).rdd.getNumPartitions()
    finally:
        spark.conf.set(key, old)


# ----------------------------------------------------------------------------- test data


def make_tables(users: int = 3000, seed: int = 5):
    """Recommendations and graded relevance as two pyarrow tables, rows shuffled.

    Scores are rounded to 2 decimals, so many equal scores exercise the tie-break; a few users
    have no relevance rows and a few have relevance but no recommendations.
    """
    import numpy as np
    import pyarrow as pa

    rng = np.random.default_rng(seed)
    n_items, list_len, judged = 2000, 30, 12
    rec_users, rec_items, rec_scores = [], [], []
    rel_users, rel_items, rel_values = [], [], []
    for u in range(users):
        if u % 97 != 5:  # ~1% with relevance only
            items = rng.choice(n_items, size=list_len, replace=False)
            rec_users.append(np.full(list_len, u))
            rec_items.append(items)
            rec_scores.append(np.round(rng.random(list_len), 2))
        if u % 53 != 7:  # ~2% with recommendations only
            j = rng.choice(n_items, size=judged, replace=False)
            if u % 2 == 0 and rec_items and rec_users[-1][0] == u:  # overlap with the list
                j[: judged // 2] = rec_items[-1][: judged // 2]
                j = np.unique(j)
            rel_users.append(np.full(len(j), u))
            rel_items.append(j)
            rel_values.append(rng.integers(0, 5, size=len(j)).astype(float))
    recs = pa.table(
        {
            "user_id": np.concatenate(rec_users).astype(np.int64),
            "item_id": np.concatenate(rec_items).astype(np.int64),
            "score": np.concatenate(rec_scores),
        }
    )
    rel = pa.table(
        {
            "user_id": np.concatenate(rel_users).astype(np.int64),
            "item_id": np.concatenate(rel_items).astype(np.int64),
            "relevance": np.concatenate(rel_values),
        }
    )
    return recs.take(rng.permutation(recs.num_rows)), rel.take(rng.permutation(rel.num_rows))


def write_inputs(base: Path, tables, files: int = 6, row_group_size: Optional[int] = 2500) -> tuple[Path, Path]:
    """The tables of :func:`make_tables` as Parquet, ``files`` files each (consecutive slices
    of the shuffled rows, so every user is spread over several files and partitions)."""
    import numpy as np
    import pyarrow.parquet as pq

    paths = []
    for name, table in zip(("recommendations", "relevance"), tables):
        out = base / name
        out.mkdir(parents=True, exist_ok=True)
        bounds = np.linspace(0, table.num_rows, files + 1).astype(int)
        for i in range(files):
            pq.write_table(
                table.slice(bounds[i], bounds[i + 1] - bounds[i]),
                out / f"part-{i:05d}.parquet",
                row_group_size=row_group_size,
            )
        paths.append(out)
    return paths[0], paths[1]


if __name__ == "__main__":
    if sys.argv[1:2] == ["connect-job"]:
        sys.exit(_connect_job_main(sys.argv[2:]))
    sys.exit("usage: python -m tests.cluster connect-job [--probe-only] JOB-FLAGS (url in NDCG_TEST_CONNECT_URL)")
