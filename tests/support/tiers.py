"""The three test tiers and what makes a test end-to-end (see tests/conftest.py and docs/development/index.md)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

import pytest

#: unit: no Spark; spark: the shared session; e2e: a process, kernel, browser, cluster or venv of its own.
TIERS = ("unit", "spark", "e2e")
#: nodeid -> (tier markers, uses the spark fixture) of every collected test, before ``-m`` deselects any.
COLLECTED_TIERS = pytest.StashKey[dict]()

#: Programs that make a test end-to-end: a JVM, Spark's launchers, the browser, Jupyter, pip, the CLI.
_PROGRAMS = {"java", "spark-submit", "spark-class", "chromium", "chromedriver", "jupyter", "jupyter-lab", "pip",
             "stream-incident"}
#: ``python -m`` modules that do: the CLI, a kernel, JupyterLab, a wheel build, a new venv.
_MODULES = {"toolkit.cli", "ipykernel_launcher", "ipykernel", "jupyterlab", "pip", "build", "venv", "ensurepip",
            "papermill"}


def starts_own_process(args: str | os.PathLike | Sequence) -> str | None:
    """What ``subprocess.Popen(args)`` starts when it is one of the end-to-end kinds, else None.

    A Python interpreter counts when it runs one of ``_MODULES`` or code that imports the toolkit or PySpark;
    short helpers (``python -c pass`` for a dead pid, a stand-alone stdlib script, ``bash``) do not."""
    argv = [os.fspath(a) for a in args] if isinstance(args, Sequence) and not isinstance(args, str) else [
        os.fspath(args)]
    if not argv:
        return None
    program = os.path.basename(argv[0])
    if program in _PROGRAMS:
        return program
    if program.startswith("python") or argv[0] == sys.executable:
        rest = argv[1:]
        for flag, value in zip(rest, rest[1:]):
            if flag == "-m" and value in _MODULES:
                return f"python -m {value}"
            if flag == "-c" and ("toolkit" in value or "pyspark" in value):
                return "python -c <toolkit or pyspark code>"
    return None
