"""How the embedded driver JVM is started: input size estimate, small-input settings, the class archive."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.server_conf import ServerConf

from toolkit import jvm


def test_input_bytes_walks_folders_and_weighs_compressed_files(tmp_path: Path) -> None:
    (tmp_path / "host-0").mkdir()
    (tmp_path / "host-0" / "app.log").write_bytes(b"x" * 1000)
    with gzip.open(tmp_path / "host-0" / "app.log.1.gz", "wb") as out:
        out.write(b"y" * 5000)
    packed = (tmp_path / "host-0" / "app.log.1.gz").stat().st_size
    loose = tmp_path / "loose.log"
    loose.write_bytes(b"z" * 7)
    assert jvm.input_bytes([tmp_path / "host-0", loose]) == 1000 + packed * jvm.COMPRESSED_FACTOR + 7
    assert jvm.input_bytes([tmp_path / "absent"]) == 0


def test_small_inputs_get_the_quick_jit_and_large_or_unknown_ones_do_not() -> None:
    small = jvm.driver_java_options(1024)
    assert "-XX:TieredStopAtLevel=1" in small
    for size in (jvm.SMALL_INPUT_BYTES + 1, None):
        options = jvm.driver_java_options(size)
        assert "-XX:TieredStopAtLevel=1" not in options


@pytest.mark.e2e
def test_jvm_warnings_of_a_driver_go_to_stderr_never_to_stdout() -> None:
    """``detect --format json`` prints its document on stdout: a JVM warning there would break it. Java prints
    unified-logging warnings on stdout unless told otherwise; the driver's options send them to stderr."""
    java = jvm._java_executable()
    if java is None:
        pytest.skip("no java on this machine")
    # a warning of unified logging wherever no large pages are configured
    trigger = "-XX:+UseLargePages"
    bare = subprocess.run([str(java), trigger, "-version"], capture_output=True, text=True, timeout=120)
    if "[warning]" not in bare.stdout:
        pytest.skip("this JVM prints no unified-logging warning for -XX:+UseLargePages here")
    for size in (1024, jvm.SMALL_INPUT_BYTES + 1, None):
        run = subprocess.run([str(java), *jvm.driver_java_options(size, archive=False), trigger, "-version"],
                             capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout == "" and "UseLargePages" in run.stderr, (size, run.stdout)


def test_only_a_large_inputs_driver_gets_the_throughput_collector_unless_its_user_chose_one(
        monkeypatch, tmp_path: Path) -> None:
    for name in jvm.USER_JAVA_OPTION_ENVS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert "-XX:+UseParallelGC" in jvm.driver_java_options(jvm.SMALL_INPUT_BYTES + 1, archive=False)
    # a small input's short-lived driver, and a driver of unknown work (a test session, a kernel) keep Java's G1
    for size in (1024, jvm.SMALL_INPUT_BYTES, None):
        assert not any("GC" in option for option in jvm.driver_java_options(size, archive=False)), size
    # options that tune a collector without choosing one leave the choice to the toolkit
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-XX:+UseGCOverheadLimit -XX:MaxGCPauseMillis=50")
    assert jvm.collector_options() == ["-XX:+UseParallelGC"]
    for name in jvm.USER_JAVA_OPTION_ENVS:
        monkeypatch.setenv(name, "-Xss4m -XX:+UseZGC" if name != "PYSPARK_SUBMIT_ARGS"
                           else '--driver-java-options "-XX:+UseSerialGC" pyspark-shell')
        assert jvm.collector_options() == [], name
        assert not any("GC" in option for option in jvm.driver_java_options(10 * 2**30, archive=False)), name
        monkeypatch.delenv(name)
    (tmp_path / "spark-defaults.conf").write_text("spark.master local[2]\n"
                                                  "spark.driver.defaultJavaOptions  -XX:+UseG1GC -Xss4m\n")
    assert jvm.collector_options() == []


def test_the_test_sessions_driver_keeps_the_default_collector(spark) -> None:
    """A session started without an input size may live long and analyse many bundles (this one, a kernel,
    ``serve``): G1 resizes its generations for that, where the throughput collector's fixed old generation filled."""
    if any(jvm._COLLECTOR_CHOICE.search(os.environ.get(name, "")) for name in jvm.USER_JAVA_OPTION_ENVS):
        pytest.skip("this environment's own JVM options choose a collector")
    beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert sorted(bean.getName() for bean in beans) == ["G1 Old Generation", "G1 Young Generation"]


def test_a_small_inputs_driver_skips_bytecode_verification_where_java_allows_it(monkeypatch, tmp_path: Path) -> None:
    """Verification is off in the quick driver of a small input (a Java release known to take the option, not
    turned off), never for a large input, and never in the warm-up JVM that writes the class archive."""
    from toolkit import warmup

    def options(size: int | None = 1024, **kw) -> list[str]:
        jvm.java_feature_release.cache_clear()
        return jvm.driver_java_options(size, archive=False, **kw)

    monkeypatch.delenv(jvm.SKIP_VERIFY_ENV, raising=False)
    fake_java = tmp_path / "jdk"
    (fake_java / "bin").mkdir(parents=True)
    (fake_java / "bin" / "java").write_text("")
    monkeypatch.setenv("JAVA_HOME", str(fake_java))
    try:
        for release, skips in (('JAVA_VERSION="17.0.15"', True), ('JAVA_VERSION="21.0.2"', True),
                               ('JAVA_VERSION="25"', False), ('IMPLEMENTOR="x"', False)):
            (fake_java / "release").write_text(f'IMPLEMENTOR="x"\n{release}\n')
            assert (options()[-2:] == list(jvm.NO_VERIFY_OPTIONS)) is skips, release
        (fake_java / "release").unlink()
        assert not set(jvm.NO_VERIFY_OPTIONS) & set(options())  # a Java whose release is unknown
        (fake_java / "release").write_text('JAVA_VERSION="17.0.15"\n')
        assert not set(jvm.NO_VERIFY_OPTIONS) & set(options(jvm.SMALL_INPUT_BYTES + 1))
        assert not set(jvm.NO_VERIFY_OPTIONS) & set(options(verify=True))
        monkeypatch.setenv(jvm.SKIP_VERIFY_ENV, "0")
        assert not set(jvm.NO_VERIFY_OPTIONS) & set(options())
        monkeypatch.delenv(jvm.SKIP_VERIFY_ENV)
        assert set(jvm.NO_VERIFY_OPTIONS) <= set(options())
        command = " ".join(warmup.warm_up_command(tmp_path / "x.partial", tmp_path))
        assert "-XX:TieredStopAtLevel=1" in command and "BytecodeVerification" not in command
    finally:
        jvm.java_feature_release.cache_clear()


def _plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


def test_plan_for_input_switches_generated_code_off_for_small_inputs_and_back(spark, small_plan_settings) -> None:
    conf = small_plan_settings
    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)  # whatever an earlier analysis in this session chose
    assert conf.get("spark.sql.codegen.wholeStage") == "true"
    conf.set("spark.sql.autoBroadcastJoinThreshold", "1048576")  # the session's own, kept after a small input
    jvm.plan_for_input(spark, 10_000)
    assert conf.get("spark.sql.codegen.wholeStage") == "false"
    assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    # the test session runs on local[2]: no adaptive stages, no automatic broadcasts
    assert conf.get("spark.sql.adaptive.enabled") == "false"
    assert conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"
    small, other = spark.range(5), spark.range(3)
    assert "Broadcast" not in _plan(small.join(other, "id"))
    assert spark.range(5).selectExpr("sum(id * 2) AS s").first()["s"] == 20
    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
    assert conf.get("spark.sql.codegen.wholeStage") == "true"
    assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    assert conf.get("spark.sql.adaptive.enabled") == "true"
    assert conf.get("spark.sql.autoBroadcastJoinThreshold") == "1048576"
    assert "Broadcast" in _plan(small.join(other, "id"))
    # a setting the user made is not undone by a large input
    conf.set("spark.sql.codegen.wholeStage", "false")
    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
    assert conf.get("spark.sql.codegen.wholeStage") == "false"


