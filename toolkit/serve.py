"""``stream-incident serve start|stop|status``: a long-lived local Spark Connect server for the CLI.

Every ``stream-incident`` command otherwise starts its own JVM, which costs seconds of start-up and
JIT warm-up before the first byte is parsed. A server started once keeps a warm JVM on loopback;
``parse``, ``timeline``, ``detect`` and ``report`` connect to it (``sc://127.0.0.1:PORT``) whenever
it is alive and neither ``--master`` nor ``--remote`` (nor ``$SPARK_MASTER``/``$SPARK_REMOTE``)
names another Spark. It runs until ``serve stop``.

The server is the Spark Connect server of the pip ``pyspark`` distribution, started with its
``bin/spark-submit``. Its pid, port and log live in ``<cache dir>/serve/`` (see
:func:`toolkit.cache.default_cache_dir`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Sequence

from toolkit.cache import default_cache_dir

CONNECT_SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
LOOPBACK = "127.0.0.1"
#: Seconds to wait for a new server's port: a cold JVM on a busy machine can take a minute.
START_TIMEOUT_S = 240.0


@dataclass(frozen=True)
class ServerInfo:
    """What the state file records about a running server."""

    pid: int
    port: int
    master: str
    driver_memory: str
    started: float
    log: str

    @property
    def url(self) -> str:
        return f"sc://{LOOPBACK}:{self.port}"


def state_dir() -> Path:
    return default_cache_dir() / "serve"


def state_file() -> Path:
    return state_dir() / "server.json"


def _read_state() -> ServerInfo | None:
    try:
        return ServerInfo(**json.loads(state_file().read_text()))
    except (OSError, ValueError, TypeError):
        return None


def _is_our_server(pid: int) -> bool:
    """The pid is alive and still the Connect server (a recycled pid is not)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # no /proc (macOS): fall back to "the pid exists"
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return CONNECT_SERVER_CLASS.encode() in cmdline


def _port_open(port: int, timeout: float = 1.0) -> bool:
    with socket.socket() as s:
        s.settimeout(timeout)
        return s.connect_ex((LOOPBACK, port)) == 0


def status() -> ServerInfo | None:
    """The running server, or None (a state file left by a dead server is removed)."""
    info = _read_state()
    if info is None:
        return None
    if _is_our_server(info.pid) and _port_open(info.port):
        return info
    if not _is_our_server(info.pid):
        state_file().unlink(missing_ok=True)
    return None


def running_url() -> str | None:
    """``sc://127.0.0.1:PORT`` of the running server, or None."""
    info = status()
    return info.url if info else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((LOOPBACK, 0))
        return s.getsockname()[1]


def _spark_home() -> Path:
    """The Spark installation the server runs from: the one the class archive is keyed by."""
    from toolkit.jvm import spark_home

    home = spark_home()
    if home is None:
        raise RuntimeError("no Spark installation found (install pyspark or set SPARK_HOME)")
    return home


def server_command(port: int, master: str, driver_memory: str) -> list[str]:
    """The ``spark-submit`` command line of a loopback-only Connect server with the toolkit's settings."""
    from toolkit.jvm import class_archive_options
    from toolkit.spark import quote_java_option, session_settings

    settings = session_settings(master, {"spark.driver.memory": driver_memory})
    # The same jars as an embedded driver: the machine's class archive (if built) starts it faster too.
    settings["spark.driver.extraJavaOptions"] = " ".join(
        [settings.get("spark.driver.extraJavaOptions", ""), *map(quote_java_option, class_archive_options())]).strip()
    settings.update({
        "spark.connect.grpc.binding.address": LOOPBACK,
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.host": LOOPBACK,
        "spark.driver.bindAddress": LOOPBACK,
    })
    cmd = [str(_spark_home() / "bin" / "spark-submit"), "--class", CONNECT_SERVER_CLASS,
           "--name", "stream-incident-serve", "--master", master, "--driver-memory", driver_memory]
    for key, value in settings.items():
        if key != "spark.driver.memory":
            cmd += ["--conf", f"{key}={value}"]
    return [*cmd, "spark-internal"]


