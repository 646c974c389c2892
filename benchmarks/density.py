"""The cost of a first analysis as the share of catalogued lines grows: the density curve.

For each bundle shape (``benchmarks/eventful.py``: hosts, stream threads, share of state events, share of
catalogued lines, DEBUG checkpoint lines, layouts, wrapper, size), on the same files in the same run:

* ``grep``    ``LC_ALL=C grep -c -F`` with the plain script's literal phrases;
* ``script``  ``benchmarks/baseline.py`` with its prefilters (``grep``, ``chunks``, ``python``; ``--prefilters``);
              the toolkit is compared with the fastest;
* ``cold``    ``stream-incident detect BUNDLE`` in a fresh process with an empty parse cache, its stage lines
              read into per-step seconds (Spark session, parse, line accounting, classifying, timeline,
              detectors), its JVM and Python peak memory sampled;
* ``cached``  the same command again on the parse cache the first run filled.

    python benchmarks/density.py                                   # the curve: 0.01 % to 25 % catalogued, 2 GB
    python benchmarks/density.py --gb 0.5 --shares 0.0001,0.25      # two points, minutes
    python benchmarks/density.py --gb 2 --shares 0.05 --state-share 0.05 --debug-checkpoints

Figures go to ``benchmarks/results/density-NAME.{json,md}``. Like every benchmark here it prints figures and
ratios and never fails on a number.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import eventful  # noqa: E402  (a sibling script)
from run import CLI, NO_REMOTE, check, machine, no_server_env, run_grep, run_script, watch  # noqa: E402

RESULTS = HERE / "results"
#: Stage lines of ``stream-incident detect`` (``[  12.3s] message``) and the step each one starts.
STAGE_LINE = re.compile(r"^\[\s*([0-9.]+)s\] (.*)$")
STEPS = (("session", "Spark session ready"), ("parse", "parsing "), ("accounting", "checking line accounting"),
         ("classify", "classifying events"), ("timeline", "reconstructing the timeline"),
         ("detectors", "running the detectors"))


def step_seconds(stderr: str, total: float) -> dict[str, float]:
    """Seconds per step from the stage lines: each step lasts until the next one starts (the last until the
    process ends); the session's own line ends the start-up, which counts as ``session``."""
    marks: list[tuple[str, float]] = []
    for line in stderr.splitlines():
        m = STAGE_LINE.match(line.strip())
        if not m:
            continue
        for step, head in STEPS:
            if m.group(2).startswith(head) and step not in dict(marks):
                marks.append((step, float(m.group(1))))
    out: dict[str, float] = {}
    for k, (step, at) in enumerate(marks):
        end = marks[k + 1][1] if k + 1 < len(marks) else total
        out[step] = at if step == "session" else round(end - at, 2)
    return out


def run_detect(bundle: Path, scratch: Path) -> dict:
    """Cold ``detect`` (stage lines kept) and the re-run on its parse cache."""
    out, cache_dir = scratch / "out", scratch / "cache"
    for folder in (out, cache_dir):
        shutil.rmtree(folder, ignore_errors=True)
    cmd = [CLI, "detect", str(bundle), "--out", str(out), "--format", "json", "--cache-dir", str(cache_dir)]
    first = watch(cmd, env=no_server_env(), label="detect cold", unset=NO_REMOTE)
    check(first, "stream-incident detect")
    document = json.loads(first.stdout)
    findings = document.get("findings", [])
    res = {"wall_s": first.seconds, "cpu_s": first.cpu_s, "jvm_peak_mb": first.jvm_peak_mb,
           "python_peak_mb": first.python_peak_mb, "steps": step_seconds(first.stderr, first.seconds),
           "findings": sorted({f.get("detector", "") for f in findings}),
           "failed": sorted({f.get("detector", "") for f in findings if "failed" in (f.get("title") or "")})}
    shutil.rmtree(out, ignore_errors=True)
    second = watch(cmd, env=no_server_env(), label="detect again (parse cache)", unset=NO_REMOTE)
    check(second, "stream-incident detect (second run)")
    res.update(cached_wall_s=second.seconds)
    for folder in (out, cache_dir):
        shutil.rmtree(folder, ignore_errors=True)
    return res