def test_a_second_parse_in_a_session_reuses_the_code_generated_for_the_first(spark, small_plan_settings,
                                                                           tmp_path: Path) -> None:
    """A large input's plans become Java classes once per session, not once per analysis (a notebook re-run,
    ``serve``): Spark keeps its generated classes by their source. The parse of a sample alone has more than
    Spark's default of 100, and a Python lambda's fresh variable name (x_1, x_2...) would make a source new."""
    from toolkit.ingest import parse_bundle

    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)  # generated code, as for a large input
    compiled = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME()
    sample = Path(__file__).resolve().parent.parent / "sample_logs" / "kafka-standby-lock-cleaner"
    classes = []
    for run in range(2):
        before = compiled.getCount()
        parse_bundle(spark, sample, tmp_path / f"run-{run}")
        classes.append(compiled.getCount() - before)
    # Before the session kept 2000 classes, each parse of this sample compiled 119 to 134 of them. Alone, a second
    # parse compiles none; after other tests in the same session it has compiled up to 14 (in identical pairs,
    # with the cache far from full), so the bound sits well above that and far below a parse without the cache.
    assert classes[1] <= 40, classes


def test_small_inputs_join_single_partitions_in_place_however_large_spark_estimates_a_join(
        spark, small_plan_settings) -> None:
    def joined(how: str):
        # Spark estimates a join's output as the product of its inputs' sizes: here 800 kB x 800 kB, far
        # above its 128 MB limit for joining single partitions without a shuffle. A frame's plan is made
        # once, so each setting gets frames of its own.
        one, two, three = (spark.range(100_000).coalesce(1) for _ in range(3))
        return one.join(two, "id", how).join(three, "id", how)

    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
    small_plan_settings.set("spark.sql.autoBroadcastJoinThreshold", "-1")
    small_plan_settings.set("spark.sql.shuffle.partitions", "2")
    assert "Exchange hashpartitioning(id#" in _plan(joined("left"))
    jvm.plan_for_input(spark, 10_000)
    assert "Exchange" not in _plan(joined("left"))
    assert joined("left").count() == 100_000
    # where a shuffle remains (an inner join's output joined again), it has one partition
    inner = _plan(joined("inner"))
    assert ", 1), ENSURE_REQUIREMENTS" in inner and ", 2), ENSURE_REQUIREMENTS" not in inner


