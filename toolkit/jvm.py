"""How the embedded driver JVM is started, and how much work a bundle is, so a small one runs in seconds.

A command on a small bundle spends its time in a cold JVM, not on the data: compiling Spark's own
code with the optimising JIT, and compiling Java source for every query's generated code. Two
remedies for inputs up to :data:`SMALL_INPUT_BYTES`, each measured on the shipped samples:

* **Quick JIT**: the first-tier compiler only, which compiles in a fraction of the time; for
  gigabytes the optimising compiler pays for itself, so larger inputs keep it.
* **Interpreted expressions** (:func:`plan_for_input`): no Java source per query; on a local
  master, no adaptive query stages or automatic broadcasts either (fewer Spark jobs per query).

Larger inputs get the throughput collector (:data:`THROUGHPUT_GC_OPTIONS`) unless the user chose one.

For every input, a driver starts with this machine's class archive when ``stream-incident warm-up``
has built one (:mod:`toolkit.warmup`)."""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Iterable

from toolkit.shipped import default_cache_dir, env_switch

#: Set to ``0`` (or ``off``, ``false``, ``no``) to start embedded drivers without the class archive.
ARCHIVE_ENV = "STREAM_INCIDENT_CLASS_ARCHIVE"
#: Where the class archive is kept, when not in ``<cache>/jvm`` (e.g. a run with a throw-away cache that
#: should still start with this machine's archive).
ARCHIVE_DIR_ENV = "STREAM_INCIDENT_CLASS_ARCHIVE_DIR"
#: Set to ``0`` (or ``off``, ``false``, ``no``) to keep bytecode verification on in the driver of a small input
#: (see :data:`NO_VERIFY_OPTIONS`).
SKIP_VERIFY_ENV = "STREAM_INCIDENT_SKIP_CLASS_VERIFICATION"
#: Inputs up to this many bytes (estimated uncompressed) run with the small-input settings.
SMALL_INPUT_BYTES = 32 * 2**20
#: Compressed files and archives count this many times their size (log text compresses about 8-15x).
COMPRESSED_FACTOR = 10
_COMPRESSED = (".gz", ".tgz", ".zip", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".snappy")

#: Session settings for small inputs: expressions are evaluated by the interpreter instead of being
#: compiled to Java per query (Spark's own internal switch; a server that refuses it keeps compiling);
#: on a local master, no adaptive query stages, no automatic broadcast joins and no shuffles between
#: single partitions either (see :data:`LOCAL_ONLY_SQL_CONF`).
SMALL_INPUT_SQL_CONF = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.maxSinglePartitionBytes": str(2**62),
    "spark.sql.shuffle.partitions": "1",
}
#: Small-input settings applied on a local master only. A small bundle's tables are single partitions, so
#: a join needs neither a shuffle nor a broadcast, and each adaptive stage or broadcast is one more Spark job
#: (about 37 of a sample's 88). Spark joins two single partitions in place only while it estimates each side
#: below ``maxSinglePartitionBytes`` (128 MB); its estimate for the output of a join is the product of the
#: inputs' sizes, so a join of a join was shuffled; and where a shuffle remains (an inner join's output
#: joined again), one output partition instead of a task per core. A cluster keeps Spark's settings:
#: without adaptive execution its unpinned shuffle width (200 by default) would not be narrowed to what a
#: small input needs.
LOCAL_ONLY_SQL_CONF = frozenset({"spark.sql.adaptive.enabled", "spark.sql.autoBroadcastJoinThreshold",
                                 "spark.sql.maxSinglePartitionBytes", "spark.sql.shuffle.partitions"})
_APPLIED_MARK = "stream_incident.small_input_plan"
#: A line longer than this many characters turns generated code back on: interpreted expressions do
#: not share common subexpressions, so each step of the per-line parse copies such a line again
#: (a 20 MB line then exhausts a 2 GB heap).
LONG_LINE_CHARS = 1 << 20

