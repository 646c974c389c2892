"""The built wheel is a working installation on its own: ``stream-incident report`` runs from it.

The wheel is built from a copy of the repository (the build writes ``build/`` and ``*.egg-info`` next to its
sources), installed without dependencies into a fresh virtual environment, and that environment borrows the
test environment's dependencies through one ``.pth`` line. Nested ``.pth`` files of the borrowed folder (the
editable install's finder among them) are not processed, so ``toolkit`` is importable only from the wheel.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from support import EOS_SAMPLE as SAMPLE, REPO
from support.spark_services import loopback_env

#: Builds a wheel, installs it into a fresh venv and runs its report.
pytestmark = pytest.mark.e2e

#: Not copied for the build: environments, caches, output, and the benchmark bundles (large, not packaged).
NOT_COPIED = (".git", ".venv", "venv*", "benchmarks", "build", "dist", "out", "*.egg-info", "__pycache__",
              "*.pyc", ".pytest_cache", ".stream-incident-*", "spark-warehouse")


def _run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    assert proc.returncode == 0, f"{cmd}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(*NOT_COPIED))
    _run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(work / "dist"), str(source)])
    (built,) = (work / "dist").glob("stream_incident_toolkit-*.whl")
    return built


def test_wheel_carries_data_files_and_nothing_from_tests_or_samples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())

    def expected(folder: str, pattern: str, inside: str) -> set[str]:
        found = {f"{inside}/{p.name}" for p in (REPO / folder).glob(pattern) if p.is_file()}
        assert found, f"{folder}/{pattern} matches nothing in the repository"
        return found

    for folder, pattern, inside in (
        ("toolkit/catalogue", "*.toml", "toolkit/catalogue"),
        ("toolkit/knowledge", "*.toml", "toolkit/knowledge"),
        ("toolkit/resources", "*", "toolkit/resources"),
        ("toolkit/resources/schemas", "*.json", "toolkit/resources/schemas"),
        ("toolkit/report/templates", "*.html", "toolkit/report/templates"),
        ("notebooks", "*.ipynb", "toolkit/notebooks"),
        ("playbooks", "*.md", "toolkit/playbooks"),
    ):
        missing = expected(folder, pattern, inside) - names
        assert not missing, f"not in the wheel: {sorted(missing)}"
    strays = sorted(n for n in names if n.split("/")[0] in ("tests", "sample_logs", "notebooks", "playbooks")
                    or "sample_logs" in n or n.endswith((".pyc", ".parquet")))
    assert not strays, strays


def _fresh_env(root: Path, wheel: Path) -> Path:
    """A virtual environment holding only the wheel, dependencies borrowed from this test environment."""
    venv.EnvBuilder(with_pip=False).create(root)
    python = root / "bin" / "python"
    _run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
          "--no-index", "--ignore-installed", "--disable-pip-version-check", str(wheel)])
    site = Path(_run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    # Written after the install, so pip never sees the test environment's own (editable) copy.
    (site / "zz-test-environment.pth").write_text(sysconfig.get_paths()["purelib"] + "\n", encoding="utf-8")
    return python


def test_installed_wheel_writes_a_report(wheel, tmp_path):
    python = _fresh_env(tmp_path / "env", wheel)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in loopback_env().items() if k != "PYTHONPATH"}
    # Data files of the borrowed dependencies (nbconvert's HTML templates) stay under this environment's prefix.
    env["JUPYTER_PATH"] = os.pathsep.join(filter(None, [str(Path(sys.prefix) / "share" / "jupyter"),
                                                        env.get("JUPYTER_PATH")]))

    imported = Path(_run([str(python), "-c", "import toolkit; print(toolkit.__file__)"],
                         cwd=elsewhere, env=env).stdout.strip())
    assert imported.is_relative_to(tmp_path / "env") and not imported.is_relative_to(REPO), imported
    located = _run([str(python), "-c", "from toolkit.shipped import notebook_file, playbook_file; "
                    "print(notebook_file('incident_report.ipynb')); print(playbook_file('capturing-state.md'))"],
                   cwd=elsewhere, env=env).stdout.split()
    assert all(Path(p).is_relative_to(tmp_path / "env") and Path(p).is_file() for p in located), located

    out = tmp_path / "report"
    proc = subprocess.run([str(tmp_path / "env" / "bin" / "stream-incident"), "report", str(SAMPLE), "--out", str(out),
                           "--quiet"], cwd=elsewhere, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    html = (out / "report.html").read_text(encoding="utf-8")
    assert "eos-stale-restore-checkpoint" in html
    assert (out / "findings.json").is_file()
    assert not any(elsewhere.iterdir()), "the report wrote into the working directory"
