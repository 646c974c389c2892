"""Progress of the pipeline's stages: one line per stage, with its counts and the elapsed time.

The stages already describe themselves with counts (``parsing 14 log files (2.1 MB) on Spark``);
this module decides where those messages go:

* :func:`console_progress` — one ``[  12.3s] message`` line per stage on stderr (the CLI);
* :func:`notebook_progress` — one tqdm bar whose description is the current stage (notebooks);
* :func:`file_progress` — one line per stage appended to a file, which ``stream-incident report``
  follows while the report notebook runs in its kernel (:mod:`toolkit.report.channel`).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, TextIO

Progress = Callable[[str], None]

def silent(_message: str) -> None:
    """A progress callback that shows nothing."""


def console_progress(enabled: bool = True, stream: TextIO | None = None) -> Progress:
    """``[  12.3s] message`` on stderr per stage; elapsed time counts from this call."""
    start = time.monotonic()

    def say(message: str) -> None:
        if enabled:
            print(f"[{time.monotonic() - start:6.1f}s] {message}", file=stream or sys.stderr, flush=True)

    return say


def file_progress(path: str | os.PathLike) -> Progress:
    """Append one line per stage to ``path`` (flushed at once, so a reader can follow it)."""
    target = Path(path)

    def say(message: str) -> None:
        with target.open("a", encoding="utf-8") as fh:
            fh.write(message.replace("\n", " ") + "\n")

    return say


def notebook_progress(description: str = "analysis") -> Progress:
    """A tqdm bar in the notebook: one step per stage, the stage as its description, elapsed time shown."""
    from tqdm.auto import tqdm

    bar = tqdm(total=None, desc=description, unit=" stages", bar_format="{desc} · {n_fmt} stages · {elapsed}",
               leave=True)

    def say(message: str) -> None:
        bar.set_description_str(message[:120], refresh=False)
        bar.update(1)

    return say


def default_progress() -> Progress:
    """In a notebook: a tqdm bar; elsewhere: lines on stderr. (``stream-incident report``'s kernel writes to the
    command's progress file instead: :meth:`toolkit.report.channel.KernelChannel.progress`.)"""
    if _in_kernel():
        return notebook_progress()
    return console_progress()


def _in_kernel() -> bool:
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and shell.__class__.__name__ == "ZMQInteractiveShell"


class FollowFile:
    """Echo the lines another process appends to a file, while a ``with`` block runs (a thread)."""

    def __init__(self, path: Path, say: Progress, interval_s: float = 0.3) -> None:
        self.path, self.say, self.interval_s = path, say, interval_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="follow-progress", daemon=True)
        self._pos = 0

    def __enter__(self) -> "FollowFile":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text("", encoding="utf-8")
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._drain()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._drain()

    def _drain(self) -> None:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self._pos)
                chunk = fh.read()
        except FileNotFoundError:
            return
        # Only whole lines: a line being written is picked up on the next pass.
        done = chunk[:chunk.rfind(b"\n") + 1]
        self._pos += len(done)
        for line in done.decode("utf-8", "replace").splitlines():
            if line.strip():
                self.say(line)
