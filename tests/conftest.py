"""Shared fixtures: one local SparkSession for the whole test session."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent

# Keep the parse cache of test runs away from the user's own cache.
os.environ.setdefault("STREAM_INCIDENT_CACHE", str(Path(tempfile.gettempdir()) / f"stream-incident-test-cache-{os.getpid()}"))
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
