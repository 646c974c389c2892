"""Regenerate screenshots of the HTML report for two sample bundles.

    python docs/screenshots.py [--out out/screenshots] [--samples kafka-eos-stale-checkpoint ...]

For each sample it runs ``stream-incident report`` (the same code path as the command), then opens
``report.html`` from disk in headless Chromium (Debian's ``chromium``; no network needed: the
report carries its JavaScript) and saves two PNGs: the first screen (the verdict) and the
timeline section, where the charts open on the incident window. The PNGs land in ``--out`` next to
each report; they are outputs, regenerate them rather than committing them.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SAMPLES = ("kafka-eos-stale-checkpoint", "nifi-kinesis-migration-loss")
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--hide-scrollbars",
                  # Let the page's scripts draw the interactive charts before the picture is taken.
                  "--virtual-time-budget=15000"]


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        sys.exit("screenshots: Debian's chromium is needed (apt-get install chromium)")
    return found


def screenshot(page: Path, png: Path, width: int, height: int) -> Path:
    """A PNG of the top ``height`` pixels of ``page`` at ``width``."""
    with tempfile.TemporaryDirectory(prefix="stream-incident-shot-") as profile:
        subprocess.run([chromium(), *CHROMIUM_FLAGS, f"--user-data-dir={profile}", f"--screenshot={png}",
                        f"--window-size={width},{height}", page.resolve().as_uri()],
                       capture_output=True, timeout=300, check=False)
    if not png.exists():
        sys.exit(f"screenshots: chromium wrote no {png}")
    return png


def timeline_page(report_html: Path) -> Path:
    """A copy of the report starting at its timeline section (the cells before it hidden), so a
    screenshot of the page's top shows the charts."""
    text = report_html.read_text(encoding="utf-8")
    hide = ("<script>(() => { const h = document.getElementById('Timeline'); if (!h) return;"
            " const cell = h.closest('.jp-Cell'); if (!cell) return;"
            " for (let c = cell.previousElementSibling; c; c = c.previousElementSibling) c.style.display = 'none';"
            " })();</script>")
    copy = report_html.with_name("report-timeline.html")
    end = text.rfind("</body>")  # the last one: the inlined chart libraries may contain the string too
    copy.write_text(text[:end] + hide + text[end:] if end >= 0 else text + hide, encoding="utf-8")
    return copy


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(REPO / "out" / "screenshots"), help="where reports and PNGs go")
    parser.add_argument("--samples", nargs="+", default=list(DEFAULT_SAMPLES), help="sample bundle names")
    parser.add_argument("--width", type=int, default=1300)
    args = parser.parse_args(argv)
    out = Path(args.out)
    for name in args.samples:
        target = out / name
        subprocess.run([sys.executable, "-m", "toolkit.cli", "report", str(REPO / "sample_logs" / name),
                        "--out", str(target)], check=True, cwd=str(REPO))
        report_html = target / "report.html"
        first = screenshot(report_html, out / f"{name}-verdict.png", args.width, 1100)
        charts = screenshot(timeline_page(report_html), out / f"{name}-timeline.png", args.width, 1500)
        print(f"wrote {first}\n      {charts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
