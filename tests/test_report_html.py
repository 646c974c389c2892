"""The HTML report stands alone: no network references, charts render in headless Chromium."""

from __future__ import annotations

import contextlib
import json
import re
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import altair as alt
import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from support import EOS_SAMPLE as EOS, REPO
from support.browser import CHROMIUM, OVERLAPPING_TEXT_JS, ensure_chromium, network_is_off
from toolkit import report, viz


# Any src=/href=/@import/url( that points at http(s) or a protocol-relative URL.
NETWORK = re.compile(r"""(?:src\s*=|href\s*=|@import|url\()\s*["']?\s*(?:https?:)?//""", re.I)


# ---- a tiny stdlib PNG reader (enough for Chromium screenshots) --------------------------------

def png_rows(path: Path, max_rows: int | None = None) -> tuple[int, int, list[bytes]]:
    """Width, bytes per pixel and the unfiltered scanlines (first ``max_rows``) of an 8-bit RGB(A) PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and colour in (2, 6), "only 8-bit RGB/RGBA"
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * bpp
    rows, prev = [], bytearray(stride)
    for y in range(min(height, max_rows or height)):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, bpp, rows


def distinct_colours(path: Path, max_rows: int | None = None) -> int:
    width, bpp, rows = png_rows(path, max_rows)
    return len({row[i:i + 3] for row in rows[::3] for i in range(0, width * bpp, bpp * 2)})


# ---- headless Chromium ---------------------------------------------------------------------------

def chromium() -> str:
    """Path of Debian's chromium; installed when missing and running as root, else the test is skipped."""
    ensure_chromium()
    return CHROMIUM


def screenshot(page: Path, tmp: Path) -> Path:
    png = tmp / "shot.png"
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={tmp / 'chrome-profile'}", f"--screenshot={png}", "--window-size=1400,2000",
           page.resolve().as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=180)
    assert png.exists() and png.stat().st_size > 0, "chromium wrote no screenshot"
    return png


def assert_offline(page: str) -> None:
    assert not NETWORK.findall(page), report.external_references(page)[:3]
    assert report.external_references(page) == []


# ---- tests ---------------------------------------------------------------------------------------

@pytest.mark.e2e
def test_exported_html_is_offline_and_its_chart_renders(tmp_path):
    """The export step alone, on a notebook holding one chart and one table (no Spark needed)."""
    frame = pd.DataFrame({"lane": ["0_0 @ h", "0_0 @ h"], "category": ["checkpoint", "crash"],
                          "label": ["checkpoint written 10", "process end: crash"], "role": [None, None],
                          "start": pd.to_datetime(["2026-03-07 09:00:06", "2026-03-07 10:06:07"]), "end": [pd.NaT] * 2,
                          "evidence": ["h/app.log:10  Writing checkpoint", "h/app.log:40  last line"],
                          "host": ["h", "h"], "task_id": ["0_0", "0_0"]})
    svg = viz.to_svg(viz.task_lane_chart(frame))
    nb = new_notebook()
    cell = new_code_cell("chart")
    cell.outputs = [new_output("display_data", data={"image/svg+xml": svg, "text/plain": "chart"}),
                    new_output("display_data", data={"text/html": frame.to_html()}),
                    new_output("stream", name="stderr", text="WARN NativeCodeLoader: noise\n")]
    nb.cells = [cell]
    path = tmp_path / "n.ipynb"
    nbformat.write(nb, str(path))
    out = report.export_html(path, tmp_path / "n.html")
    page = out.read_text()
    assert_offline(page)
    assert page.count("<svg") >= 1 and "NativeCodeLoader" not in page
    assert distinct_colours(screenshot(out, tmp_path), max_rows=700) > 8


