"""Notebooks: committed clean, parameters validated, and every notebook runs headless through papermill."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest

from support import REPO
from support.notebooks import run_notebook_watched
from toolkit import report
from toolkit.options import AnalysisOptions

NOTEBOOKS = REPO / "notebooks"
ALL_NOTEBOOKS = sorted(NOTEBOOKS.rglob("*.ipynb"))

sys.path.insert(0, str(NOTEBOOKS / "training"))
import make as training  # noqa: E402  (the generator of the training notebooks)


def test_notebooks_are_committed_without_outputs():
    # the report, the Explorer and one training notebook per course of the generator
    assert [p.relative_to(NOTEBOOKS).as_posix() for p in ALL_NOTEBOOKS] == sorted(
        ["explore.ipynb", "incident_report.ipynb", *(f"training/{c.bundle}.ipynb" for c in training.COURSES)])
    for path in ALL_NOTEBOOKS:
        nb = nbformat.read(str(path), as_version=4)
        for cell in nb.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, f"{path.name} has outputs; strip them"


def test_training_notebooks_come_from_the_template():
    assert {p.stem for p in (NOTEBOOKS / "training").glob("*.ipynb")} == {c.bundle for c in training.COURSES}
    assert training.stale() == [], "run: python notebooks/training/make.py"


def test_report_notebook_declares_every_parameter():
    nb = nbformat.read(str(NOTEBOOKS / "incident_report.ipynb"), as_version=4)
    cell = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    for name in ("bundle", "out_dir", "time_window", "hosts", "tasks", "app_id", "spark_master", "spark_remote",
                 "timezone", "charts", "view", *AnalysisOptions().as_parameters()):
        assert f"\n{name}: " in "\n" + cell.source, name


@pytest.mark.parametrize("kwargs, message", [
    ({"bundle": "/nonexistent/bundle"}, "does not exist"),
    ({"time_window": ["2026-03-07T10:00:00Z", "2026-03-07T09:00:00Z"]}, "is not before its end"),
    ({"time_window": "2026-03-07"}, "must be [start, end]"),
    ({"time_window": ["yesterday-ish", None]}, "is not an ISO 8601 time"),
    ({"timezone": "Mars/Olympus"}, "is not an IANA zone"),
    ({"spark_master": "local[1]", "spark_remote": "sc://h:15002"}, "not both"),
    ({"spark_remote": "http://h:15002"}, "starting with sc://"),
    ({"hosts": [""]}, "hosts must be a list"),
    ({"charts": "png"}, "charts must be one of"),
    ({"view": "everything"}, "view must be one of"),
])
def test_bad_parameters_fail_with_one_sentence(tmp_path, kwargs, message):
    args = {"bundle": str(REPO / "sample_logs" / "kafka-eos-stale-checkpoint"), "out_dir": str(tmp_path), **kwargs}
    with pytest.raises(report.ParameterError) as err:
        report.validate_parameters(**args)
    text = str(err.value)
    assert message in text and text.count(". ") == 0 and text.endswith(".")


def test_good_parameters_are_normalised(tmp_path):
    p = report.validate_parameters(str(REPO / "sample_logs" / "kafka-eos-stale-checkpoint"), tmp_path,
                                   time_window=["2026-03-07T10:00:00+01:00", None], hosts="orders-agg-0, orders-agg-1",
                                   timezone="Europe/Berlin")
    assert p.time_window[0].isoformat() == "2026-03-07T09:00:00" and p.hosts == ["orders-agg-0", "orders-agg-1"]


def _run(notebook: Path, out: Path, **parameters) -> nbformat.NotebookNode:
    executed = run_notebook_watched(notebook, out / notebook.name, parameters, cwd=out)
    return nbformat.read(str(executed), as_version=4)


@pytest.mark.e2e
@pytest.mark.parametrize("course", training.COURSES, ids=lambda c: c.bundle)
def test_training_notebook_runs_and_its_answers_hold(tmp_path, course):
    nb = _run(training.path_for(course), tmp_path, bundle=str(REPO / "sample_logs" / course.bundle),
              out_dir=str(tmp_path / "out"))
    text = json.dumps([c.get("outputs", []) for c in nb.cells])
    assert course.detector in text  # the verdict names the detector


def test_explore_notebook_runs_headless(eos_explore):
    nb = eos_explore.notebook
    kinds = {k for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs for k in o.get("data", {})}
    assert "text/html" in kinds  # the evidence table
    # Charts are drawn inline, or inside the widgets' output areas when ipywidgets is active.
    assert any(k.startswith("application/vnd.vegalite") or k in ("image/svg+xml", "application/vnd.jupyter.widget-view+json")
               for k in kinds), kinds


def test_kernel_runs_this_interpreter_even_when_python3_points_elsewhere(tmp_path, monkeypatch):
    """A user-level ``python3`` kernelspec of another Python must not run the report."""
    from jupyter_client.kernelspec import KernelSpecManager

    other = tmp_path / "other" / "kernels" / "python3"
    other.mkdir(parents=True)
    (other / "kernel.json").write_text(json.dumps({"argv": ["/opt/elsewhere/bin/python", "-m", "ipykernel_launcher",
                                                            "-f", "{connection_file}"], "display_name": "x",
                                                   "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "other"))
    with report.kernel_for_this_interpreter(tmp_path / "scratch") as name:
        spec = KernelSpecManager().get_kernel_spec(name)
        assert name == report.PRIVATE_KERNEL and spec.argv[0] == sys.executable
    assert KernelSpecManager().get_kernel_spec("python3").argv[0] == "/opt/elsewhere/bin/python"  # env restored