def test_a_larger_input_puts_back_what_the_session_had_and_keeps_what_its_user_changed() -> None:
    from types import SimpleNamespace

    session = SimpleNamespace(conf=ServerConf(master="local[2]"))
    session.conf.values["spark.sql.autoBroadcastJoinThreshold"] = "1048576"  # given when the session started
    jvm.plan_for_input(session, 10_000)
    assert {key: session.conf.values[key] for key in jvm.SMALL_INPUT_SQL_CONF} == jvm.SMALL_INPUT_SQL_CONF
    jvm.plan_for_input(session, 20_000)  # a second small input: what was there before the first is still known
    session.conf.set("spark.sql.adaptive.enabled", "true")  # the user's choice while the small plan is on
    jvm.plan_for_input(session, 10 * jvm.SMALL_INPUT_BYTES)
    assert session.conf.values == {"spark.master": "local[2]", "spark.sql.autoBroadcastJoinThreshold": "1048576",
                                   "spark.sql.adaptive.enabled": "true"}


def test_a_cluster_keeps_adaptive_execution_and_a_refused_setting_skips_only_itself() -> None:
    from types import SimpleNamespace

    cluster = SimpleNamespace(conf=ServerConf({"spark.sql.codegen.factoryMode"}, master="spark://10.0.0.5:7077"))
    jvm.plan_for_input(cluster, 10_000)
    assert cluster.conf.values["spark.sql.codegen.wholeStage"] == "false"
    assert "spark.sql.codegen.factoryMode" not in cluster.conf.values  # refused: the server's default stands
    assert not jvm.LOCAL_ONLY_SQL_CONF & set(cluster.conf.values)  # a cluster narrows its shuffles adaptively
    cluster.conf.values["spark.sql.adaptive.enabled"] = "false"  # the user's own choice
    jvm.plan_for_input(cluster, 10 * jvm.SMALL_INPUT_BYTES)
    assert cluster.conf.values == {"spark.master": "spark://10.0.0.5:7077", "spark.sql.adaptive.enabled": "false"}

    local = SimpleNamespace(conf=ServerConf({"spark.sql.codegen.factoryMode"}, master="local[*]"))
    jvm.plan_for_input(local, 10_000)
    assert local.conf.values["spark.sql.adaptive.enabled"] == "false"
    assert local.conf.values["spark.sql.autoBroadcastJoinThreshold"] == "-1"


