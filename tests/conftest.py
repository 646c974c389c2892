"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parent.parent

# Keep the parse cache of test runs away from the user's own cache.
os.environ.setdefault("STREAM_INCIDENT_CACHE", str(Path(tempfile.gettempdir()) / f"stream-incident-test-cache-{os.getpid()}"))
# The engine's log of this test run, apart from other runs on the machine (two clones' suites at once).
os.environ.setdefault("STREAM_INCIDENT_LOG_FILE", str(Path(tempfile.gettempdir()) / f"stream-incident-test-spark-{os.getpid()}.log"))
# No class archive for the test sessions unless a test asks for one (tests/test_jvm.py).
os.environ["STREAM_INCIDENT_CLASS_ARCHIVE"] = "0"
os.environ.pop("STREAM_INCIDENT_CLASS_ARCHIVE_DIR", None)
SAMPLES = REPO / "sample_logs"
#: Hand-built incident bundles (see tests/bundles/README.md).
BUNDLES = REPO / "tests" / "bundles"


@pytest.fixture(scope="session")
def spark():
    """One small local session (local[2], UI off, few shuffle partitions) for every test."""
    from toolkit.spark import get_spark

    os.environ.pop("SPARK_REMOTE", None)
    session = get_spark(
        "local[2]",
        conf={"spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2"},
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
def browser():
    """One headless Chromium (network off, Selenium over Debian's chromedriver) for every browser test."""
    from browser import start_browser, stop_browser

    driver = start_browser()
    yield driver
    stop_browser(driver)


#: The sample the entry-point tests (report command, Explorer notebook, detect) share.
EOS_SAMPLE = SAMPLES / "kafka-eos-stale-checkpoint"


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

    from toolkit import report

    out = tmp_path_factory.mktemp("eos-explore")
    notebook = REPO / "notebooks" / "explore.ipynb"
    executed = report.execute_notebook(notebook, out / notebook.name,
                                       {"bundle": str(EOS_SAMPLE), "out_dir": str(out / "out")}, cwd=out)
    return SimpleNamespace(notebook=nbformat.read(str(executed), as_version=4), out_dir=out / "out")