def start(master: str = "local[*]", driver_memory: str | None = None, port: int | None = None,
          timeout: float = START_TIMEOUT_S) -> tuple[ServerInfo, bool]:
    """Start the server unless one is running; returns it and whether it was started now.

    Raises RuntimeError with the tail of the server log when it does not come up.
    """
    from toolkit.spark import default_driver_memory

    running = status()
    if running:
        return running, False
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    port = port or _free_port()
    driver_memory = driver_memory or default_driver_memory()
    log = folder / "server.log"
    env = {**os.environ, "SPARK_HOME": str(_spark_home()), "SPARK_LOCAL_IP": LOOPBACK,
           "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable)}
    for name in ("SPARK_REMOTE", "SPARK_MASTER", "SPARK_CONNECT_MODE_ENABLED"):
        env.pop(name, None)
    with log.open("wb") as out:
        # A session of its own: the server outlives this command and is stopped as a group.
        proc = subprocess.Popen(server_command(port, master, driver_memory), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=folder,
                                start_new_session=True)
    deadline = time.monotonic() + timeout
    while not _port_open(port, timeout=0.5):
        if proc.poll() is not None or time.monotonic() > deadline:
            _terminate(proc.pid)
            tail = log.read_text(errors="replace").strip().splitlines()[-20:]
            raise RuntimeError(f"the Spark Connect server did not open port {port} "
                               f"({'exited with ' + str(proc.returncode) if proc.returncode is not None else 'timed out'}); "
                               f"log {log}:\n" + "\n".join(tail))
        time.sleep(0.5)
    info = ServerInfo(pid=proc.pid, port=port, master=master, driver_memory=driver_memory, started=time.time(),
                      log=str(log))
    tmp = state_file().with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(info)))
    tmp.replace(state_file())
    return info, True


def _terminate(pid: int, grace: float = 30.0) -> None:
    """SIGTERM the server's process group, then SIGKILL what is left after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            if os.waitpid(pid, os.WNOHANG)[0] == pid:
                return
        if not _is_our_server(pid):
            return
        time.sleep(0.3)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def stop() -> ServerInfo | None:
    """Stop the running server; returns what was stopped (None when none was running)."""
    info = _read_state()
    if info is not None and _is_our_server(info.pid):
        _terminate(info.pid)
    else:
        info = None
    state_file().unlink(missing_ok=True)
    return info


# --------------------------------------------------------------------------- command line


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``serve`` arguments to ``parser`` (a sub-parser of ``stream-incident``) and return it."""
    p = parser or argparse.ArgumentParser(prog="stream-incident serve")
    p.description = ("Keep a warm local Spark Connect server for the other commands "
                     "(they use it while it runs, unless --master/--remote says otherwise).")
    p.add_argument("action", choices=("start", "stop", "status"))
    p.add_argument("--master", default="local[*]", help="where the server runs its work (default local[*])")
    p.add_argument("--driver-memory", help="JVM heap of the server (default: an eighth of RAM, 1g to 4g)")
    p.add_argument("--port", type=int, help="loopback port (default: a free one)")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``serve ACTION``: 0 done, 1 the server did not start, 3 ``status`` found none running."""
    if args.action == "start":
        try:
            info, started = start(master=args.master, driver_memory=args.driver_memory, port=args.port)
        except RuntimeError as exc:
            print(f"stream-incident: {exc}", file=sys.stderr)
            return 1
        verb = "started" if started else "already running"
        print(f"Spark Connect server {verb} at {info.url} (pid {info.pid}, {info.master}, "
              f"driver memory {info.driver_memory}); stop it with 'stream-incident serve stop'")
        return 0
    if args.action == "stop":
        info = stop()
        print(f"stopped the server at {info.url} (pid {info.pid})" if info else "no server was running")
        return 0
    info = status()
    if info is None:
        print("no server running")
        return 3
    up = time.time() - info.started
    print(f"running at {info.url} (pid {info.pid}, {info.master}, driver memory {info.driver_memory}, "
          f"up {up / 60:.0f} min; log {info.log})")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m toolkit.serve start|stop|status``."""
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
