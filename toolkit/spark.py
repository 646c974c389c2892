"""The one place that creates a SparkSession.

Three ways to run, chosen by argument or environment:

* embedded (default): ``local[*]`` inside this Python process;
* a cluster: ``master="spark://host:7077"`` or ``SPARK_MASTER`` (also ``yarn``, ``k8s://...``);
* Spark Connect: ``remote="sc://host:15002"`` or ``SPARK_REMOTE``.

Toolkit code only uses the DataFrame API, so the same code runs on all three.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator, Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from toolkit import jvm
from toolkit.shipped import env_switch

DEFAULT_MASTER = "local[*]"
#: Smallest constant map Spark looks keys up in through a hash index (see ``_BASE_CONF``).
MAP_LOOKUP_HASH_THRESHOLD = "spark.sql.optimizer.mapLookupHashThreshold"
#: Case mappings (``lower``, ``upper``) through the ICU library rather than the JVM (see ``_BASE_CONF``).
ICU_CASE_MAPPINGS = "spark.sql.icu.caseMappings.enabled"
#: How many generated classes a session keeps for reuse (a static setting: read when the session starts).
CODEGEN_CACHE_ENTRIES = "spark.sql.codegen.cache.maxEntries"
#: Size of Spark's memory pages (a static setting); see :func:`session_settings`.
BUFFER_PAGE_SIZE = "spark.buffer.pageSize"
#: The page size of a local session: small tables' broadcasts then hold 4 MB each, not 32-64 MB.
LOCAL_PAGE_SIZE = "4m"

# Settings for every session the toolkit starts. Incident bundles are megabytes to a few
# gigabytes: adaptive execution coalesces shuffle output to what the data needs.
_BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.log.level": "WARN",
    # PySpark 4 records the Python call site of every Column function for error messages: several
    # extra round trips to the JVM per function, which made building the toolkit's plans 3x slower.
    "spark.python.sql.dataFrameDebugging.enabled": "false",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    # Executors of a cluster compile the generated per-line code too (see toolkit.jvm.JIT_OPTIONS).
    "spark.executor.extraJavaOptions": " ".join(["-Duser.timezone=UTC", *jvm.JIT_OPTIONS]),
    # The constant maps of the classifier (dispatch word -> templates) and of the timeline (template ->
    # versions) hold hundreds of keys; at or above this size Spark looks a key up in a hash index built
    # once per query, below it (its default is 1000) it compares the key with every entry, for every row.
    MAP_LOOKUP_HASH_THRESHOLD: "32",
    # lower()/upper() through ICU (Spark 4's default) first builds a title-case table of every Unicode
    # code point (2.7 GB of short-lived objects in a cold command), for the ASCII words the toolkit
    # compares. The JVM's own case mapping gives the same result for them and needs no table.
    ICU_CASE_MAPPINGS: "false",
    # Spark keeps the code it generates per query shape, by default for 100 shapes. One analysis of a large
    # input has about 700: a second analysis in the same session (a notebook re-run, ``serve``) found none
    # of them, so Janino compiled every class again and the JVM's JIT compiled the new classes once more.
    CODEGEN_CACHE_ENTRIES: "2000",
    # records.parquet is partitioned (by candidate, and in the parse cache by file): with a writer open per
    # partition value, a task writes its rows as they come instead of first sorting them all by partition.
    "spark.sql.maxConcurrentOutputFileWriters": "8",
}

#: The log4j2 configuration the embedded driver starts with: Spark's own logging goes to a file.
LOG4J_CONFIG = Path(__file__).resolve().parent / "resources" / "log4j2-quiet.properties"
#: Where Spark's log goes when the caller names no file (``stream-incident`` commands name one in ``--out``).
LOG_FILE_ENV = "STREAM_INCIDENT_LOG_FILE"
#: Set (to ``1``, ``on``, ``yes``...) to also show Spark's warnings on the console (``--verbose``).
VERBOSE_ENV = "STREAM_INCIDENT_VERBOSE"


def env_verbose() -> bool:
    """True when the environment asks to see the engine's own log on the console (``STREAM_INCIDENT_VERBOSE``)."""
    return env_switch(VERBOSE_ENV, default=False)