def test_a_line_longer_than_a_megabyte_turns_generated_code_back_on(spark, small_plan_settings) -> None:
    conf = spark.conf
    jvm.plan_for_input(spark, 10_000)
    jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS)
    assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS + 1)
    assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    assert conf.get("spark.sql.codegen.wholeStage") == "true"


@pytest.fixture
def archive_cache(monkeypatch, tmp_path: Path) -> Path:
    """A cache folder of the test's own, with the class archive turned on and kept in it (skips when no Java
    build or Spark jars can name an archive)."""
    monkeypatch.setenv("STREAM_INCIDENT_CACHE", str(tmp_path))
    monkeypatch.delenv(jvm.ARCHIVE_ENV, raising=False)
    monkeypatch.delenv(jvm.ARCHIVE_DIR_ENV, raising=False)
    if jvm.archive_key() is None:
        pytest.skip("no java or no Spark jars to name an archive by")
    return tmp_path


def test_the_class_archive_is_used_once_it_exists_and_can_be_turned_off(monkeypatch, archive_cache: Path) -> None:
    final = jvm.archive_file()
    assert final.parent == archive_cache / "jvm" and jvm.archive_key() in final.name
    assert jvm.class_archive_options() == []  # none built yet: nothing to map
    final.parent.mkdir()
    final.write_bytes(b"archive")
    assert jvm.class_archive_options() == [f"-XX:SharedArchiveFile={final}"]
    assert jvm.driver_java_options(None)[-1] == f"-XX:SharedArchiveFile={final}"
    assert not any("SharedArchiveFile" in o for o in jvm.driver_java_options(None, archive=False))
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "off")
    assert jvm.class_archive_options() == []
    monkeypatch.delenv(jvm.ARCHIVE_ENV)
    monkeypatch.setenv(jvm.ARCHIVE_DIR_ENV, str(archive_cache / "elsewhere"))
    assert jvm.class_archive_options() == []  # kept elsewhere, and none there


def test_a_command_without_a_class_archive_suggests_the_warm_up_once_it_has_run(
        spark, monkeypatch, archive_cache: Path, capsys) -> None:
    """``detect`` that started its own driver without an archive ends with a tip line on stderr (not with
    ``--quiet``, not once the archive exists, not when the archive is turned off)."""
    from toolkit.cli import main

    sample = Path(__file__).resolve().parent.parent / "sample_logs" / "kafka-restore-skipped"
    argv = ["detect", str(sample), "--format", "json", "--master", "local[2]", "--no-cache"]
    assert main(argv) == 0
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines()[-1].endswith(jvm.warm_up_hint()), captured.err[-800:]
    assert "stream-incident warm-up" in jvm.warm_up_hint() and captured.out.startswith("{")
    assert main([*argv, "--quiet"]) == 0 and capsys.readouterr().err == ""
    final = jvm.archive_file()
    final.parent.mkdir()
    final.write_bytes(b"archive")
    assert jvm.warm_up_hint() is None
    final.unlink()
    monkeypatch.setenv(jvm.ARCHIVE_ENV, "0")
    assert jvm.warm_up_hint() is None


def _fake_warm_up(exit_status: int, writes: bool = True, sleeps: float = 0):
    """A stand-in for the warm-up's JVM: writes the archive it is given (unless not ``writes``), sleeps
    ``sleeps`` seconds, then exits with ``exit_status``."""
    def command(partial: Path, samples_dir: Path, master: str = "local[2]") -> list[str]:
        assert sorted(p.name for p in samples_dir.iterdir()) == ["kafka-restore-skipped"]
        write = f"pathlib.Path({str(partial)!r}).write_bytes(b'archive'); " if writes else ""
        return [sys.executable, "-c", f"import pathlib, sys, time; {write}time.sleep({sleeps}); sys.exit({exit_status})"]
    return command