def test_the_report_renderer_draws_a_chart_from_the_spec_altair_hands_it(monkeypatch):
    """The report's renderer gets the chart's checked spec and draws from it (rebuilding the chart from that spec
    and checking it again cost a report several seconds); the result is the chart's own HTML."""
    frame = pd.DataFrame({"lane": ["0_0 @ h"], "category": ["crash"], "label": ["process end: crash"], "role": [None],
                          "start": pd.to_datetime(["2026-03-07 10:06:07"]), "end": [pd.NaT],
                          "evidence": ["h/app.log:40  last line"], "host": ["h"], "task_id": ["0_0"]})
    chart = viz.task_lane_chart(frame)
    monkeypatch.setattr(alt.Chart, "from_dict", None)  # the renderer must not rebuild the chart
    before = alt.renderers.active
    viz.use_charts("html")
    try:
        drawn = chart._repr_mimebundle_()
    finally:
        alt.renderers.enable(before)
    html_out = drawn[0]["text/html"] if isinstance(drawn, tuple) else drawn["text/html"]
    payload = re.search(f'<script type="application/json" class="{viz.HTML_CHART_MARKER}">(.*?)</script>', html_out)
    assert json.loads(payload.group(1)) == json.loads(json.dumps(chart.to_dict(), default=str))
    assert html_out.count("<svg") == 1 and "process end: crash" in html_out.split(viz.HTML_CHART_MARKER)[0]


def test_strip_external_resources_removes_cdn_references():
    page = ('<script src="https://cdnjs.cloudflare.com/require.min.js"></script><link rel="stylesheet" '
            'href="https://fonts.googleapis.com/css?family=Roboto"><style>@import url("https://x/y.css");'
            ' .a{background:url(//x/i.png)}</style><p>ok</p>')
    assert_offline(report.strip_external_resources(page))


def test_report_command_console_is_quiet(eos_report):
    """Only the toolkit's own lines: one per stage with its elapsed time, then the files written."""
    console = eos_report.console
    assert "WARN" not in console and "Exception" not in console and "\tat " not in console, console[-2000:]
    assert "without encryption" not in console and "KeyboardInterrupt" not in console
    lines = [line for line in console.splitlines() if line.strip()]
    stages = [line for line in lines if re.match(r"^\[\s*\d+\.\ds\] ", line)]
    assert len(stages) >= 6 and any("analysis done:" in line and "lines" in line for line in stages)
    others = [line for line in lines if line not in stages]
    assert others and others[0].startswith("Wrote ") and all(o.startswith(("Wrote ", "      ")) for o in others), others
    logs = eos_report.html.parent / "logs"
    assert (logs / "spark.log").stat().st_size > 0 and (logs / "kernel.log").exists()


