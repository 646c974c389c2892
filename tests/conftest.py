"""Shared fixtures (one local SparkSession for the whole test session) and the test tiers.

Every test has exactly one tier marker, given here at collection:

- ``e2e``: starts something of its own (a ``report`` or CLI process, a papermill kernel, a browser, a
  standalone cluster or Connect server, a wheel build and a fresh venv, a warm-up JVM); marked explicitly,
  or through a fixture of ``E2E_FIXTURES``;
- ``spark``: runs on the shared session (uses the ``spark`` fixture, directly or through other fixtures);
- ``unit``: everything else; such a test fails if it starts a SparkSession or one of the processes above.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import BUNDLES, EOS_SAMPLE, REPO, SAMPLES
from support.tiers import COLLECTED_TIERS, TIERS, starts_own_process

# Keep the parse cache of test runs away from the user's own cache.
os.environ.setdefault("STREAM_INCIDENT_CACHE", str(Path(tempfile.gettempdir()) / f"stream-incident-test-cache-{os.getpid()}"))
# The engine's log of this test run, apart from other runs on the machine (two clones' suites at once).
os.environ.setdefault("STREAM_INCIDENT_LOG_FILE", str(Path(tempfile.gettempdir()) / f"stream-incident-test-spark-{os.getpid()}.log"))
# pytest-xdist workers inherit both from the controlling process: each keeps a cache and a log of its own.
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER:
    os.environ["STREAM_INCIDENT_CACHE"] += f"-{WORKER}"
    os.environ["STREAM_INCIDENT_LOG_FILE"] = os.environ["STREAM_INCIDENT_LOG_FILE"].removesuffix(".log") + f"-{WORKER}.log"
# No class archive for the test sessions unless a test asks for one (tests/test_jvm.py).
os.environ["STREAM_INCIDENT_CLASS_ARCHIVE"] = "0"
os.environ.pop("STREAM_INCIDENT_CLASS_ARCHIVE_DIR", None)

#: Fixtures that start a process, kernel or browser of their own: a test using one is end-to-end.
E2E_FIXTURES = frozenset({"eos_report", "eos_explore", "browser"})
#: The session's EOS report and Explorer run: their tests stay on one pytest-xdist worker, which makes them once.
EOS_FIXTURES = frozenset({"eos_report", "eos_explore"})


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Give each test its tier (before ``-m`` deselects): an explicit tier marker stays; else ``e2e`` through an
    end-to-end fixture, ``spark`` through the session, ``unit`` otherwise."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if not any(item.get_closest_marker(tier) for tier in TIERS):
            tier = "e2e" if fixtures & E2E_FIXTURES else "spark" if "spark" in fixtures else "unit"
            item.add_marker(tier)
    # Under pytest-xdist (--dist loadgroup): the spark tier on one worker (one session, one JVM), the tests of the
    # EOS report together; the other e2e tests, then the unit tier, fill the other worker. Groups come first
    # so that the two workers start with one each.
    rank = {}
    xdist = config.pluginmanager.hasplugin("xdist")
    for index, item in enumerate(items):
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("spark"):
            if xdist:
                item.add_marker(pytest.mark.xdist_group("spark"))
            rank[item.nodeid] = (0, index)
        elif fixtures & EOS_FIXTURES:
            if xdist:
                item.add_marker(pytest.mark.xdist_group("eos-report"))
            rank[item.nodeid] = (1, index)
        else:
            rank[item.nodeid] = (2 if item.get_closest_marker("e2e") else 3, index)
    config.stash[COLLECTED_TIERS] = {
        item.nodeid: ([tier for tier in TIERS if item.get_closest_marker(tier)], "spark" in getattr(item, "fixturenames", ()))
        for item in items}
    if WORKER:
        items.sort(key=lambda item: rank[item.nodeid])
    if getattr(config.option, "loadgroup", False):
        _name_xdist_groups(items)


def _name_xdist_groups(items) -> None:
    """Put each test's xdist group into its node id (``...::test@spark``), which is what --dist loadgroup
    schedules by. pytest-xdist 3.8 writes ``item._nodeid``, which pytest 9.2 no longer reads (its node ids
    live in ``item._id``), so without this every group is scattered over the workers."""
    try:
        from _pytest.nodeid import coerce_node_id
    except ImportError:  # pytest before 9.2: xdist's own suffix works
        return
    for item in items:
        groups = sorted({str(mark.args[0]) for mark in item.iter_markers("xdist_group") if mark.args})
        if groups and "@" not in item.nodeid:
            item._id = coerce_node_id(f"{item.nodeid}@{'_'.join(groups)}")


@pytest.fixture(autouse=True)
def _tier_guard(request, monkeypatch):
    """A test outside ``e2e`` starts no process of the kinds above; a ``unit`` test starts no SparkSession."""
    if request.node.get_closest_marker("e2e"):
        yield
        return
    started: list[str] = []
    popen_init = subprocess.Popen.__init__

    def watched_popen(self, args, *a, **kw):
        what = starts_own_process(args)
        if what:
            started.append(what)
        popen_init(self, args, *a, **kw)

    monkeypatch.setattr(subprocess.Popen, "__init__", watched_popen)
    if request.node.get_closest_marker("unit"):
        from pyspark.sql import SparkSession

        get_or_create = SparkSession.Builder.getOrCreate

        def refused(builder):
            started.append("a SparkSession")
            return get_or_create(builder)

        monkeypatch.setattr(SparkSession.Builder, "getOrCreate", refused)
    yield
    if started:
        tier = "unit" if request.node.get_closest_marker("unit") else "spark"
        pytest.fail(f"a {tier} test started {', '.join(sorted(set(started)))}: use the spark fixture or mark it "
                    "e2e (tests/conftest.py)", pytrace=False)


@pytest.fixture(scope="session")
def spark():
    """One small local session (local[2], UI off, few shuffle partitions) for every test.

    Its heap is set, not taken from the machine's RAM: the session keeps the tables of every bundle it analyses
    (``analysis_of``) in memory until the run ends, while the tests after them parse megabyte lines."""
    from toolkit.spark import get_spark

    os.environ.pop("SPARK_REMOTE", None)
    session = get_spark(
        "local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2", "spark.driver.memory": "5g"},
        app_name="stream-incident-tests",
    )
    yield session
    session.stop()


@pytest.fixture
def small_plan_settings(spark):
    """The shared session's small-input settings (``toolkit.jvm.SMALL_INPUT_SQL_CONF``) put back as they were
    before the test: a test that switches them must not leave, e.g., Spark's default shuffle width to the
    tests after it."""
    from toolkit import jvm

    keys = [*jvm.SMALL_INPUT_SQL_CONF, jvm._APPLIED_MARK]
    before = {key: spark.conf.get(key, None) for key in keys}
    yield spark.conf
    for key, value in before.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def analysis_of(spark, tmp_path_factory):
    """Analyse a bundle once per test session: a shipped sample (``analysis_of("kafka-restore-skipped")``)
    or a hand-built bundle of ``tests/bundles`` (``analysis_of("bundles/kafka7672-2.0.1-...")``).

    Through the session's parse cache (``STREAM_INCIDENT_CACHE`` above), so the notebook and report
    tests, whose kernels share that cache, find these bundles' tables already derived.
    """
    from toolkit.cache import ParseCache
    from toolkit.pipeline import analyse

    done: dict[str, object] = {}

    def get(name: str):
        if name not in done:
            out = tmp_path_factory.mktemp(f"analysis-{name.replace('/', '-')}")
            path = BUNDLES / name.split("/", 1)[1] if name.startswith("bundles/") else SAMPLES / name
            done[name] = analyse(spark, path, out, cache=ParseCache())
        return done[name]

    return get


@pytest.fixture(scope="session")
def detected(analysis_of):
    """``detected(name) -> (analysis, findings)``: the session's analysis of a sample or hand-built bundle (names as
    for ``analysis_of``) and the findings of every detector on it, each made once per test session."""
    from toolkit.detectors import run_detectors

    found: dict[str, list] = {}

    def get(name: str):
        analysis = analysis_of(name)
        if name not in found:
            found[name] = run_detectors(analysis.timeline)
        return analysis, found[name]

    return get


@pytest.fixture(scope="session")
def bundle(detected):
    """``bundle(name) -> (analysis, findings)`` of a hand-built bundle of ``tests/bundles`` (``detected`` above)."""
    return lambda name: detected(f"bundles/{name}")


@pytest.fixture(scope="session")
def browser():
    """One headless Chromium (network off, Selenium over Debian's chromedriver) for every browser test."""
    from support.browser import start_browser, stop_browser

    driver = start_browser()
    yield driver
    stop_browser(driver)


@pytest.fixture(scope="session")
def eos_report(tmp_path_factory):
    """The README's report command on the EOS sample, run as a user runs it; its console kept.

    Spark is given no Python for its workers: the analysis and the report must not need one (a cluster's
    executors may have none), so a step that starts a Python worker fails the command."""
    out = tmp_path_factory.mktemp("eos-report")
    spark_local = tmp_path_factory.mktemp("eos-report-spark-local")  # the kernel's driver keeps its blocks here
    env = {**os.environ, "PYSPARK_PYTHON": str(out / "no-python-for-spark-workers"),
           "SPARK_LOCAL_DIRS": str(spark_local)}
    run = subprocess.run([sys.executable, "-m", "toolkit.cli", "report", str(EOS_SAMPLE), "--out", str(out)],
                         capture_output=True, text=True, cwd=str(REPO), timeout=1800, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    return SimpleNamespace(html=out / "report.html", notebook=out / "report.ipynb", findings=out / "findings.json",
                           console=run.stdout + run.stderr, spark_local=spark_local)


@pytest.fixture(scope="session")
def eos_explore(tmp_path_factory):
    """``notebooks/explore.ipynb`` (the Explorer) run headless through papermill on the EOS sample."""
    import nbformat

    from support.notebooks import run_notebook_watched

    out = tmp_path_factory.mktemp("eos-explore")
    notebook = REPO / "notebooks" / "explore.ipynb"
    executed = run_notebook_watched(notebook, out / notebook.name,
                                    {"bundle": str(EOS_SAMPLE), "out_dir": str(out / "out")}, cwd=out)
    return SimpleNamespace(notebook=nbformat.read(str(executed), as_version=4), out_dir=out / "out")