def quote_java_option(value: str) -> str:
    """``value`` quoted for ``spark.driver.extraJavaOptions`` when it holds blanks (Spark splits the
    options on blanks but keeps double-quoted words together)."""
    return f'"{value}"' if any(c.isspace() for c in value) else value


def _java_options(log_file: Path, show_log: bool) -> str:
    """Driver JVM options: UTC, and log4j2 writing to ``log_file`` (and to the console with ``show_log``)."""
    return " ".join([
        "-Duser.timezone=UTC",
        quote_java_option(f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}"),
        quote_java_option(f"-Dstream_incident.log_file={log_file}"),
        f"-Dstream_incident.console_level={'warn' if show_log else 'off'}",
    ])


@contextlib.contextmanager
def _jvm_console_to(log_file: Path | None) -> Iterator[None]:
    """While the driver JVM is launched, point this process's stderr at ``log_file``: the JVM keeps
    that descriptor, so its own console notices (JDK warnings, messages at shutdown) land in the
    log instead of the terminal. Python's stderr is restored at once."""
    if log_file is None:
        yield
        return
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no real stderr (some embedded interpreters)
        yield
        return
    sink = os.open(log_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(sink, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(sink)


def default_log_file() -> Path:
    """``$STREAM_INCIDENT_LOG_FILE``, else a per-user file in the temp directory."""
    named = os.environ.get(LOG_FILE_ENV)
    if named:
        return Path(named)
    return Path(tempfile.gettempdir()) / f"stream-incident-spark-{os.getuid() if hasattr(os, 'getuid') else 'user'}.log"


# Settings a Connect client may change at runtime (static ones belong to the server); others
# given in ``conf`` are applied too when the server allows it.
_RUNTIME_CONF = ("spark.sql.session.timeZone",)
# Asked of a Connect server too, but only where it lets a client change them: the shuffle width is
# never pinned there (the server's default knows its cluster), adaptive execution narrows it instead.
_OPTIONAL_RUNTIME_CONF = ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
                          MAP_LOOKUP_HASH_THRESHOLD, ICU_CASE_MAPPINGS)

_LOCAL_CORES = re.compile(r"^local(?:\[(\d+|\*)(?:,\s*\d+)?\])?$")


def local_cores(master: str) -> int | None:
    """Task threads of a ``local``/``local[N]``/``local[*]`` master; None for any other master."""
    m = _LOCAL_CORES.match(master.strip())
    if not m:
        return None
    if m.group(1) is None:
        return 1
    return (os.cpu_count() or 1) if m.group(1) == "*" else int(m.group(1))


def default_driver_memory() -> str:
    """Heap for a local driver: an eighth of RAM, between 1 and 4 GB (Spark's own default is 1 GB,
    which makes gigabyte bundles spend their time in garbage collection; more than an eighth would
    crowd out the page cache the bundle is read through)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return "1g"
    return f"{max(1, min(4, total // 8 // 2**30))}g"


def session_settings(master: str, conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a session (or the ``serve`` Connect server) on ``master`` starts with.

    On a local master everything runs in this JVM: shuffle output is split for its task threads
    (a cluster keeps its own defaults, which know its size) and the heap is sized from RAM.
    """
    settings = dict(_BASE_CONF)
    cores = local_cores(master)
    if cores is not None:
        settings["spark.sql.shuffle.partitions"] = str(max(2, 2 * cores))
        settings["spark.driver.memory"] = default_driver_memory()
        # Spark sizes its memory pages from the heap (32 MB with a 2 GB heap, two cores) and a broadcast hash
        # join keeps a whole page for its table, however few rows: with the driver and executor in one JVM,
        # the few dozen broadcasts a timeline query holds took a gigabyte of a 2 GB heap (out of memory).
        settings[BUFFER_PAGE_SIZE] = LOCAL_PAGE_SIZE
        # Keep the embedded driver on loopback: no traffic leaves the machine.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(conf or {})
    return settings


def connect_settings(conf: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings a Spark Connect client asks of its server: time zone, adaptive execution and the map
    lookup threshold, plus ``conf``.

    No shuffle width: the server was started for its cluster and keeps its own.
    """
    settings = {key: _BASE_CONF[key] for key in (*_RUNTIME_CONF, *_OPTIONAL_RUNTIME_CONF)}
    settings.update(conf or {})
    return settings


def apply_runtime_settings(runtime_conf: Any, settings: Mapping[str, str]) -> None:
    """Set each setting on a running session's ``conf``; one the session refuses keeps the server's value,
    except the time zone, without which timestamps would be read wrongly."""
    for key, value in settings.items():
        try:
            runtime_conf.set(key, value)
        except Exception:  # a static or locked setting: the server's own value stands
            if key in _RUNTIME_CONF:
                raise


class SparkUnavailable(RuntimeError):
    """Raised with a one-sentence explanation when no session can be had."""


def resolve_target(master: str | None = None, remote: str | None = None) -> tuple[str, str]:
    """Return ``("remote", url)`` or ``("master", url)`` from arguments, then the environment."""
    if master and remote:
        raise SparkUnavailable("give either a Spark master or a Spark Connect remote, not both")
    if remote:
        return "remote", remote
    if master:
        return "master", master
    if os.environ.get("SPARK_REMOTE"):
        return "remote", os.environ["SPARK_REMOTE"]
    return "master", os.environ.get("SPARK_MASTER") or DEFAULT_MASTER


#: Seconds to wait for a TCP connection to a standalone master or Connect endpoint before giving up.
CONNECT_TIMEOUT_S = 5.0


def _endpoints(kind: str, url: str) -> list[tuple[str, int]]:
    """host:port pairs behind ``spark://h1:7077,h2:7077`` or ``sc://host:15002/;token=...``."""
    scheme, default_port = ("sc://", 15002) if kind == "remote" else ("spark://", 7077)
    if not url.startswith(scheme):
        return []
    hosts = url[len(scheme):].split("/", 1)[0].split(";", 1)[0]
    out = []
    for item in hosts.split(","):
        m = re.match(r"^\[?(.*?)\]?(?::(\d+))?$", item.strip())
        if m and m.group(1):
            out.append((m.group(1), int(m.group(2)) if m.group(2) else default_port))
    return out


def _check_reachable(kind: str, url: str, timeout: float = CONNECT_TIMEOUT_S) -> None:
    """Fail in seconds, not minutes: a standalone driver retries an absent master for about a minute."""
    endpoints = _endpoints(kind, url)
    if not endpoints:
        return
    errors = []
    for host, port in endpoints:
        try:
            with socket.create_connection((host, port), timeout=timeout):
                return
        except OSError as exc:
            errors.append(f"{host}:{port} ({exc.strerror or exc.__class__.__name__})")
    raise SparkUnavailable(f"cannot reach the Spark {'Connect endpoint' if kind == 'remote' else 'master'} "
                           f"{url}: {', '.join(errors)}")


def get_spark(
    master: str | None = None,
    remote: str | None = None,
    *,
    app_name: str = "stream-incident",
    conf: Mapping[str, str] | None = None,
    log_file: str | os.PathLike | None = None,
    input_bytes: int | None = None,
    verbose: bool | None = None,
) -> SparkSession:
    """Create (or reuse) the session for this process.

    ``conf`` adds or overrides Spark settings (e.g. ``{"spark.driver.memory": "8g"}``); its
    ``spark.driver.extraJavaOptions`` are added after the toolkit's own driver options.
    ``log_file`` receives the driver's own log (Spark and Hadoop warnings, shutdown messages) so
    the console shows only the toolkit's output; it applies when this call starts the driver JVM.
    ``input_bytes``: about how much the session will read (:func:`toolkit.jvm.input_bytes`); an
    embedded driver for a small input starts tuned for a short life (see :mod:`toolkit.jvm`).
    ``verbose``: also show the engine's warnings on the console (``--verbose``; None: ``STREAM_INCIDENT_VERBOSE``).
    """
    kind, url = resolve_target(master, remote)
    show_log = env_verbose() if verbose is None else verbose
    target = Path(log_file) if log_file else default_log_file()
    target.parent.mkdir(parents=True, exist_ok=True)
    java = _java_options(target.resolve(), show_log)
    _check_reachable(kind, url)
    try:
        if kind == "remote":
            spark = SparkSession.builder.remote(url).getOrCreate()
            apply_runtime_settings(spark.conf, connect_settings(conf))
            return spark
        # The caller's own driver options come last, so they win where both set the same option, and keep
        # the toolkit's (UTC, the log file, the class archive) where they do not.
        user_java = (conf or {}).get("spark.driver.extraJavaOptions", "").strip()
        java = " ".join([java, *map(quote_java_option, jvm.driver_java_options(input_bytes, user_options=user_java)),
                         user_java]).strip()
        builder = SparkSession.builder.master(url).appName(app_name)
        for key, value in session_settings(url, {**(conf or {}), "spark.driver.extraJavaOptions": java}).items():
            builder = builder.config(key, value)
        with _jvm_console_to(None if show_log else target):
            return builder.getOrCreate()
    except Exception as exc:  # py4j/grpc errors are long; callers want one sentence
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise SparkUnavailable(f"cannot start a Spark session on {url}: {first[:300]}") from exc


def describe(spark: SparkSession) -> str:
    """A short human description of where the session runs (for reports and summaries)."""
    try:
        master = spark.conf.get("spark.master")
    except Exception:  # Connect servers may not expose it
        master = None
    remote = os.environ.get("SPARK_REMOTE")
    if is_connect(spark):
        return f"Spark {spark.version} via Spark Connect {remote or ''}".strip()
    return f"Spark {spark.version} on {master}"


def is_connect(spark: SparkSession) -> bool:
    """True when ``spark`` is a Spark Connect client session."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def where_computed(df: DataFrame, condition: Column) -> DataFrame:
    """``df.where(condition)``, tested on ``df``'s computed columns.

    Spark moves a filter below the projections that compute the columns it reads, writing their expressions
    into the filter: an expensive column (a regular expression over every line, the template dispatch) is then
    computed twice, once by the filter and once by the projection. The condition here is held in a column that
    Spark may not move (it reads the partition id, which makes the projection nondeterministic), so the filter
    stays above it and reads the column as computed."""
    return (df.withColumn("_kept", F.when(condition, F.spark_partition_id()))
            .where(F.col("_kept").isNotNull()).drop("_kept"))


def with_own_code(df: DataFrame, columns: dict[str, Column]) -> DataFrame:
    """``df.withColumns(columns)``, in generated code of its own when ``df`` ends in a union.

    Spark moves a projection over a union into each of its branches, where it joins the code that computes
    the branch: a long expression there (the redaction of every message) made one generated method too large
    for the JIT to compile well, and every row of the branch ran slower. A projection that reads the partition
    id stays above the union (it is nondeterministic); the value is the same, the code is apart."""
    own = F.spark_partition_id() >= 0
    return df.withColumns({name: F.when(own, column) for name, column in columns.items()})


def computed_once(df: DataFrame, held: list[DataFrame] | None) -> DataFrame:
    """``df`` computed now and kept (``persist``), and added to ``held``: the caller ``unpersist``s it once
    the queries that read it have run (:func:`release`). Without ``held``, ``df`` unchanged (lazy).

    For an intermediate table that several parts of one result read: left lazy, each part plans it again
    from the input. Unlike a local checkpoint, a block lost with an executor is computed again.
    """
    if held is None:
        return df
    kept = df.persist()
    kept.count()
    held.append(kept)
    return kept


def release(held: list[DataFrame]) -> None:
    """Unpersist every table kept in ``held`` (by :func:`computed_once`, or persisted by its caller) and empty it."""
    for df in held:
        df.unpersist()
    held.clear()