def test_a_warm_up_keeps_the_archive_only_when_its_jvm_exited_cleanly(monkeypatch, archive_cache: Path) -> None:
    from toolkit import warmup

    final = jvm.archive_file()
    final.parent.mkdir()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    abandoned = final.parent / f"classes-{jvm.archive_key()}.{dead.pid}.partial"  # its writer was killed
    abandoned.write_bytes(b"half")
    other_build = final.parent / "classes-0123456789abcdef.jsa"  # another Java build or Spark version
    other_build.write_bytes(b"old")

    monkeypatch.setattr(warmup, "warm_up_command", _fake_warm_up(1))
    with pytest.raises(warmup.ArchiveError, match="exited with status 1"):
        warmup.build(["kafka-restore-skipped"])
    # a JVM that did not exit cleanly may have left half an archive: never kept, never mapped
    assert sorted(p.name for p in final.parent.iterdir()) == ["warm-up.log"]
    assert jvm.class_archive_options() == []
    for fake, message in ((_fake_warm_up(0, writes=False), "wrote no archive"),
                          (_fake_warm_up(0, sleeps=60), "timed out")):
        monkeypatch.setattr(warmup, "warm_up_command", fake)
        with pytest.raises(warmup.ArchiveError, match=message):
            warmup.build(["kafka-restore-skipped"], timeout_s=3)
        assert sorted(p.name for p in final.parent.iterdir()) == ["warm-up.log"]

    monkeypatch.setattr(warmup, "warm_up_command", _fake_warm_up(0))
    assert warmup.build(["kafka-restore-skipped"]) == final and final.read_bytes() == b"archive"
    assert sorted(p.name for p in final.parent.iterdir()) == sorted([final.name, "warm-up.log"])
    assert warmup.build(["kafka-restore-skipped"]) == final  # already built: nothing runs
    assert not abandoned.exists() and not other_build.exists()


_MAPS_ARCHIVE = """
import os
import sys
from toolkit import jvm
from toolkit.spark import get_spark
options = jvm.driver_java_options
# -Xshare:on: the JVM refuses to start unless it can map the archive it is given
jvm.driver_java_options = lambda size, **kw: options(size, **kw) + ["-Xshare:on"] + sys.argv[1:]
# SMALL=1: the driver of a small input, which starts without bytecode verification; LARGE=1: of a large one,
# which runs the throughput collector
size = 1024 if os.environ.get("SMALL") else 2**31 if os.environ.get("LARGE") else None
spark = get_spark("local[1]", log_file=jvm.archive_dir() / "check.log", input_bytes=size)
beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
print(",".join(sorted(bean.getName() for bean in beans)))
print(spark.range(3).count())
"""


