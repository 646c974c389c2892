"""Running a notebook headless in a test, watched: a kernel that stalls has its Python threads and its Spark
driver's threads written down (faulthandler, jstack) before it is stopped, and the run is tried once more.

A notebook run in CI has stalled, now and then, inside a cell that takes seconds on a quiet machine; the watch turns
an unexplained 15-minute timeout into dumps that say where it waited, and one fresh kernel.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
import warnings
from pathlib import Path
from typing import Any

#: Seconds one attempt may take (a run takes under a minute on the 2-core machine, under load two).
STALL_S = 360


def _descendants(pid: int) -> list[tuple[int, str]]:
    table = subprocess.run(["ps", "-eo", "pid=,ppid=,args="], capture_output=True, text=True).stdout.splitlines()
    children: dict[int, list[tuple[int, str]]] = {}
    for row in table:
        parts = row.split(None, 2)
        if len(parts) == 3:
            children.setdefault(int(parts[1]), []).append((int(parts[0]), parts[2]))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child[0])
    return found


def _dump_and_stop(log_dir: Path) -> None:
    """jstack every Spark driver under this process, have its kernels write their threads (SIGUSR1, see
    :func:`_kernel_startup`), then kill the kernels."""
    found = _descendants(os.getpid())
    for pid, args in found:
        if "java" in args.split()[0] and "SparkSubmit" in args:
            with (log_dir / f"jstack-{pid}.txt").open("w") as out:
                subprocess.run(["jstack", str(pid)], stdout=out, stderr=subprocess.STDOUT, timeout=60)
    kernels = [pid for pid, args in found if "ipykernel" in args]
    for pid in kernels:
        os.kill(pid, signal.SIGUSR1)
    time.sleep(3)
    for pid in kernels:
        os.kill(pid, signal.SIGKILL)


def _kernel_startup(log_dir: Path) -> Path:
    """An IPython directory whose startup file makes a kernel write all its threads to ``log_dir`` on SIGUSR1
    (the kernel's own stderr is captured into the notebook, which is lost when a stalled kernel is killed)."""
    startup = log_dir / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    (startup / "00-thread-dump.py").write_text(
        "import faulthandler, signal\n"
        f"faulthandler.register(signal.SIGUSR1, file=open({str(log_dir / 'kernel-threads.txt')!r}, 'w'), "
        "all_threads=True)\n", encoding="utf-8")
    return log_dir / "ipython"


def run_notebook_watched(notebook: Path, output: Path, parameters: dict[str, Any], cwd: Path) -> Path:
    """``toolkit.report.execute_notebook`` with a watch (see the module's docstring); the kernel's console and any
    dumps land in ``output``'s folder under ``logs-<attempt>/``."""
    from toolkit import report

    saved = os.environ.get("IPYTHONDIR")
    try:
        for attempt in (1, 2):
            log_dir = output.parent / f"logs-{attempt}"
            log_dir.mkdir(parents=True, exist_ok=True)
            os.environ["IPYTHONDIR"] = str(_kernel_startup(log_dir))  # the kernel inherits it
            done = threading.Event()
            stalled = threading.Event()

            def watch() -> None:
                if not done.wait(STALL_S):
                    stalled.set()
                    _dump_and_stop(log_dir)

            threading.Thread(target=watch, daemon=True).start()
            try:
                return report.execute_notebook(notebook, output, parameters, cwd=cwd, log_dir=log_dir)
            except Exception:
                if attempt == 2 or not stalled.is_set():
                    raise
                threads = log_dir / "kernel-threads.txt"
                main = threads.read_text(errors="replace").split("\n\n")[-1] if threads.exists() else ""
                warnings.warn(f"{notebook.name} stalled for {STALL_S} s and was run again; its kernel's threads "
                              f"and Spark driver's are in {log_dir}; the kernel's main thread:\n{main}", stacklevel=2)
            finally:
                done.set()
    finally:
        if saved is None:
            os.environ.pop("IPYTHONDIR", None)
        else:
            os.environ["IPYTHONDIR"] = saved
    raise AssertionError("unreachable")
