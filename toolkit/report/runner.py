"""Running a notebook headless: a kernel on this interpreter, quiet, with its logs in the out dir.

papermill runs the notebook; the kernel's own stdout and stderr (ipykernel start-up notices, the
Spark JVM's console, shutdown messages) go to ``OUT/logs/kernel.log`` instead of the terminal,
unless ``--verbose``. What the command and the kernel tell each other (stage lines, the outcome, the verbosity)
goes through :mod:`toolkit.report.channel`; stage lines are echoed as they come.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from toolkit.progress import FollowFile, Progress
from toolkit.report.channel import EXIT_FAILED, KernelChannel, KernelOutcome
from toolkit.shipped import IMPORT_ROOT

#: The folder holding the ``toolkit`` package, put on the kernel's ``PYTHONPATH``.
PACKAGE_ROOT = IMPORT_ROOT

#: Name of the kernelspec written for this interpreter when ``python3`` points elsewhere.
PRIVATE_KERNEL = "stream-incident-python"


class ReportError(RuntimeError):
    """The report notebook failed or its HTML is not self-contained; the message says where to look.

    ``exit_code`` follows the CLI's convention: 2 unusable input (the bundle could not be opened),
    3 no Spark session, 1 anything else.
    """

    def __init__(self, message: str, exit_code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ReportFiles:
    """What ``make_report`` wrote, and how the kernel's analysis ended."""

    html: Path
    notebook: Path
    findings: Path
    outcome: KernelOutcome | None = None


def _same_interpreter(argv0: str) -> bool:
    # jupyter_client swaps a bare "python"/"python3" for sys.executable; anything else must be us.
    if argv0 in {"python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"}:
        return True
    return os.path.abspath(argv0) == os.path.abspath(sys.executable)


@contextlib.contextmanager
def kernel_for_this_interpreter(scratch: Path) -> Iterator[str]:
    """Yield a kernel name whose kernel runs this interpreter (same venv, same toolkit).

    ``python3`` (shipped with ipykernel in the venv) is used when it resolves to this interpreter;
    otherwise (a user-level ``python3`` spec of another Python shadows it) a private kernelspec is
    written under ``scratch`` and put first on ``JUPYTER_PATH`` for the duration. Nothing is
    installed anywhere.
    """
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        spec = KernelSpecManager().get_kernel_spec("python3")
        usable = bool(spec.argv) and _same_interpreter(spec.argv[0])
    except NoSuchKernel:
        usable = False
    saved = {k: os.environ.get(k) for k in ("JUPYTER_PATH", "PYTHONPATH")}
    # The kernel must import the same toolkit even when it is not installed (a source checkout).
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(PACKAGE_ROOT), saved["PYTHONPATH"]]))
    try:
        if usable:
            yield "python3"
            return
        kernel_dir = scratch / "jupyter" / "kernels" / PRIVATE_KERNEL
        kernel_dir.mkdir(parents=True, exist_ok=True)
        (kernel_dir / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "stream-incident (this Python)", "language": "python"}), encoding="utf-8")
        os.environ["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(scratch / "jupyter"), saved["JUPYTER_PATH"]]))
        yield PRIVATE_KERNEL
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


#: Seconds a kernel whose notebook has finished gets to exit: half of it after the shutdown request,
#: then it is terminated (SIGTERM to its process group, so its Spark driver runs its own clean-up), and
#: the other half before it is killed. A kernel holding a Spark session does not exit on the request
#: alone, and jupyter_client's default (5 s) added 2.5 s to every report.
KERNEL_SHUTDOWN_WAIT_S = 1.0


def report_kernel_manager(log_path: Path | None) -> type:
    """A kernel manager class for report runs: short shutdown (:data:`KERNEL_SHUTDOWN_WAIT_S`) and, with
    ``log_path``, kernels that write their console output there."""
    from jupyter_client.manager import AsyncKernelManager

    class ReportKernelManager(AsyncKernelManager):
        shutdown_wait_time = KERNEL_SHUTDOWN_WAIT_S

        async def start_kernel(self, **kw: Any) -> None:
            if log_path is None:
                await AsyncKernelManager.start_kernel(self, **kw)
                return
            log_path.parent.mkdir(parents=True, exist_ok=True)
            sink = open(log_path, "ab")  # noqa: SIM115 - the kernel process keeps it open
            kw.setdefault("stdout", sink)
            kw.setdefault("stderr", sink)
            try:
                await AsyncKernelManager.start_kernel(self, **kw)
            finally:
                sink.close()  # the child has its own copy of the descriptor

    return ReportKernelManager


def load_notebook_engine() -> None:
    """Import papermill and the Jupyter client it runs kernels with, on the calling thread.

    Call it before another thread imports nbconvert (which imports the same client): two threads
    importing that package at once can meet its modules half-initialised and fail with an ImportError."""
    import papermill  # noqa: F401


def execute_notebook(notebook: Path, output: Path, parameters: dict[str, Any], cwd: Path,
                     progress: Progress | None = None, timeout_s: int = 1800,
                     log_dir: Path | None = None, verbose: bool = False,
                     channel: KernelChannel | None = None) -> Path:
    """Run a notebook headless with papermill on this interpreter's kernel and return ``output``; raise ReportError
    on failure.

    The notebook gets the ``command_channel`` parameter (``channel``; by default a
    :class:`toolkit.report.channel.KernelChannel` in ``log_dir``, or beside ``output``): stage lines it writes there
    are passed to ``progress`` while it runs, and an analysis that failed raises ReportError with the sentence and
    exit code of the outcome it wrote (``channel.read()`` gives the outcome of a run that did not fail). With
    ``log_dir`` (and not ``verbose``) the kernel's console output lands in ``log_dir/kernel.log``.
    """
    import papermill as pm

    say = progress or (lambda _m: None)
    output.parent.mkdir(parents=True, exist_ok=True)
    manager = report_kernel_manager(log_dir / "kernel.log" if log_dir is not None and not verbose else None)
    channel = channel or KernelChannel(folder=log_dir or output.parent, verbose=verbose)
    channel.clear()
    with tempfile.TemporaryDirectory(prefix="stream-incident-kernel-") as scratch, \
            kernel_for_this_interpreter(Path(scratch)) as kernel, FollowFile(channel.progress_file, say):
        say(f"running {notebook.name} on kernel {kernel}")
        try:
            pm.execute_notebook(str(notebook), str(output),
                                parameters={**parameters, "command_channel": channel.to_parameter()},
                                kernel_name=kernel, cwd=str(cwd), progress_bar=False, log_output=False,
                                execution_timeout=timeout_s, kernel_manager_class=manager)
        except pm.PapermillExecutionError as exc:
            outcome = channel.read()
            if outcome is not None and outcome.status == "failed":
                raise ReportError(outcome.message or exc.ename, outcome.exit_code) from exc
            raise ReportError(f"the notebook failed in cell {exc.exec_count}: {exc.ename}: {exc.evalue} "
                              f"(see {output})") from exc
    return output