#: The JIT for a short-lived JVM: first tier only, with room for everything it compiles (the first-tier
#: default of 48 MB fills up on a sample, and a full code cache fails queries).
QUICK_JIT_OPTIONS = ("-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=512m")
#: No bytecode verification of the classes loaded from jars. A short-lived driver of a small input spent
#: 2-4 s of its start verifying the twenty thousand classes it loads, all from the JDK and the Spark
#: jars installed with it (classes the class archive holds were verified when it was written, and the
#: archive is written with verification on). A diagnostic switch since Java 13, hence the unlock option;
#: only given to the Java releases in :data:`NO_VERIFY_JAVA`.
NO_VERIFY_OPTIONS = ("-XX:+UnlockDiagnosticVMOptions", "-XX:-BytecodeVerificationRemote")
#: Java feature releases known to take :data:`NO_VERIFY_OPTIONS` (Spark 4 needs 17 or newer).
NO_VERIFY_JAVA = range(17, 22)
#: The collector of the driver of an input larger than :data:`SMALL_INPUT_BYTES`: Java's throughput collector instead
#: of its default (G1). Parsing gigabytes is a batch job that wants the most work per CPU second, not short pauses
#: (G1 does part of its work beside the task threads and gives them a heavier write barrier): a first analysis
#: of a 2 GB bundle took 193-207 s instead of 225-227 s on ``local[2]``, a cold ``detect`` 229 s instead of 233 s
#: (see ``benchmarks/RESULTS.md``). Not for small or unknown inputs: this collector keeps its old generation at
#: a fixed share of the heap, and the test suite's session, which analyses bundle after bundle, filled it and
#: collected over and over, where G1 resizes its generations; a driver started without a size (``serve``, a
#: kernel's own ``get_spark()``) may live as long.
THROUGHPUT_GC_OPTIONS = ("-XX:+UseParallelGC",)
#: Where a user's own JVM options reach the driver besides the session's settings: a collector named in one
#: of them keeps :data:`THROUGHPUT_GC_OPTIONS` out (a JVM given two collectors refuses to start).
USER_JAVA_OPTION_ENVS = ("JDK_JAVA_OPTIONS", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "PYSPARK_SUBMIT_ARGS")
#: A JVM option that chooses a garbage collector.
_COLLECTOR_CHOICE = re.compile(r"-XX:\+Use(?:Serial|Parallel|ParallelOld|G1|Z|Shenandoah|Epsilon|ConcMarkSweep)GC\b")
#: The JVM's own warnings go to stderr, which is the Spark log
#: file; by default they go to stdout, where they would mix with a command's JSON.
LOG_OPTIONS = ("-Xlog:disable", "-Xlog:all=warning:stderr")
#: Let the JIT compile methods of any size. HotSpot leaves a method of more than 8000 bytes of bytecode to the
#: interpreter for good; the code Spark generates for reading one log line (a layout's fields, its time, the
#: record's flags) is one such method, and interpreted it ran the per-line parse two to three times slower.
JIT_OPTIONS = ("-XX:-DontCompileHugeMethods",)


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

    Small inputs get :data:`SMALL_INPUT_SQL_CONF` (less :data:`LOCAL_ONLY_SQL_CONF` off a local master); a
    later, larger input in the same session gets back what the session had before (the value it was given
    at start or by its user, else Spark's default). A setting changed in between is the user's and stays."""
    conf = spark.conf
    local = _is_local_master(conf)
    ours = [key for key in SMALL_INPUT_SQL_CONF if local or key not in LOCAL_ONLY_SQL_CONF]
    applied = _try(conf.get, _APPLIED_MARK, None)
    if is_small(size):
        if not applied:  # a second small input keeps the first one's record of what was there before
            before = {key: _try(conf.get, key, None) for key in ours}
            _try(conf.set, _APPLIED_MARK, json.dumps(before))
        for key in ours:
            _try(conf.set, key, SMALL_INPUT_SQL_CONF[key])
    elif applied:
        for key, value in json.loads(applied).items():
            if _try(conf.get, key, None) != SMALL_INPUT_SQL_CONF[key]:
                continue  # changed since: the user's choice
            if value is None:
                _try(conf.unset, key)
            else:
                _try(conf.set, key, value)
        _try(conf.unset, _APPLIED_MARK)


def _try(call: Any, *args: str) -> Any:
    """One session-setting call; a Connect server may refuse internal settings, and its defaults then stand."""
    try:
        return call(*args)
    except Exception:
        return None


def _is_local_master(conf: Any) -> bool:
    """The session (or the Connect server behind it) runs on a ``local`` master."""
    try:
        return str(conf.get("spark.master", "")).startswith("local")
    except Exception:  # a server that does not say: treated as a cluster
        return False


def plan_for_lines(spark: Any, longest_line: int) -> None:
    """After the first pass over the text: generated code again when a line is longer than
    :data:`LONG_LINE_CHARS` (only if :func:`plan_for_input` had turned it off)."""
    if longest_line > LONG_LINE_CHARS:
        plan_for_input(spark, None)


def driver_java_options(size: int | None, *, archive: bool = True, verify: bool = False,
                        user_options: str = "") -> list[str]:
    """Extra options for an embedded driver JVM that will read about ``size`` bytes (None: unknown): the
    quick JIT for a small input, the throughput collector for a larger one unless ``user_options`` (the driver
    options the caller gives the session) or the environment choose a collector (:func:`collector_options`);
    with ``archive``, this machine's class archive when it has one (:mod:`toolkit.warmup` builds it); with
    ``verify``, bytecode verification stays on whatever the size (see :func:`skips_verification`)."""
    options = [*LOG_OPTIONS, *JIT_OPTIONS]
    if is_small(size):
        options += QUICK_JIT_OPTIONS
        if not verify and skips_verification():
            options += NO_VERIFY_OPTIONS
    elif size is not None:
        options += collector_options(user_options)
    return options + (class_archive_options() if archive else [])


def collector_options(user_options: str = "") -> list[str]:
    """:data:`THROUGHPUT_GC_OPTIONS`, or ``[]`` when the user's own JVM options already choose a collector: in
    ``user_options``, in one of :data:`USER_JAVA_OPTION_ENVS` or in ``spark.driver.defaultJavaOptions`` of Spark's
    defaults file."""
    chosen = [user_options, *(os.environ.get(name, "") for name in USER_JAVA_OPTION_ENVS),
              _spark_defaults_java_options()]
    return [] if any(_COLLECTOR_CHOICE.search(text) for text in chosen) else list(THROUGHPUT_GC_OPTIONS)


def _spark_defaults_java_options() -> str:
    """The ``spark.driver.defaultJavaOptions`` line of ``spark-defaults.conf`` (``$SPARK_CONF_DIR``, else the
    Spark installation's ``conf``), which Spark puts before every driver's own options; ``""`` when none."""
    home = spark_home()
    conf_dir = os.environ.get("SPARK_CONF_DIR") or (str(home / "conf") if home else "")
    try:
        text = (Path(conf_dir) / "spark-defaults.conf").read_text(encoding="utf-8") if conf_dir else ""
    except OSError:
        return ""
    found = re.search(r"^\s*spark\.driver\.defaultJavaOptions[\s=]+(.*)$", text, re.MULTILINE)
    return found.group(1) if found else ""


def skips_verification() -> bool:
    """True when a small input's driver starts without bytecode verification (:data:`NO_VERIFY_OPTIONS`): not
    turned off by ``$STREAM_INCIDENT_SKIP_CLASS_VERIFICATION``, and a Java release that takes the options."""
    return env_switch(SKIP_VERIFY_ENV, default=True) and java_feature_release() in NO_VERIFY_JAVA


@functools.cache
def java_feature_release() -> int | None:
    """The feature release (17, 21...) of the Java that would run Spark, from its ``release`` file; None when
    unknown."""
    java = _java_executable()
    try:
        text = (java.parent.parent / "release").read_text(encoding="utf-8") if java else ""
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="(\d+)', text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _java_executable() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    found = Path(home) / "bin" / "java" if home else (Path(shutil.which("java")) if shutil.which("java") else None)
    return found.resolve() if found and found.exists() else None


def spark_home() -> Path | None:
    """``$SPARK_HOME``, else the installed ``pyspark`` package (which carries the jars and ``bin/``)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home)
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).resolve().parent


