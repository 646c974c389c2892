"""The one place that creates a SparkSession.

Three ways to run, chosen by argument or environment:

* embedded (default): ``local[*]`` inside this Python process;
* a cluster: ``master="spark://host:7077"`` or ``SPARK_MASTER`` (also ``yarn``, ``k8s://...``);
* Spark Connect: ``remote="sc://host:15002"`` or ``SPARK_REMOTE``.

Toolkit code only uses the DataFrame API, so the same code runs on all three.
"""

from __future__ import annotations

import os
import re
import socket
from typing import Mapping

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

# Settings for every session the toolkit starts. Incident bundles are megabytes to a few
# gigabytes: adaptive execution coalesces shuffle output to what the data needs.
_BASE_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    "spark.log.level": "WARN",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
}

# Settings a Connect client may change at runtime (static ones belong to the server); others
# given in ``conf`` are applied too when the server allows it.
_RUNTIME_CONF = ("spark.sql.session.timeZone",)

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
        # Keep the embedded driver on loopback: no traffic leaves the machine.
        settings["spark.driver.host"] = "127.0.0.1"
        settings["spark.driver.bindAddress"] = "127.0.0.1"
    settings.update(conf or {})
    return settings


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
) -> SparkSession:
    """Create (or reuse) the session for this process.

    ``conf`` adds or overrides Spark settings (e.g. ``{"spark.driver.memory": "8g"}``).
    """
    kind, url = resolve_target(master, remote)
    _check_reachable(kind, url)
    try:
        if kind == "remote":
            spark = SparkSession.builder.remote(url).getOrCreate()
            runtime = {key: _BASE_CONF[key] for key in _RUNTIME_CONF}
            for key, value in {**runtime, **(conf or {})}.items():
                try:
                    spark.conf.set(key, value)
                except Exception:  # a static setting: the server's own value stands
                    if key in _RUNTIME_CONF:
                        raise
            return spark
        builder = SparkSession.builder.master(url).appName(app_name)
        for key, value in session_settings(url, conf).items():
            builder = builder.config(key, value)
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
