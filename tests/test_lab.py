"""JupyterLab, offline: explore.ipynb runs in a real JupyterLab, its charts render and follow the selectors.

A JupyterLab server on 127.0.0.1 (token off, a temporary root holding a copy of the notebook) is
driven by headless Chromium with the network unreachable, as where incidents are investigated.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request

import nbformat
import pytest

from support import REPO
from support.browser import network_is_off
from toolkit import report

#: A JupyterLab server and a browser.
pytestmark = pytest.mark.e2e

BUNDLE = REPO / "sample_logs" / "kafka-standby-lock-cleaner"

pytest.importorskip("jupyterlab")
pytest.importorskip("anywidget")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory, analysis_of):
    """A JupyterLab server on 127.0.0.1 whose root holds explore.ipynb pointed at a sample bundle."""
    analysis_of(BUNDLE.name)  # the kernel finds this bundle's tables in the session's parse cache
    root = tmp_path_factory.mktemp("lab-root")
    nb = nbformat.read(str(REPO / "notebooks" / "explore.ipynb"), as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source += f"\nbundle = {str(BUNDLE)!r}\nout_dir = {str(root / 'out')!r}\n"
    nbformat.write(nb, str(root / "explore.ipynb"))
    port = _free_port()
    log = (root.parent / "lab.log").open("wb")
    with report.kernel_for_this_interpreter(root.parent / "kernels") as kernel:
        nb.metadata["kernelspec"] = {"name": kernel, "display_name": kernel, "language": "python"}
        nbformat.write(nb, str(root / "explore.ipynb"))
        proc = subprocess.Popen(
            [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
             f"--ServerApp.port={port}", "--ServerApp.port_retries=0", "--IdentityProvider.token=",
             "--ServerApp.password=", "--ServerApp.disable_check_xsrf=True", f"--ServerApp.root_dir={root}",
             "--LabApp.expose_app_in_browser=True", "--LabApp.news_url=None", "--LabApp.check_for_updates_class="
             "jupyterlab.NeverCheckForUpdate", "--ServerApp.allow_root=True"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ}, cwd=str(root))
        try:
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status", timeout=2)
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        pytest.fail(f"JupyterLab did not start: {(root.parent / 'lab.log').read_text()[-2000:]}")
                    time.sleep(0.5)
            yield f"http://127.0.0.1:{port}"
        finally:
            # Shut down kernels (and their Spark) through the server before stopping it.
            try:
                for k in json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/api/kernels", timeout=5)):
                    urllib.request.urlopen(urllib.request.Request(
                        f"http://127.0.0.1:{port}/api/kernels/{k['id']}", method="DELETE"), timeout=30)
            except OSError:
                pass
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            log.close()


#: What a rendered Vega chart leaves in an output area (SVG renderer: its text is readable, so a redraw shows).
CHART_ELEMENTS = ".jp-OutputArea-output svg.marks, .jp-OutputArea-output canvas.marks"


def _state(driver) -> dict:
    """Chart elements, load errors and the evidence table's text, read from the live page."""
    return driver.execute_script("""
        const area = document.querySelector(".jp-NotebookPanel:not(.lm-mod-hidden)") || document;
        const charts = area.querySelectorAll(arguments[0]);
        const tables = [...area.querySelectorAll(".jp-OutputArea-output table")]
            .filter((t) => t.textContent.includes("app.log:"));
        return {
          charts: charts.length,
          chartText: [...charts].map((c) => c.textContent).join("|"),
          errors: (area.textContent.match(/Error loading script[^\\n]{0,120}/g) || []),
          evidence: tables.length ? tables[0].textContent : "",  // the widget's table comes first
          selects: area.querySelectorAll(".widget-select-multiple select").length,
          busy: !!document.querySelector(".jp-Notebook-ExecutionIndicator[data-status='busy']"),
        };
    """, CHART_ELEMENTS)


@pytest.mark.timeout(1800)
def test_explore_notebook_in_jupyterlab_offline(lab, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{lab}/lab/tree/explore.ipynb?reset")
    assert network_is_off(browser), "the browser must not reach the internet in this test"
    WebDriverWait(browser, 120).until(lambda d: d.execute_script(
        "const a = window.jupyterapp; if (!a) return false;"
        "const w = a.shell.currentWidget; return !!(w && w.sessionContext && w.sessionContext.session"
        " && w.sessionContext.session.kernel && w.content && w.content.widgets.length);"))
    WebDriverWait(browser, 120).until(lambda d: d.execute_script(
        "return window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.status === 'idle'"))
    browser.execute_script("window.jupyterapp.commands.execute('notebook:run-all-cells')")

    def drawn(d):
        s = _state(d)
        return s if s["charts"] >= 2 and s["selects"] >= 3 and "app.log:" in s["evidence"] else False

    first = WebDriverWait(browser, 1200, poll_frequency=2).until(drawn)
    assert first["errors"] == []
    assert "Error loading script" not in browser.page_source

    hosts = Select(browser.find_elements(By.CSS_SELECTOR, ".widget-select-multiple select")[0])
    names = [o.text for o in hosts.options]
    assert len(names) >= 2, names
    hosts.select_by_index(len(names) - 1)  # one host only

    def changed(d):
        s = _state(d)
        ok = (s["charts"] >= 1 and s["evidence"] and s["evidence"] != first["evidence"]
              and s["chartText"] != first["chartText"])
        return s if ok else False

    after = WebDriverWait(browser, 300, poll_frequency=1).until(changed)
    assert after["errors"] == []
    other_hosts = [n for n in names[:-1] if n in first["evidence"]]
    assert other_hosts and not any(f"{n}/" in after["evidence"] for n in other_hosts), \
        "the evidence table keeps only the chosen host"
