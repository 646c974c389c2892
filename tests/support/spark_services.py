"""Start a Spark standalone master + worker, or a Spark Connect server, on 127.0.0.1 for tests.

Everything comes from the pyspark pip package (its bin/spark-class and bin/spark-submit); every
service binds to loopback and is stopped when the context exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import socket
import subprocess
import time
from pathlib import Path
from typing import Iterator

import pyspark

SPARK_HOME = Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOCAL_HOSTNAME="localhost",
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=os.environ.get("PYSPARK_PYTHON", sys.executable),
    )
    env.pop("SPARK_REMOTE", None)
    env.pop("SPARK_MASTER", None)
    return env


def _wait_port(port: int, proc: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited early with {proc.returncode}:\n{log.read_text()[-3000:]}")
        with socket.socket() as s:
            s.settimeout(0.5)
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"service did not open port {port} within {timeout}s:\n{log.read_text()[-3000:]}")


def _wait_log(log: Path, needle: str, proc: subprocess.Popen, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"service exited early with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if needle in log.read_text(errors="replace"):
            return
        time.sleep(0.5)
    raise RuntimeError(f"{needle!r} not seen within {timeout}s:\n{log.read_text()[-3000:]}")


def _start(cmd: list[str], log: Path) -> subprocess.Popen:
    fh = log.open("wb")
    return subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT, env=loopback_env(), start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


@contextlib.contextmanager
def standalone_cluster(workdir: Path, cores: int = 2, memory: str = "2g") -> Iterator[str]:
    """A master and one worker; yields the ``spark://127.0.0.1:<port>`` URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui, wui = free_port(), free_port(), free_port()
    master_log, worker_log = workdir / "master.log", workdir / "worker.log"
    master = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(ui)], master_log)
    worker = None
    try:
        _wait_port(port, master, master_log)
        url = f"spark://127.0.0.1:{port}"
        worker = _start([spark_class, "org.apache.spark.deploy.worker.Worker", url, "--host", "127.0.0.1",
                         "--cores", str(cores), "--memory", memory, "--webui-port", str(wui),
                         "--work-dir", str(workdir / "worker")], worker_log)
        _wait_log(master_log, "Registering worker", master)
        yield url
    finally:
        if worker is not None:
            _stop(worker)
        _stop(master)


@contextlib.contextmanager
def connect_server(workdir: Path) -> Iterator[str]:
    """A Spark Connect server (local[2] inside); yields the ``sc://127.0.0.1:<port>`` URL."""
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    log = workdir / "connect.log"
    cmd = [
        str(SPARK_HOME / "bin" / "spark-submit"),
        "--class", "org.apache.spark.sql.connect.service.SparkConnectServer",
        "--name", "stream-incident-test-connect",
        "--master", "local[2]",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.session.timeZone=UTC",
        "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.driver.host=127.0.0.1",
        "--conf", "spark.driver.bindAddress=127.0.0.1",
        "spark-internal",
    ]
    proc = _start(cmd, log)
    try:
        _wait_port(port, proc, log, timeout=180)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(proc)
