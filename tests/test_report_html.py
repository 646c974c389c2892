"""The HTML report stands alone: no network references, charts render in headless Chromium."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from pathlib import Path

import nbformat
import pandas as pd
import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from toolkit import report, viz

REPO = Path(__file__).resolve().parent.parent
EOS = REPO / "sample_logs" / "kafka-eos-stale-checkpoint"
PIPELINE_READY = all(importlib.util.find_spec(m) for m in ("toolkit.pipeline", "toolkit.detectors"))

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
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        pytest.skip("chromium is not installed and installing it needs root and apt-get")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update"], ["apt-get", "install", "-y", "chromium"]):
        if subprocess.run(cmd, env=env, capture_output=True, timeout=900).returncode != 0:
            pytest.skip(f"could not install chromium ({' '.join(cmd)} failed)")
    found = shutil.which("chromium")
    if not found:
        pytest.skip("apt-get installed no chromium binary")
    return found


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


def test_strip_external_resources_removes_cdn_references():
    page = ('<script src="https://cdnjs.cloudflare.com/require.min.js"></script><link rel="stylesheet" '
            'href="https://fonts.googleapis.com/css?family=Roboto"><style>@import url("https://x/y.css");'
            ' .a{background:url(//x/i.png)}</style><p>ok</p>')
    assert_offline(report.strip_external_resources(page))


@pytest.fixture(scope="module")
def eos_report(tmp_path_factory):
    if not PIPELINE_READY:
        pytest.skip("toolkit.pipeline / toolkit.detectors not available yet")
    out = tmp_path_factory.mktemp("eos-report")
    messages: list[str] = []
    files = report.make_report(EOS, out, timezone="UTC", progress=messages.append)
    assert messages, "make_report reports progress"
    return files


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


def _label_x(svg: str, label: str) -> float:
    """x position of the first text mark starting with ``label`` in a vl-convert SVG."""
    m = re.search(r'transform="translate\(([-\d.]+),[-\d.]+\)"[^>]*>' + re.escape(label), svg)
    assert m, f"no label {label!r} in the chart"
    return float(m.group(1))


def test_eos_task_lanes_show_checkpoint_write_crash_restart_in_order(eos_report):
    nb = nbformat.read(str(eos_report.notebook), as_version=4)
    svgs = [o["data"]["image/svg+xml"] for c in nb.cells for o in c.get("outputs", [])
            if "image/svg+xml" in o.get("data", {})]
    lanes = [s for s in svgs if "checkpoint written" in s and "process end: crash" in s]
    assert lanes, "a task-lane chart shows the checkpoint write and the crash"
    svg = lanes[0]
    assert _label_x(svg, "checkpoint written") < _label_x(svg, "process end: crash") < _label_x(svg, "process start, run 2")


def test_report_command_says_one_sentence_for_a_missing_bundle(tmp_path, capsys):
    args = report.build_parser().parse_args([str(tmp_path / "no-such-bundle"), "--out", str(tmp_path / "out")])
    assert report.run(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("stream-incident: bundle ") and "does not exist" in err and err.count("\n") == 1