def archive_key() -> str | None:
    """A digest naming the Java build and the Spark jars an archive belongs to (None when either is unknown)."""
    java, home = _java_executable(), spark_home()
    jars = home / "jars" if home else None
    if java is None or jars is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    stat = java.stat()
    digest.update(f"{java}|{stat.st_size}|{stat.st_mtime_ns}|{home}".encode())
    for jar in sorted(jars.iterdir()):
        digest.update(f"|{jar.name}:{jar.stat().st_size}".encode())
    return digest.hexdigest()[:16]


def archive_dir() -> Path:
    """Where the archive is kept: ``$STREAM_INCIDENT_CLASS_ARCHIVE_DIR``, else ``<cache>/jvm``."""
    named = os.environ.get(ARCHIVE_DIR_ENV)
    return Path(named) if named else default_cache_dir() / "jvm"


def archive_enabled() -> bool:
    """False when ``$STREAM_INCIDENT_CLASS_ARCHIVE`` turns the archive off."""
    return env_switch(ARCHIVE_ENV, default=True)


def archive_file(key: str | None = None) -> Path | None:
    """This machine's archive file (whether or not it exists yet); None when Java or Spark is not found."""
    key = key or archive_key()
    return archive_dir() / f"classes-{key}.jsa" if key else None


def warm_up_hint() -> str | None:
    """A line suggesting ``stream-incident warm-up`` to a command that started its own driver without a class
    archive (None when there is one, when it is turned off, or when Java or Spark cannot be identified)."""
    if not archive_enabled():
        return None
    final = archive_file()
    if final is None or final.is_file():
        return None
    return (f"tip: `stream-incident warm-up` (once, about a minute) builds this machine's class archive, and later "
            f"commands start their Spark seconds faster ({ARCHIVE_ENV}=0 turns the archive and this tip off)")


def class_archive_options() -> list[str]:
    """JVM options that start an embedded driver with the archive, or ``[]`` when there is none to use."""
    if not archive_enabled():
        return []
    final = archive_file()
    return [f"-XX:SharedArchiveFile={final}"] if final is not None and final.is_file() else []
