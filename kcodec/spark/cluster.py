"""A Spark standalone cluster on this machine: a master and workers, each a
JVM of its own started by the installed pyspark's own launcher
(``bin/spark-class org.apache.spark.deploy.master.Master`` and
``...worker.Worker``), on free ports of 127.0.0.1.

It is the cluster the tests and the benchmarks run spark-convert and
kafka-log on, and a way to try a job on a cluster before a real one::

    with LocalCluster(workers=2) as cluster:
        spark = cluster.session()           # or: kcodec spark-convert --master cluster.url
        ...

Executors run the driver's Python (``spark.pyspark.python``), so they
import the kcodec installed in it: the "wheel installed on every node" way
(docs/guide/spark.md), with every node on one machine.
"""
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
START_TIMEOUT = 120.0
STOP_TIMEOUT = 30.0
POLL_SECONDS = 0.2
PR_SET_PDEATHSIG = 1    # prctl(2)


class ClusterError(RuntimeError):
    """The cluster did not start, or a node of it died; names the node and
    the end of its log."""


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def spark_class():
    """The installed pyspark's bin/spark-class."""
    import pyspark
    path = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not path.exists():
        raise ClusterError(f"{path} is missing: pyspark is installed without its launcher")
    return str(path)


class LocalCluster:
    """A master and `workers` workers of `cores` cores and `memory` each,
    their logs and work directories in `directory` (a temporary one unless
    given). Started on entering (or by start()), stopped on leaving (stop()):
    workers first, each with the executors it launched, then the master."""

    def __init__(self, workers=2, *, cores=1, memory="2g", directory=None):
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._own_directory = directory is None
        self.directory = Path(directory or tempfile.mkdtemp(prefix="kcodec-cluster-"))
        self.port = free_port()
        self.webui_port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self._processes = []        # (name, Popen, log path)

    # ------------------------------------------------------------ lifecycle

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop()

    def start(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        try:
            self._launch("master", MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                         "--webui-port", str(self.webui_port))
            self._wait(lambda state: state is not None, "the master to answer")
            for n in range(self.workers):
                work = self.directory / f"worker-{n}"
                work.mkdir(parents=True, exist_ok=True)
                self._launch(f"worker-{n}", WORKER_CLASS, "--host", "127.0.0.1",
                             "--cores", str(self.cores), "--memory", self.memory,
                             "--webui-port", str(free_port()), "--work-dir", str(work), self.url)
            self._wait(lambda state: state and len(alive_workers(state)) == self.workers,
                       f"{self.workers} worker(s) to register")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self):
        """Workers first (a worker kills its executors as it stops), then
        the master; a node that does not stop in STOP_TIMEOUT is killed."""
        for _, process, _ in reversed(self._processes):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._processes = []
        if self._own_directory:
            shutil.rmtree(self.directory, ignore_errors=True)

    # ---------------------------------------------------------------- state

    def state(self):
        """The master's own JSON view (workers, applications), or None while
        it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/",
                                        timeout=5) as response:
                return json.load(response)
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def executor_pids(self):
        """The process ids of the executor JVMs the workers run now."""
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                command = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if EXECUTOR_CLASS.encode() not in command:
                continue
            try:        # an executor runs in its worker's work directory
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(self.directory)):
                pids.append(int(entry.name))
        return pids

    def session(self, app_name="kcodec on a local cluster", **conf):
        """A SparkSession on this cluster whose executors run this Python,
        with one-core executors and the settings in `conf`."""
        from .session import local_session
        settings = {"spark.pyspark.python": sys.executable,
                    "spark.driver.host": "127.0.0.1",
                    "spark.driver.bindAddress": "127.0.0.1",
                    "spark.executor.cores": str(self.cores),
                    "spark.executor.memory": "1g",
                    "spark.ui.enabled": "false",
                    **conf}
        return local_session(self.url, app_name=app_name, **settings)

    def log(self, name):
        """The text of a node's log ("master", "worker-0", ...)."""
        for node, _, path in self._processes:
            if node == name:
                return path.read_text(errors="replace")
        raise KeyError(name)

    # ------------------------------------------------------------- internal

    def _launch(self, name, main_class, *args):
        log = self.directory / f"{name}.log"
        env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", SPARK_NO_DAEMONIZE="1",
                   SPARK_LOG_DIR=str(self.directory), SPARK_PID_DIR=str(self.directory),
                   PYSPARK_PYTHON=sys.executable)
        env.pop("SPARK_HOME", None)     # the installed pyspark's own
        with open(log, "wb") as out:
            process = subprocess.Popen([spark_class(), main_class, *args], stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       env=env, cwd=self.directory,
                                       preexec_fn=_terminate_with_parent)
        self._processes.append((name, process, log))

    def _wait(self, ready, what):
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            for name, process, log in self._processes:
                if process.poll() is not None:
                    raise ClusterError(f"the {name} exited with status {process.returncode} "
                                       f"waiting for {what}:\n{_tail(log)}")
            if ready(self.state()):
                return
            time.sleep(POLL_SECONDS)
        raise ClusterError(f"timed out after {START_TIMEOUT:.0f} s waiting for {what}; "
                           f"the master's log ends:\n{_tail(self._processes[0][2])}")


def _terminate_with_parent():
    """In a node's process before exec (spark-class execs java): SIGTERM it
    when the process that started it dies, so that a killed run leaves no
    JVM behind (Linux; elsewhere nothing)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


def alive_workers(state):
    return [w for w in state.get("workers", ()) if w.get("state") == "ALIVE"]


def _tail(path, lines=20):
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