def test_the_report_kernel_is_stopped_so_that_its_spark_driver_cleans_up(eos_report):
    """The finished kernel is terminated soon after its shutdown request (a kernel holding a Spark session
    does not exit on the request alone); the signal reaches its driver, which deletes its block manager
    and scratch directories, as an orderly exit would. Killed instead, it would leave them behind."""
    from toolkit.report.runner import KERNEL_SHUTDOWN_WAIT_S, report_kernel_manager

    assert report_kernel_manager(None).shutdown_wait_time == KERNEL_SHUTDOWN_WAIT_S
    deadline = time.monotonic() + 30
    while any(eos_report.spark_local.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(eos_report.spark_local.iterdir()), sorted(p.name for p in eos_report.spark_local.iterdir())


def test_eos_report_files_and_ranked_findings(eos_report):
    data = json.loads(eos_report.findings.read_text())
    assert data["findings"][0]["detector"] == "eos-stale-restore-checkpoint"
    assert eos_report.notebook.exists()


def test_eos_report_is_offline_and_shows_the_cause_first(eos_report, tmp_path):
    page = eos_report.html.read_text()
    assert_offline(page)
    assert page.count("<svg") > 4
    body = page[page.index("<body"):]
    verdict = body.index("Verdict")
    assert verdict < body.index("Provenance and parameters"), "the verdict comes before everything else"
    assert "eos-stale-restore-checkpoint" in body[verdict:verdict + 6000]
    assert distinct_colours(screenshot(eos_report.html, tmp_path), max_rows=900) > 8


def _chart_svgs(notebook: Path) -> list[str]:
    """The static SVG of every chart in an executed report notebook (vl-convert's rendering)."""
    nb = nbformat.read(str(notebook), as_version=4)
    svgs = []
    for cell in nb.cells:
        for o in cell.get("outputs", []):
            data = o.get("data", {})
            if "image/svg+xml" in data:
                svgs.append(data["image/svg+xml"])
            elif "si-chart" in data.get("text/html", ""):
                html_text = data["text/html"]
                svgs.append(html_text[html_text.index("<svg"):html_text.rindex("</svg>") + 6])
    return svgs


@pytest.fixture(scope="module")
def eos_svg_page(eos_report, tmp_path_factory):
    """Every static chart SVG of the EOS report on one page (each in its own block)."""
    svgs = _chart_svgs(eos_report.notebook)
    assert len(svgs) >= 4
    page = tmp_path_factory.mktemp("svgs") / "charts.html"
    page.write_text("<html><body>" + "".join(f"<div class='c'>{s}</div>" for s in svgs) + "</body></html>")
    return page


def test_eos_chart_labels_do_not_overlap(eos_svg_page, browser):
    """At the report's sizes no two texts of a chart print over each other (browser text boxes)."""
    browser.get(eos_svg_page.as_uri())
    overlaps = browser.execute_script(OVERLAPPING_TEXT_JS)
    assert overlaps == [], overlaps[:10]


def test_eos_task_lanes_show_checkpoint_write_crash_restart_in_order(eos_svg_page, browser):
    browser.get(eos_svg_page.as_uri())
    # Screen x of the first text starting with each label, in the first chart that has all three.
    xs = browser.execute_script("""
        for (const svg of document.querySelectorAll("div.c > svg")) {
          const found = {};
          for (const t of svg.querySelectorAll("text")) {
            for (const label of arguments[0]) {
              if (!(label in found) && t.textContent.startsWith(label)) found[label] = t.getBoundingClientRect().left;
            }
          }
          if (Object.keys(found).length === arguments[0].length) return arguments[0].map((l) => found[l]);
        }
        return null;
    """, ["checkpoint written", "process end: crash", "process start, run 2"])
    assert xs, "a task-lane chart labels the checkpoint write, the crash and the restart"
    assert xs[0] < xs[1] < xs[2]


def test_eos_charts_open_on_the_incident(eos_report):
    """The default time range is the incident, not the whole log: the report says which range."""
    body = eos_report.html.read_text()
    assert "Charts open on the incident: 2026-03-07 08:59" in body and "10:0" in body
    nb = nbformat.read(str(eos_report.notebook), as_version=4)
    specs = [json.loads(h[h.index('class="si-chart-spec">') + 22:h.index("</script>", h.index("si-chart-spec"))]
                        .replace("<\\/", "</"))
             for c in nb.cells for o in c.get("outputs", [])
             for h in [o.get("data", {}).get("text/html", "")] if "si-chart-spec" in h]
    domains = re.findall(r'"domain": \[(1\d{12}), (1\d{12})\]', json.dumps(specs))
    assert domains, "time axes open on a fixed range"
    # The timeline charts break their axis around the write and around the crash and restart: panels of
    # minutes, not the quiet hour between (only the ingest overview spans the whole incident).
    short = [(int(a), int(b)) for a, b in domains if int(b) - int(a) < 30 * 60 * 1000]
    assert len(short) >= 4 and len(short) >= len(domains) - 2, domains


def test_eos_report_charts_work_offline_with_evidence_tooltips(eos_report, browser):
    """Opened from disk with no network: every chart goes live, and hovering a mark shows file:line."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(eos_report.html.as_uri())
    assert network_is_off(browser)
    charts = browser.find_elements(By.CSS_SELECTOR, "div.si-chart")
    assert len(charts) >= 4
    WebDriverWait(browser, 60).until(
        lambda d: len(d.find_elements(By.CSS_SELECTOR, "div.si-chart[data-live='yes']")) == len(charts))
    failed = browser.execute_script(
        "return [...document.querySelectorAll('.si-live')].filter((e) => e.textContent.includes('unavailable')).length")
    assert failed == 0
    lanes = next(c for c in charts if "checkpoint written" in c.text)
    marks = [m for m in lanes.find_elements(By.CSS_SELECTOR, ".si-live g.mark-symbol path")
             if m.size["width"] > 2]
    assert marks, "the live task-lane chart has point marks"
    shown = ""
    for mark in marks[:12]:
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", mark)
        ActionChains(browser).move_to_element(mark).perform()
        try:
            WebDriverWait(browser, 3).until(
                lambda d: d.find_element(By.ID, "vg-tooltip-element").is_displayed())
        except Exception:  # noqa: BLE001 - this mark sits under another one; try the next
            continue
        shown = browser.find_element(By.ID, "vg-tooltip-element").text
        if re.search(r"orders-agg-\d/app\.log:\d+ ", shown):
            break
    assert re.search(r"orders-agg-\d/app\.log:\d+ ", shown), shown


def test_eos_report_host_filter_narrows_a_chart(eos_report, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(eos_report.html.as_uri())
    WebDriverWait(browser, 60).until(lambda d: d.find_elements(By.CSS_SELECTOR, "div.si-chart[data-live='yes']"))
    lanes = next(c for c in browser.find_elements(By.CSS_SELECTOR, "div.si-chart") if "checkpoint written" in c.text)
    WebDriverWait(browser, 30).until(lambda d: lanes.get_attribute("data-live") == "yes")

    def marks() -> int:
        return len(lanes.find_elements(By.CSS_SELECTOR, ".si-live g.mark-symbol path"))

    before = marks()
    select = Select(lanes.find_element(By.CSS_SELECTOR, ".vega-bindings select"))
    assert [o.text for o in select.options][:1] == ["all"] and len(select.options) >= 3
    select.select_by_visible_text("orders-agg-1")
    WebDriverWait(browser, 10).until(lambda d: marks() < before)
    assert 0 < marks() < before


def test_a_failing_chart_leaves_the_rest_of_the_report(analysis_of, tmp_path, monkeypatch):
    """One chart raising shows one line naming it; the other charts are still drawn."""
    from datetime import datetime

    from IPython.display import HTML

    from toolkit.detectors import run_detectors
    from toolkit.report import sections

    analysis = analysis_of("kafka-eos-stale-checkpoint")
    params = report.validate_parameters(EOS, tmp_path, charts="svg")
    inv = report.ReportView(params=params, analysis=analysis, findings=run_detectors(analysis.timeline),
                               hosts=None, tasks=None, started=datetime.now(), seconds=0.0)
    shown: list = []
    monkeypatch.setattr(sections, "_display", lambda: shown.append)

    def broken(*_args, **_kwargs):
        raise TypeError("'<' not supported between instances of 'NoneType' and 'str'")

    monkeypatch.setattr(viz, "offset_chart", broken)  # the findings' charts
    monkeypatch.setattr(viz.builders, "offset_chart", broken)  # the timeline's
    with inline_svg_charts():
        sections.show_timeline(inv)
        sections.show_findings(inv)
    errors = [o.data for o in shown if isinstance(o, HTML) and "section-error" in o.data]
    assert errors and all(e.count("\n") == 0 for e in errors)
    assert any("Offsets" in e and "TypeError" in e for e in errors)
    charts = [o for o in shown if "image/svg+xml" in (getattr(o, "_repr_mimebundle_", dict)() or {})]
    assert len(charts) >= 3, "the threads, tasks and rebalance charts are still drawn"


@contextlib.contextmanager
def inline_svg_charts():
    """The SVG renderer for the block (the notebook's ``charts="svg"``), the previous one afterwards."""
    previous = alt.renderers.active
    viz.use_charts("svg")
    try:
        yield
    finally:
        alt.renderers.enable(previous)


def _chart(field: str):
    return alt.Chart(pd.DataFrame({field: [1, 2, 3]})).mark_point().encode(x=alt.X(field, type="quantitative"))


class _UndrawableChart(alt.Chart):
    def _repr_mimebundle_(self, *args, **kwargs):
        raise ValueError("the renderer failed")


def test_charts_are_drawn_ahead_but_shown_in_the_order_given():
    """With a renderer that gives finished text, charts are drawn on a thread and everything still
    comes out in the order it was given; a chart that cannot be drawn leaves one line in its place."""
    from IPython.display import HTML

    from toolkit.report import sections

    shown: list = []
    with inline_svg_charts():
        with sections.ordered_display(shown.append) as display:
            display(HTML("<h3>first</h3>"))
            display(_chart("a"))
            display(HTML("<h3>second</h3>"))
            display(_UndrawableChart(pd.DataFrame({"b": [1]}), mark="point"))
            display(_chart("c"))
            display(_UndrawableChart(pd.DataFrame({"b": [1]}), mark="point", title="Lock hand-offs"))
            assert shown == [], "nothing is shown before the block ends"
    assert [type(o).__name__ for o in shown] == ["HTML", "_Rendered", "HTML", "HTML", "_Rendered", "HTML"]
    first, failed, last, titled = shown[1], shown[3], shown[4], shown[5]
    first_svg = first._repr_mimebundle_()["image/svg+xml"]
    assert first_svg.startswith("<svg") and ">a</text>" in first_svg
    assert ">c</text>" in last._repr_mimebundle_()["image/svg+xml"]
    assert repr(first).startswith("alt.Chart")
    assert "section-error" in failed.data
    assert "a chart could not be drawn: ValueError: the renderer failed" in failed.data
    assert "the chart \u201cLock hand-offs\u201d could not be drawn: ValueError" in titled.data


def test_a_cell_without_charts_starts_no_drawing_thread():
    import threading

    from IPython.display import HTML

    from toolkit.report import sections

    shown: list = []
    with inline_svg_charts():
        with sections.ordered_display(shown.append) as display:
            display(HTML("<p>text only</p>"))
            assert not [t for t in threading.enumerate() if t.name.startswith("chart_")]
    assert [o.data for o in shown] == ["<p>text only</p>"]


def test_widget_charts_are_shown_as_given():
    """A renderer that is not finished text (a widget) keeps the chart object itself, in order."""
    from IPython.display import HTML

    from toolkit.report import sections

    previous = alt.renderers.active
    alt.renderers.enable("default")
    try:
        shown: list = []
        chart = _chart("a")
        with sections.ordered_display(shown.append) as display:
            display(chart)
            display(HTML("<p>after</p>"))
    finally:
        alt.renderers.enable(previous)
    assert shown[0] is chart and isinstance(shown[1], HTML)


def test_report_command_says_one_sentence_for_a_missing_bundle(tmp_path, capsys):
    args = report.build_parser().parse_args([str(tmp_path / "no-such-bundle"), "--out", str(tmp_path / "out")])
    assert report.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("stream-incident: bundle ") and "does not exist" in err and err.count("\n") == 1


def test_the_report_loads_papermill_before_its_export_thread_imports_nbconvert(tmp_path, monkeypatch):
    """Both import the Jupyter client: imported by two threads at once, its modules can be met half-initialised
    (an ImportError that ended ``stream-incident report``). Papermill and the client are loaded on the calling
    thread before the export thread starts, and the loader imports both."""
    import threading

    from toolkit.report import command, runner

    calls = []
    monkeypatch.setattr(command, "load_notebook_engine", lambda: calls.append(("load", threading.current_thread())))
    monkeypatch.setattr(command, "prepare_export", lambda: calls.append(("export", threading.current_thread())))

    def stop(*_a, **_k):
        calls.append(("notebook", threading.current_thread()))
        raise RuntimeError("stop here")

    monkeypatch.setattr(command, "execute_notebook", stop)
    with pytest.raises(RuntimeError, match="stop here"):
        command.make_report(EOS, tmp_path / "out")
    (load, caller), *later = calls
    assert load == "load" and caller is threading.current_thread()
    assert sorted(step for step, _ in later) == ["export", "notebook"]
    assert next(thread for step, thread in later if step == "export") is not caller
    runner.load_notebook_engine()
    assert {"papermill", "jupyter_client"} <= set(sys.modules)


def test_ingest_problems_table_lists_each_problem_once_and_agrees_with_its_count(spark, tmp_path):
    """A file of unknown layout and a log whose first line no layout reads: one row each, the detail naming
    the first unparsed line; the table is the ingest report's one list and the provenance counts its rows."""
    from datetime import datetime

    from toolkit.ingest import parse_bundle

    bundle = tmp_path / "bundle"
    (bundle / "orders-agg-1").mkdir(parents=True)
    jvm_notice = "WARNING: Using incubator modules: jdk.incubator.vector\n"  # what a JVM prints before log4j starts
    (bundle / "orders-agg-1" / "app.log").write_text(jvm_notice + (EOS / "orders-agg-1" / "app.log").read_text())
    (bundle / "orders-agg-1" / "expected.json").write_text((EOS / "EXPECTED.json").read_text())
    _, ingest, _ = parse_bundle(spark, bundle, tmp_path / "out")
    json_lines = len((EOS / "EXPECTED.json").read_text().splitlines())
    log_lines = 1 + len((EOS / "orders-agg-1" / "app.log").read_text().splitlines())

    table = report.ingest_problems_table(ingest)
    assert list(table.itertuples(index=False, name=None)) == [
        ("orders-agg-1/app.log", f"1 of {log_lines} lines unparsed (kept with layout 'unparsed')",
         "line 1: " + jvm_notice.strip()),
        ("orders-agg-1/expected.json", "unknown layout: every line kept as unparsed",
         f"{json_lines} of {json_lines} lines; line 1: {{"),
    ]
    params = report.validate_parameters(bundle, tmp_path / "out", charts="svg")
    view = report.ReportView(params=params, analysis=type("Analysis", (), {"ingest": ingest})(), findings=[],
                             hosts=None, tasks=None, started=datetime.now(), seconds=0.0)
    provenance = dict(report.provenance_table(view).itertuples(index=False, name=None))
    assert provenance["ingest problems"] == str(len(table)) == "2"


@pytest.mark.e2e
def test_report_on_an_empty_bundle_is_no_green_verdict_and_exits_2(tmp_path):
    """A bundle with no log file and no state evidence: the report is written with a verdict that says nothing
    could be checked (not the green "no known incident pattern found", not "every line was read"), and the
    command ends with one sentence and exit 2 (unusable input)."""
    import os
    import sys

    empty = tmp_path / "incident"
    empty.mkdir()
    run = subprocess.run([sys.executable, "-m", "toolkit.cli", "report", str(empty), "--out", str(tmp_path / "out"),
                          "--quiet"], capture_output=True, text=True, cwd=str(REPO), timeout=1800, env=dict(os.environ))
    assert run.returncode == 2, run.stderr[-3000:]
    assert run.stderr.strip() == (f"stream-incident: no log file and no state evidence found in the bundle ({empty}); "
                                  "the report's verdict says so")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "Verdict: nothing could be checked" in page
    assert "No log file and no state evidence found in the bundle." in page
    assert "no known incident pattern found" not in page and "every line was read" not in page
    assert json.loads((tmp_path / "out" / "findings.json").read_text())["ingest"]["status"] == "empty"


def test_a_scope_that_leaves_every_finding_out_is_no_all_clear():
    """``report --host`` or ``--task`` that misses the findings says where they are, never "no known incident"."""
    from toolkit.detectors.base import Finding
    from toolkit.report import sections

    elsewhere = Finding(detector="eos-stale-restore-checkpoint", severity="critical", confidence="likely",
                        title="orders-agg-0: EOS restart trusted a restore-time checkpoint", explanation="e",
                        hosts=["orders-agg-0"], tasks=["0_0"])
    page = sections.verdict_html([], "bundle", outside=[elsewhere], scope="hosts orders-agg-9")
    assert "no known incident pattern" not in page
    assert "1 finding(s) elsewhere" in page and "orders-agg-9" in page and elsewhere.title in page
    # Info findings outside the scope are no reason to withhold the all-clear of the scope.
    quiet = Finding(detector="restore-from-scratch", severity="info", confidence="likely", title="t", explanation="e")
    assert "no known incident pattern" in sections.verdict_html([], "bundle", outside=[quiet], scope="tasks 0_1")


def test_charts_open_on_a_time_window_given_with_both_ends(tmp_path):
    """``--from``/``--to``: the axis shows that range (intervals that overlap it used to stretch it to the whole log)."""
    from types import SimpleNamespace

    from toolkit.report import sections

    both = report.validate_parameters(EOS, tmp_path, time_window=["2026-03-07T10:05:00Z", "2026-03-07T10:10:00Z"])
    assert sections._window_focus(SimpleNamespace(params=both)) == [
        (pd.Timestamp("2026-03-07 10:05:00"), pd.Timestamp("2026-03-07 10:10:00"))]
    open_end = report.validate_parameters(EOS, tmp_path, time_window=["2026-03-07T10:05:00Z", None])
    assert sections._window_focus(SimpleNamespace(params=open_end)) is None


def test_report_tables_show_whole_numbers_as_integers_and_missing_values_as_nothing():
    """The appendix printed ``line_no`` as 230.000000 and nan: a missing value had made the column float."""
    from toolkit.report import sections

    table = pd.DataFrame({"line_no": [230.0, None], "offset_ms": [1.5, 2.0], "text": ["a", "b"]})
    page = sections._table_style(table).to_html()
    assert ">230<" in page and "230.0" not in page and "nan" not in page
    assert ">1.500000<" in page  # a real fraction keeps its digits