@pytest.mark.e2e
@pytest.mark.timeout(1500)
def test_the_warm_up_builds_an_archive_that_a_new_driver_jvm_maps(archive_cache: Path, tmp_path: Path) -> None:
    """A real warm-up (spark-submit, one sample), then a fresh driver JVM started with -Xshare:on that
    loads thousands of classes from the archive."""
    from toolkit import warmup

    final = warmup.build(["kafka-restore-skipped"], timeout_s=600)
    env = {**os.environ}
    env.pop("SPARK_REMOTE", None)
    assert final.stat().st_size > 10 * 2**20 and [p.suffix for p in final.parent.glob("classes-*")] == [".jsa"]
    check = [sys.executable, "-c", _MAPS_ARCHIVE]
    loads = tmp_path / "class-load.txt"
    mapped = subprocess.run([*check, f"-Xlog:class+load=info:file={loads}"], env=env, capture_output=True, text=True,
                            timeout=300)
    assert mapped.returncode == 0 and mapped.stdout.strip().splitlines()[-1] == "3", mapped.stderr[-2000:]
    # "(top)": the archive the warm-up wrote, on top of the JDK's own
    assert loads.read_text().count("source: shared objects file (top)") > 1000
    # the quick driver of a small input (no bytecode verification) maps the same archive
    quick = subprocess.run(check, env={**env, "SMALL": "1"}, capture_output=True, text=True, timeout=300)
    assert quick.returncode == 0 and quick.stdout.strip().splitlines()[-1] == "3", quick.stderr[-2000:]
    if jvm.collector_options():
        # the driver of a large input maps it too, with the throughput collector (the warm-up wrote it under G1)
        large = subprocess.run(check, env={**env, "LARGE": "1"}, capture_output=True, text=True, timeout=300)
        assert large.returncode == 0, large.stderr[-2000:]
        assert large.stdout.strip().splitlines()[-2:] == ["PS MarkSweep,PS Scavenge", "3"]
        # a user's own collector: the toolkit adds none (two would stop the JVM), and the archive still maps
        chosen = subprocess.run(check, env={**env, "LARGE": "1", "JDK_JAVA_OPTIONS": "-XX:+UseSerialGC"},
                                capture_output=True, text=True, timeout=300)
        assert chosen.returncode == 0, chosen.stderr[-2000:]
        assert chosen.stdout.strip().splitlines()[-2:] == ["Copy,MarkSweepCompact", "3"]
    # the control: the same start with an archive that is not a valid one fails
    bogus = tmp_path / "bogus.jsa"
    bogus.write_bytes(b"not an archive")
    refused = subprocess.run([*check, f"-XX:SharedArchiveFile={bogus}"], env=env, capture_output=True, text=True,
                             timeout=300)
    assert refused.returncode != 0


_USER_DRIVER_OPTIONS = """
import sys
from toolkit.spark import get_spark
spark = get_spark("local[1]", input_bytes=2**31, conf={"spark.driver.extraJavaOptions": sys.argv[1]})
system = spark._jvm.java.lang.System
beans = spark._jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
print(system.getProperty("user.timezone"), system.getProperty("stream_incident.marker"),
      system.getProperty("log4j2.configurationFile") is not None, ",".join(sorted(b.getName() for b in beans)))
"""


@pytest.mark.e2e
def test_a_callers_own_driver_options_join_the_toolkits(tmp_path: Path) -> None:
    """Driver options given to ``get_spark`` come after the toolkit's: the driver keeps UTC and its log
    configuration, takes the caller's property, and runs the caller's collector instead of adding its own
    (a JVM given two collectors does not start)."""
    env = {**os.environ, "STREAM_INCIDENT_LOG_FILE": str(tmp_path / "spark.log")}
    for name in ("SPARK_REMOTE", *jvm.USER_JAVA_OPTION_ENVS):
        env.pop(name, None)
    own = "-Dstream_incident.marker=kept -XX:+UseSerialGC"
    started = subprocess.run([sys.executable, "-c", _USER_DRIVER_OPTIONS, own], env=env, capture_output=True,
                             text=True, timeout=300)
    assert started.returncode == 0, started.stderr[-2000:]
    assert started.stdout.split() == ["UTC", "kept", "True", "Copy,MarkSweepCompact"]


def test_warm_up_without_java_says_why_and_exits_3(monkeypatch, tmp_path: Path, capsys) -> None:
    from toolkit.cli import main

    monkeypatch.setenv("STREAM_INCIDENT_CACHE", str(tmp_path))
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))
    assert main(["warm-up", "--quiet"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("stream-incident: cannot identify the Java build") and "JAVA_HOME" in err
    assert not (tmp_path / "jvm").exists()


@pytest.mark.parametrize(("value", "expected"), [
    (None, "default"), ("1", True), ("on", True), ("Yes", True), ("0", False), ("off", False), (" FALSE ", False),
    ("no", False), ("", False)])
def test_on_off_switches_read_the_same_words(monkeypatch, value, expected):
    """The console-log switch and the class-archive switch accept the same words."""
    from toolkit import spark

    for name in (spark.VERBOSE_ENV, jvm.ARCHIVE_ENV):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    want_verbose, want_archive = (False, True) if expected == "default" else (expected, expected)
    assert spark.env_verbose() is want_verbose
    assert jvm.archive_enabled() is want_archive
