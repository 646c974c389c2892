"""How the embedded driver JVM is started, and how much work a bundle is, so a small one runs in seconds.

A command on a small bundle spends its time in a cold JVM, not on the data: loading and verifying
some twenty thousand classes, compiling Spark's own code with the optimising JIT, and compiling Java
source for every query's generated code. Three remedies, each measured on the shipped samples:

* **A class archive** (Java's class-data sharing): the first embedded session writes the classes it
  loaded into ``<cache>/jvm/`` when it ends; later sessions map them instead of loading them. The
  archive is used only once the JVM that wrote it has exited cleanly (a half-written archive would
  crash the next JVM), and only by the same Java and the same Spark jars (the file name says which).
* **Quick JIT** for small inputs: the first-tier compiler only, which compiles in a fraction of the
  time; for gigabytes the optimising compiler pays for itself, so larger inputs keep it.
* **Interpreted expressions** for small inputs (:func:`plan_for_input`): no Java source per query.

``STREAM_INCIDENT_CLASS_ARCHIVE=0`` turns the class archive off; ``STREAM_INCIDENT_CLASS_ARCHIVE_DIR``
keeps it somewhere else than ``<cache>/jvm``.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
from pathlib import Path
from typing import Any, Iterable

from toolkit.shipped import default_cache_dir

#: Inputs up to this many bytes (estimated uncompressed) run with the small-input settings.
SMALL_INPUT_BYTES = 32 * 2**20
#: Compressed files and archives count this many times their size (log text compresses about 8-15x).
COMPRESSED_FACTOR = 10
_COMPRESSED = (".gz", ".tgz", ".zip", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".snappy")

ARCHIVE_ENV = "STREAM_INCIDENT_CLASS_ARCHIVE"
#: Where class archives are kept, when not in ``<cache>/jvm``.
ARCHIVE_DIR_ENV = "STREAM_INCIDENT_CLASS_ARCHIVE_DIR"

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
#: The JVM's own warnings (class archive notices among them) go to stderr, which is the Spark log
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


def _java_executable() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(shutil.which("java")) if shutil.which("java") else None)
    return found.resolve() if found and found.exists() else None


def _spark_jars() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    home = os.environ.get("SPARK_HOME")
    jars = Path(home) / "jars" if home else Path(pyspark.__file__).resolve().parent / "jars"
    return jars if jars.is_dir() else None


def archive_key() -> str | None:
    """Names the Java build and the Spark jars an archive belongs to (None when either is unknown)."""
    java, jars = _java_executable(), _spark_jars()
    if java is None or jars is None:
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}|{stat.st_size}|{stat.st_mtime_ns}".encode())
    for jar in sorted(jars.iterdir()):
        digest.update(f"|{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    """Where class archives are kept: ``$STREAM_INCIDENT_CLASS_ARCHIVE_DIR``, else ``<cache>/jvm``."""
    named = os.environ.get(ARCHIVE_DIR_ENV)
    return Path(named) if named else default_cache_dir() / "jvm"


def archive_enabled() -> bool:
    return os.environ.get(ARCHIVE_ENV, "1").strip().lower() not in ("0", "off", "false", "no")


def archive_will_be_written() -> bool:
    """True when the next embedded driver JVM started here would write the class archive (none yet)."""
    key = archive_key() if archive_enabled() else None
    return key is not None and not (archive_dir() / f"classes-{key}.jsa").is_file()


def class_archive_options(directory: Path | None = None) -> list[str]:
    """JVM options that use this machine's class archive, or that write it when this JVM ends.

    Writing: the JVM dumps into a file of its own, which :func:`finish_class_archive` (run at exit)
    renames once that JVM has exited with status 0. Returns ``[]`` when the archive is turned off or
    the Java build or Spark jars cannot be identified."""
    key = archive_key() if archive_enabled() else None
    if key is None:
        return []
    directory = directory or archive_dir()
    final = directory / f"classes-{key}.jsa"
    if final.is_file():
        return [f"-XX:SharedArchiveFile={final}"]
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return []
    _remove_abandoned(directory)
    partial = directory / f"classes-{key}.{os.getpid()}.partial"
    _pending.update(partial=partial, final=final)
    return [f"-XX:ArchiveClassesAtExit={partial}"]


_pending: dict[str, Path] = {}


def _remove_abandoned(directory: Path) -> None:
    """Delete archives being written by processes that no longer run (killed before their JVM ended)."""
    for partial in directory.glob("classes-*.partial"):
        try:
            pid = int(partial.suffixes[-2].lstrip("."))
            os.kill(pid, 0)
        except ProcessLookupError:
            partial.unlink(missing_ok=True)
        except (ValueError, IndexError, OSError):
            continue


def finish_class_archive(timeout_s: float = 120.0) -> bool:
    """If this process's JVM is writing a class archive: end the JVM, wait for it, and keep the archive
    only when the JVM exited with status 0. Returns True when an archive was kept."""
    partial, final = _pending.pop("partial", None), _pending.pop("final", None)
    if partial is None or final is None:
        return False
    return keep_class_archive(partial, final, _end_jvm(timeout_s))


def _end_jvm(timeout_s: float) -> int | None:
    """Stop the session, end the embedded driver JVM and wait for it; its exit status (None: unknown)."""
    proc = _gateway_process()
    if proc is None:
        return None
    # Each step on its own: in a notebook kernel that is shutting down, the JVM may already be ending
    # (its gateway refuses connections) and only the wait is left to do.
    try:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            active.stop()
    except Exception:
        pass
    try:
        if proc.stdin is not None:
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
    except Exception:
        pass
    try:
        return proc.wait(timeout=timeout_s)
    except Exception:  # never fail a command over an optimisation
        return None


def keep_class_archive(partial: Path, final: Path, exit_status: int | None) -> bool:
    """Rename ``partial`` to ``final`` when the JVM that wrote it exited with status 0; else delete it."""
    kept = exit_status == 0 and partial.is_file() and partial.stat().st_size > 0
    try:
        if kept:
            os.replace(partial, final)
    except OSError:
        kept = False
    if not kept:
        partial.unlink(missing_ok=True)
    return kept


def _gateway_process() -> Any:
    """The process of the embedded driver JVM this Python process launched, if any."""
    try:
        from pyspark import SparkContext
    except ImportError:
        return None
    gateway = getattr(SparkContext, "_gateway", None)
    return getattr(gateway, "proc", None)


def jvm_running() -> bool:
    """True when this process already launched its driver JVM (new options would not apply)."""
    return _gateway_process() is not None


def driver_java_options(size: int | None) -> list[str]:
    """Extra options for an embedded driver JVM that will read about ``size`` bytes (None: unknown).

    Call :func:`after_start` once the session is up."""
    options = list(LOG_OPTIONS)
    if is_small(size):
        options += QUICK_JIT_OPTIONS
    return options + class_archive_options()


def after_start() -> None:
    """Once the driver JVM runs: if it writes a class archive, finish it when this process exits
    (registered after Spark's own exit handlers, so it runs before them), or, in a Jupyter kernel,
    when the kernel is asked to shut down."""
    if _pending:
        atexit.register(finish_class_archive)
        _finish_before_kernel_shutdown()


def _finish_before_kernel_shutdown() -> bool:
    """A Jupyter kernel terminates its child processes when asked to shut down, before any exit
    handler runs: a JVM ended that way keeps no archive. Finish it first, from the kernel's own
    shutdown step. Returns False outside a kernel."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    kernel = getattr(get_ipython(), "kernel", None)
    if kernel is None or not hasattr(kernel, "do_shutdown"):
        return False
    shutdown = kernel.do_shutdown

    def finish_then_shut_down(restart: bool) -> Any:
        finish_class_archive()
        return shutdown(restart)

    kernel.do_shutdown = finish_then_shut_down
    return True