def measure(shape: eventful.Shape, prefilters: tuple[str, ...], say=print) -> dict:
    bundle, facts = eventful.ensure(shape, say=say)
    files = sorted(p for p in bundle.rglob("*") if p.is_file() and not p.name.startswith("."))
    say(f"{shape.name}: grep")
    grep = run_grep(files)
    say(f"{shape.name}: script ({', '.join(prefilters)})")
    script = run_script(bundle, prefilters)
    with tempfile.TemporaryDirectory(prefix="density-") as scratch:
        say(f"{shape.name}: stream-incident detect, cold and cached")
        detect = run_detect(bundle, Path(scratch))
    return {"shape": asdict(shape), "bundle": bundle.name, "facts": facts, "grep": grep, "script": script,
            "detect": detect}


def _fmt(x, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:,.{digits}f}"


def markdown(results: list[dict], started: str, host: dict) -> str:
    rows = ["| catalogued | state events | size MB | lines | grep s | script s (fastest) | cold `detect` s | "
            "× script | s per GB | session | parse | accounting | classify | timeline | detectors | cached s | "
            "JVM peak MB | Python peak MB |",
            "|" + "---|" * 19]
    for r in results:
        s, f, d = r["shape"], r["facts"], r["detect"]
        steps = d["steps"]
        mb = f.get("bytes", 0) / 1e6
        rows.append(
            f"| {s['catalogued_share']:.2%} | {s['state_share']:.2%} | {mb:,.0f} | {f.get('lines', 0):,} | "
            f"{_fmt(r['grep']['wall_s'])} | {_fmt(r['script']['wall_s'])} ({r['script']['fastest']}) | "
            f"{_fmt(d['wall_s'])} | {d['wall_s'] / r['script']['wall_s']:.1f}× | "
            f"{d['wall_s'] / max(mb / 1000, 1e-9):,.0f} | "
            + " | ".join(_fmt(steps.get(k)) for k, _ in STEPS)
            + f" | {_fmt(d['cached_wall_s'])} | {_fmt(d['jvm_peak_mb'], 0)} | {_fmt(d['python_peak_mb'], 0)} |")
    quiet = min(results, key=lambda r: r["shape"]["catalogued_share"])
    lines = [f"# Density curve, {started} (load average at the start: {host.get('loadavg')})", "", *rows, ""]
    q_per_mb = quiet["detect"]["wall_s"] / max(quiet["facts"].get("bytes", 1), 1)
    for r in results:
        per_mb = r["detect"]["wall_s"] / max(r["facts"].get("bytes", 1), 1)
        lines.append(f"- {r['shape']['catalogued_share']:.2%} catalogued: cold `detect` per MB "
                     f"{per_mb / q_per_mb:.2f}× the quietest bundle's; findings {', '.join(r['detect']['findings']) or 'none'}"
                     + (f"; FAILED detectors: {', '.join(r['detect']['failed'])}" if r["detect"]["failed"] else ""))
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    eventful.add_shape_arguments(parser)
    parser.add_argument("--shares", default="0.0001,0.005,0.02,0.05,0.25",
                        help="shares of catalogued lines, one bundle each (default: %(default)s)")
    parser.add_argument("--prefilters", default="grep,chunks,python", help="the plain script's prefilters")
    parser.add_argument("--name", default="latest", help="results/density-NAME.{json,md}")
    args = parser.parse_args(argv)
    base = eventful.shape_from_args(args)
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    host = machine()
    results = []
    for share in (float(x) for x in args.shares.split(",") if x):
        # The state events are part of the catalogued lines: never more of them than the share allows.
        shape = replace(base, catalogued_share=share, state_share=min(base.state_share, share))
        results.append(measure(shape, tuple(p for p in args.prefilters.split(",") if p)))
        text = markdown(results, started, host)
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"density-{args.name}.json").write_text(json.dumps(
            {"started": started, "machine": host, "results": results}, indent=1, default=str), encoding="utf-8")
        (RESULTS / f"density-{args.name}.md").write_text(text, encoding="utf-8")
        print(text, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
