"""Headless Chromium for the browser tests: Debian's chromium and chromedriver, driven by Selenium.

Nothing is downloaded: the driver is ``/usr/bin/chromedriver`` (``Service`` with an explicit path,
so Selenium's own driver manager never runs). The tests install nothing: ``.ci/run`` installs Debian's
``chromium`` and ``chromium-driver`` before pytest starts. When they are missing the browser tests are
skipped on a developer's machine and fail under CI (``CI`` set), where a skip would hide them.

The browser runs with the network unreachable: every host name resolves to nothing except
127.0.0.1, and any proxied request goes to a closed port. Pages under test come from disk or from
a server on 127.0.0.1.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"

#: Flags for a quiet, sandbox-free headless run that phones nowhere.
CHROMIUM_FLAGS = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-dev-shm-usage",
                  "--disable-quic"]
#: No network but loopback: names resolve to nothing (127.0.0.1 excepted) and proxied traffic goes nowhere.
OFFLINE_FLAGS = ["--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                 "--proxy-server=http://127.0.0.1:9", "--proxy-bypass-list=127.0.0.1"]


def ensure_chromium() -> None:
    """Skip (fail under CI) unless Debian's chromium and chromedriver are installed."""
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    why = (f"{CHROMIUM} or {CHROMEDRIVER} is missing: "
           "apt-get install chromium chromium-driver (.ci/run does it before the tests)")
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(why, pytrace=False)
    pytest.skip(why)


def start_browser(width: int = 1400, height: int = 1800):
    """A Selenium-driven headless Chromium with the network off (a fresh profile each time)."""
    ensure_chromium()
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        pytest.skip("selenium is not installed (it is in the dev extra)")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="stream-incident-chromium-")
    for flag in [*CHROMIUM_FLAGS, *OFFLINE_FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(30)
    driver._profile_dir = profile  # noqa: SLF001 - removed by stop_browser
    return driver


def stop_browser(driver) -> None:
    profile = getattr(driver, "_profile_dir", None)
    driver.quit()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


def network_is_off(driver) -> bool:
    """True when the page cannot reach a public CDN (what an offline investigator has)."""
    result = driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        fetch("https://cdn.jsdelivr.net/npm/vega@6", {mode: "no-cors"})
          .then(() => done("reached")).catch(() => done("unreachable"));
    """)
    return result == "unreachable"


#: JavaScript: bounding boxes of every visible text element inside each <svg> of the page, and the
#: pairs that overlap by more than a pixel in both directions.
OVERLAPPING_TEXT_JS = """
const out = [];
document.querySelectorAll("svg").forEach((svg, chart) => {
  if (svg.parentElement.closest("svg")) return;
  const boxes = [];
  svg.querySelectorAll("text").forEach((t) => {
    const style = getComputedStyle(t);
    let hidden = style.visibility === "hidden" || style.display === "none";
    for (let n = t; n && n !== svg && !hidden; n = n.parentElement) {
      const o = n.getAttribute && n.getAttribute("opacity");
      if (o !== null && o !== undefined && parseFloat(o) === 0) hidden = true;
      if (n.getAttribute && n.getAttribute("fill-opacity") === "0") hidden = true;
    }
    const text = (t.textContent || "").trim();
    if (hidden || !text) return;
    const r = t.getBoundingClientRect();
    if (r.width < 1 || r.height < 1) return;
    boxes.push({text, x0: r.left, y0: r.top, x1: r.right, y1: r.bottom});
  });
  for (let i = 0; i < boxes.length; i++) {
    for (let j = i + 1; j < boxes.length; j++) {
      const a = boxes[i], b = boxes[j];
      const w = Math.min(a.x1, b.x1) - Math.max(a.x0, b.x0);
      const h = Math.min(a.y1, b.y1) - Math.max(a.y0, b.y0);
      if (w > 1 && h > 1) out.push([chart, a.text, b.text, Math.round(w), Math.round(h)]);
    }
  }
});
return out;
"""
