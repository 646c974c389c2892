"""How the embedded driver JVM is started, and how much work a bundle is, so a small one runs in seconds.

A command on a small bundle spends its time in a cold JVM, not on the data: compiling Spark's own
code with the optimising JIT, and compiling Java source for every query's generated code. Two
remedies for inputs up to :data:`SMALL_INPUT_BYTES`, each measured on the shipped samples:

* **Quick JIT**: the first-tier compiler only, which compiles in a fraction of the time; for
  gigabytes the optimising compiler pays for itself, so larger inputs keep it.
* **Interpreted expressions** (:func:`plan_for_input`): no Java source per query."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterable

#: Inputs up to this many bytes (estimated uncompressed) run with the small-input settings.
SMALL_INPUT_BYTES = 32 * 2**20
#: Compressed files and archives count this many times their size (log text compresses about 8-15x).
COMPRESSED_FACTOR = 10
_COMPRESSED = (".gz", ".tgz", ".zip", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".snappy")

#: Session settings for small inputs: expressions are evaluated by the interpreter instead of being
#: compiled to Java per query (Spark's own internal switch; a server that refuses it keeps compiling).
SMALL_INPUT_SQL_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
_APPLIED_MARK = "stream_incident.small_input_plan"
#: A line longer than this many characters turns generated code back on: interpreted expressions do
#: not share common subexpressions, so each step of the per-line parse copies such a line again
#: (a 20 MB line then exhausts a 2 GB heap).
LONG_LINE_CHARS = 1 << 20

#: The JIT for a short-lived JVM: first tier only, with room for everything it compiles (the first-tier
#: default of 48 MB fills up on a sample, and a full code cache fails queries).
QUICK_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=512m")
#: The JVM's own warnings go to stderr, which is the Spark log
#: file; by default they go to stdout, where they would mix with a command's JSON.
LOG_OPTIONS = ("-Xlog:disable", "-Xlog:all=warning:stderr")


def input_bytes(paths: Iterable[str | os.PathLike]) -> int:
    """Estimated uncompressed bytes of the files under ``paths`` (directories walked, links not followed)."""
    total = 0
    for path in paths:
        path = Path(path)
        files = [path] if not path.is_dir() else (
            Path(root) / name for root, _dirs, names in os.walk(path) for name in names)
        for file in files:
            try:
                size = file.lstat().st_size if file.is_file() else 0
            except OSError:
                continue
            total += size * COMPRESSED_FACTOR if file.name.lower().endswith(_COMPRESSED) else size
    return total


def is_small(size: int | None) -> bool:
    """True for a known size up to :data:`SMALL_INPUT_BYTES`."""
    return size is not None and size <= SMALL_INPUT_BYTES


def plan_for_input(spark: Any, size: int | None) -> None:
    """Set the session's expression evaluation for an input of ``size`` bytes.

    Small inputs get :data:`SMALL_INPUT_SQL_CONF`; a later, larger input in the same session gets
    Spark's defaults back (only if this function set them: a user's own choice is left alone)."""
    conf = spark.conf
    try:
        if is_small(size):
            for key, value in SMALL_INPUT_SQL_CONF.items():
                conf.set(key, value)
            conf.set(_APPLIED_MARK, "true")
        elif conf.get(_APPLIED_MARK, "false") == "true":
            for key in SMALL_INPUT_SQL_CONF:
                conf.unset(key)
            conf.unset(_APPLIED_MARK)
    except Exception:  # a Connect server may refuse internal settings: its defaults stand
        pass


def plan_for_lines(spark: Any, longest_line: int) -> None:
    """After the first pass over the text: generated code again when a line is longer than
    :data:`LONG_LINE_CHARS` (only if :func:`plan_for_input` had turned it off)."""
    if longest_line > LONG_LINE_CHARS:
        plan_for_input(spark, None)


def driver_java_options(size: int | None) -> list[str]:
    """Extra options for an embedded driver JVM that will read about ``size`` bytes (None: unknown)."""
    options = list(LOG_OPTIONS)
    if is_small(size):
        options += QUICK_JIT_OPTIONS
    return options
