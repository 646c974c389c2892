"""A per-machine archive of the Spark classes the driver JVM loads (Java's class-data sharing).

A cold command loads and verifies some twenty thousand classes before it reads a line. An embedded
driver started with the archive maps them from one file instead, which saves seconds on every cold
command (see ``benchmarks/RESULTS.md``). ``stream-incident warm-up`` builds it once per Java build and
Spark installation:

* it runs ``spark-submit`` on this file, which analyses two generated sample bundles (Kafka Streams
  and NiFi), in a JVM of its own started with ``-XX:ArchiveClassesAtExit``;
* the JVM writes the archive as it exits; the file is renamed into place only when that JVM exited
  with status 0 (a half-written archive would crash the next JVM that maps it);
* the file name carries a digest of the Java executable and the Spark jars, so an upgrade of either
  simply finds no archive (and a JVM that still finds a mismatch ignores the file).

Later embedded drivers (:func:`toolkit.jvm.driver_java_options`) start with ``-XX:SharedArchiveFile``
when the archive exists (``toolkit.jvm`` finds it; ``STREAM_INCIDENT_CLASS_ARCHIVE=0`` leaves it unused).
The archive lives in ``<cache>/jvm`` (about 190 MB) and is safe to delete.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Sequence

if __name__ == "__main__" and sys.path and Path(sys.path[0]).resolve() == Path(__file__).resolve().parent:
    # Run as a script by spark-submit: the package's own folder must not hide top-level modules
    # (``toolkit/regex.py`` would stand in for the ``regex`` package).
    del sys.path[0]

from toolkit.jvm import archive_file, archive_key, driver_java_options, spark_home
from toolkit.shipped import IMPORT_ROOT

#: The shipped samples the warm-up analyses: both products, so both readers' classes are archived.
WARM_UP_SAMPLES = ("kafka-eos-stale-checkpoint", "nifi-kinesis-migration-loss")
#: A warm-up that has not finished after this many seconds is stopped.
WARM_UP_TIMEOUT_S = 900.0


class ArchiveError(RuntimeError):
    """The archive could not be built (no Java or Spark found, or the warm-up run failed)."""


def _remove_stale(directory: Path, key: str) -> None:
    """Delete archives of other Java builds or Spark jars, and partial files whose writer is gone."""
    for path in directory.glob("classes-*"):
        if path.suffix == ".jsa" and path.name != f"classes-{key}.jsa":
            path.unlink(missing_ok=True)
        elif path.suffix == ".partial":
            try:
                os.kill(int(path.suffixes[-2].lstrip(".")), 0)
            except ProcessLookupError:
                path.unlink(missing_ok=True)
            except (ValueError, IndexError, OSError):
                continue


def warm_up_command(partial: Path, samples_dir: Path, master: str = "local[2]") -> list[str]:
    """The ``spark-submit`` command line of the warm-up run that writes the archive into ``partial``."""
    from toolkit.spark import quote_java_option, session_settings

    home = spark_home()
    if home is None:
        raise ArchiveError("no Spark installation found (install pyspark or set SPARK_HOME)")
    # Written with bytecode verification on, so that a driver that verifies can use it too.
    options = driver_java_options(0, archive=False, verify=True)
    java = " ".join(map(quote_java_option, ["-Duser.timezone=UTC", *options, f"-XX:ArchiveClassesAtExit={partial}"]))
    settings = session_settings(master, {"spark.driver.extraJavaOptions": java})
    cmd = [str(home / "bin" / "spark-submit"), "--master", master, "--name", "stream-incident-warm-up",
           "--driver-memory", settings.pop("spark.driver.memory", "1g")]
    for key, value in settings.items():
        cmd += ["--conf", f"{key}={value}"]
    return [*cmd, str(Path(__file__).resolve()), str(samples_dir)]


def build(samples: Sequence[str] = WARM_UP_SAMPLES, *, master: str = "local[2]", rebuild: bool = False,
          timeout_s: float = WARM_UP_TIMEOUT_S, progress: Callable[[str], None] | None = None) -> Path:
    """Build this machine's archive (unless it exists and not ``rebuild``); returns its path.

    Raises :class:`ArchiveError` when Java or Spark is not found or the warm-up run fails (the
    message names its log)."""
    say = progress or (lambda _m: None)
    key = archive_key()
    final = archive_file(key)
    if key is None or final is None:
        raise ArchiveError("cannot identify the Java build and the Spark jars (java on PATH or JAVA_HOME, and pyspark "
                           "installed or SPARK_HOME, are needed)")
    if final.is_file() and not rebuild:
        say(f"the class archive is already built: {final}")
        return final
    directory = final.parent
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale(directory, key)
    partial = directory / f"classes-{key}.{os.getpid()}.partial"
    log = directory / "warm-up.log"
    from toolkit.samples import write_samples

    with tempfile.TemporaryDirectory(prefix="stream-incident-warm-up-") as scratch:
        samples_dir = Path(scratch) / "samples"
        write_samples(samples_dir, list(samples))
        # This interpreter runs the job (a user's PYSPARK_DRIVER_PYTHON may name a notebook front end).
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "PYSPARK_PYTHON": sys.executable,
               "PYSPARK_DRIVER_PYTHON": sys.executable,
               "PYTHONPATH": os.pathsep.join(filter(None, [str(IMPORT_ROOT), os.environ.get("PYTHONPATH")])),
               "STREAM_INCIDENT_CACHE": str(Path(scratch) / "cache")}
        for name in ("SPARK_REMOTE", "SPARK_MASTER", "SPARK_CONNECT_MODE_ENABLED", "PYSPARK_SUBMIT_ARGS",
                     "PYSPARK_DRIVER_PYTHON_OPTS"):
            env.pop(name, None)
        say(f"analysing {len(samples)} sample bundle(s) in a JVM that writes the class archive as it exits")
        started = time.monotonic()
        with log.open("wb") as out:
            try:
                # A session of its own: on a timeout the JVM and the Python it started are stopped together.
                proc = subprocess.Popen(warm_up_command(partial, samples_dir, master), stdout=out,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, cwd=scratch,
                                        start_new_session=True)
            except OSError as exc:
                raise ArchiveError(f"cannot run spark-submit: {exc}") from exc
            try:
                status = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                status = None
    kept = status == 0 and partial.is_file() and partial.stat().st_size > 0
    if kept:
        try:
            os.replace(partial, final)
        except OSError as exc:
            partial.unlink(missing_ok=True)
            raise ArchiveError(f"cannot put the class archive in place: {exc}") from exc
    else:
        partial.unlink(missing_ok=True)
        what = ("timed out" if status is None else f"exited with status {status}" if status
                else "wrote no archive")
        raise ArchiveError(f"the warm-up run {what}; nothing was kept (log: {log})")
    say(f"class archive written in {time.monotonic() - started:.0f} s: {final} "
        f"({final.stat().st_size / 2**20:.0f} MB)")
    return final


def _warm_up(samples_dir: Path) -> int:
    """Inside the warm-up JVM's Python: analyse each sample bundle (the classes this loads are archived)."""
    from pyspark.sql import SparkSession

    from toolkit.options import AnalysisOptions
    from toolkit.pipeline import run

    # The session spark-submit started, with the master and settings it was given (see warm_up_command).
    spark = SparkSession.builder.getOrCreate()
    with tempfile.TemporaryDirectory(prefix="stream-incident-warm-up-out-") as out:
        for bundle in sorted(p for p in samples_dir.iterdir() if p.is_dir()):
            investigation = run(spark, bundle, Path(out) / bundle.name, AnalysisOptions(use_cache=False))
            print(f"{bundle.name}: {len(investigation.findings)} finding(s)", flush=True)
    spark.stop()
    return 0


# --------------------------------------------------------------------------- command line


def build_parser(parser: argparse.ArgumentParser | None = None) -> argparse.ArgumentParser:
    """Add the ``warm-up`` arguments to ``parser`` (a sub-parser of ``stream-incident``) and return it."""
    p = parser or argparse.ArgumentParser(prog="stream-incident warm-up")
    p.description = ("Build this machine's class archive once (a minute or two): later commands that start "
                     "their own Spark start faster.")
    p.add_argument("--master", default="local[2]", help="where the warm-up run works (default local[2])")
    p.add_argument("--rebuild", action="store_true", help="build it again even if it exists")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def run(args: argparse.Namespace) -> int:
    """Run ``warm-up``: 0 the archive exists now (its path on stdout), 3 it could not be built."""
    def say(message: str) -> None:
        if not args.quiet:
            print(message, file=sys.stderr, flush=True)

    try:
        path = build(master=args.master, rebuild=args.rebuild, progress=say)
    except ArchiveError as exc:
        print(f"stream-incident: {exc}", file=sys.stderr)
        return 3
    print(path)
    return 0


if __name__ == "__main__":  # run by spark-submit (see warm_up_command)
    sys.exit(_warm_up(Path(sys.argv[1])))
