"""Throughput and scaling of the toolkit against a plain-Python baseline and ``grep``, in one command.

    python benchmarks/run.py --sizes 0.5,1,2,4     # the real measurement (GB of log text)
    python benchmarks/run.py --quick               # tiny bundles: a smoke run in a few minutes

For every size, on the same files (``benchmarks/data/``, generated once by ``datasets.py``):

* ``grep``      ``LC_ALL=C grep -c -F`` with the core event keywords: one physical pass over the bytes;
* ``baseline``  ``benchmarks/baseline.py``: one process, one regex alternation, pandas;
* ``cli cold``  ``stream-incident parse BUNDLE --out DIR`` in a fresh process, then the same command
                again (the parse cache's effect: first / second);
* ``pipeline``  every pipeline stage that exists (``benchmarks/pipeline.py``) in a fresh worker process:
                *cold* = imports + session start + first run, *warm* = second run in the same session;
* ``local[1]``  the same warm run with one core, at one size, for the parallel speedup.

Peak memory: the Python driver from ``ru_maxrss`` inside the worker, the JVM from psutil, sampling the
worker's java child in a background thread (psutil is optional; without it JVM peaks show ``n/a``).

Figures go to stdout and to ``benchmarks/results/latest.{json,md}``; RESULTS.md is written from them.
Benchmarks print figures; they are never pass/fail tests.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/ is not a package)
from baseline import log_files  # noqa: E402

try:
    import psutil
except ImportError:  # psutil is not a declared dependency of the toolkit
    psutil = None

PYTHON = sys.executable
CLI = str(Path(sys.executable).with_name("stream-incident"))
SCRATCH = HERE / "data" / "scratch"
RESULTS_DIR = HERE / "results"
QUICK_SIZES = "0.1,0.2"  # the smallest bundles the generator writes (~85 MB of story) and twice that
# What grep looks for: literal keywords of the same core events the baseline's regex finds.
GREP_KEYWORDS = ("State transition from", "Successfully joined group", "revoked", "Revoking active tasks",
                 "assigned partitions", "Handle new assignment", "Failed to lock the state directory",
                 "lock exception", "Deleting obsolete state directory", "checkpoint", "restoration",
                 "Finished restoring", "Restored and ready to run", "corrupt")

# Targets of the "Performance and scale" issue on the 2-core reference machine.
TARGETS = {
    "warm_vs_baseline_2gb": 1.5,
    "local2_vs_local1": 1.7,
    "linearity_max": 1.2,
    "driver_memory_flat_max": 1.2,
    "report_cold_max_s": 60.0,
    "cache_speedup": 3.0,
}


# --------------------------------------------------------------------------- running and watching processes


@dataclass
class Watched:
    """A finished child process: wall time, output, and sampled peak memory (MB)."""

    seconds: float
    returncode: int
    stdout: str
    stderr: str
    python_peak_mb: float | None = None
    jvm_peak_mb: float | None = None
    cpu_s: float | None = None  # user+system CPU of the process tree: robust to a shared machine


class MemorySampler(threading.Thread):
    """Samples RSS of a process (the Python driver) and of its java descendants (the JVM), and the
    CPU time of the whole tree (last value seen per process; on a loaded machine CPU seconds compare
    better than wall seconds)."""

    def __init__(self, pid: int, interval: float = 0.25):
        super().__init__(daemon=True)
        self.pid, self.interval = pid, interval
        self.python_peak = self.jvm_peak = 0
        self.cpu_by_pid: dict[int, float] = {}
        self.done = threading.Event()

    def run(self) -> None:
        try:
            root = psutil.Process(self.pid)
        except psutil.Error:
            return
        while not self.done.is_set():
            try:
                self.python_peak = max(self.python_peak, root.memory_info().rss)
                tree = [root, *root.children(recursive=True)]
                jvm = sum(c.memory_info().rss for c in tree[1:] if c.name() == "java")
                self.jvm_peak = max(self.jvm_peak, jvm)
                for proc in tree:
                    t = proc.cpu_times()
                    self.cpu_by_pid[proc.pid] = t.user + t.system
            except psutil.Error:
                pass  # a child came or went between listing and reading
            self.done.wait(self.interval)


def watch(cmd: list[str], *, env: dict | None = None, label: str = "") -> Watched:
    print(f"    {label or cmd[0]}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env={**os.environ, **(env or {})})
    sampler = MemorySampler(proc.pid) if psutil else None
    if sampler:
        sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if sampler:
        sampler.done.set()
        sampler.join()
    mb = (lambda b: b / 2**20 if b else None)
    if not sampler:
        return Watched(seconds, proc.returncode, out, err)
    return Watched(seconds, proc.returncode, out, err, mb(sampler.python_peak), mb(sampler.jvm_peak),
                   sum(sampler.cpu_by_pid.values()))


def last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in output")


def check(w: Watched, what: str) -> None:
    if w.returncode != 0:
        tail = "\n".join(w.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{what} failed (exit {w.returncode}):\n{tail}")


# --------------------------------------------------------------------------- the contenders


def run_grep(files: list[Path]) -> float:
    """Wall seconds of one grep -c pass over all files (zcat | grep for gzipped ones).

    Output goes to a pipe, not /dev/null: GNU grep stops at the first match when it sees its output
    is /dev/null, which would time nothing.
    """
    args = [a for k in GREP_KEYWORDS for a in ("-e", k)]
    plain = [str(f) for f in files if f.suffix != ".gz"]
    t0 = time.perf_counter()
    if plain:
        subprocess.run(["grep", "-c", "-i", "-F", *args, *plain], stdout=subprocess.PIPE,
                       env={**os.environ, "LC_ALL": "C"}, check=False)
    for gz in (f for f in files if f.suffix == ".gz"):
        zcat = subprocess.Popen(["zcat", str(gz)], stdout=subprocess.PIPE)
        subprocess.run(["grep", "-c", "-i", "-F", *args], stdin=zcat.stdout, stdout=subprocess.PIPE,
                       env={**os.environ, "LC_ALL": "C"}, check=False)
        zcat.wait()
    return time.perf_counter() - t0


def run_baseline(bundle: Path) -> dict:
    w = watch([PYTHON, str(HERE / "baseline.py"), str(bundle), "--json"], label="baseline")
    check(w, "baseline")
    return {**last_json(w.stdout), "wall_s": w.seconds, "cpu_s": w.cpu_s}


def run_cli_twice(bundle: Path, scratch: Path) -> dict:
    """Cold CLI parse, then the identical command again (what a parse cache speeds up)."""
    out, cache_dir = scratch / "cli", scratch / "cli-cache"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)  # the first run must not find an older cache
    cmd = [CLI, "parse", str(bundle), "--out", str(out), "--quiet"]
    if "--cache-dir" in subprocess.run([CLI, "parse", "--help"], capture_output=True, text=True).stdout:
        cmd += ["--cache-dir", str(cache_dir)]
    env = {"STREAM_INCIDENT_CACHE": str(cache_dir)}
    first = watch(cmd, env=env, label="cli parse (1st)")
    check(first, "stream-incident parse")
    second = watch(cmd, env=env, label="cli parse (2nd)")
    check(second, "stream-incident parse (second run)")
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return {"first_s": first.seconds, "second_s": second.seconds, "first_cpu_s": first.cpu_s,
            "second_cpu_s": second.cpu_s, "jvm_peak_mb": first.jvm_peak_mb, "python_peak_mb": first.python_peak_mb}


def run_pipeline(bundle: Path, scratch: Path, master: str, driver_memory: str | None, repeat: int = 2) -> dict:
    cmd = [PYTHON, str(HERE / "pipeline.py"), str(bundle), "--master", master, "--repeat", str(repeat),
           "--scratch", str(scratch / "pipeline")]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    w = watch(cmd, label=f"pipeline {master}")
    check(w, f"pipeline worker ({master})")
    res = last_json(w.stdout)
    first, last = res["runs"][0], res["runs"][-1]
    res["cold_s"] = res["import_s"] + res["session_s"] + sum(first.values())
    res["first_run_s"] = sum(first.values())
    res["warm_s"] = sum(last.values()) if len(res["runs"]) > 1 else None
    res["warm_stages"] = last
    res["jvm_peak_mb"] = w.jvm_peak_mb
    res["worker_cpu_s"] = w.cpu_s  # both runs plus session start
    res["python_sampled_peak_mb"] = w.python_peak_mb
    return res


def cli_has(command: str) -> bool:
    """True if ``stream-incident --help`` lists ``command`` as a subcommand."""
    help_text = subprocess.run([CLI, "--help"], capture_output=True, text=True).stdout
    return re.search(rf"^\s{{2,6}}{re.escape(command)}(\s|$)", help_text, re.M) is not None


def run_report(sample: str) -> dict:
    if not cli_has("report"):
        return {"skipped": "stream-incident has no 'report' command yet"}
    bundle = REPO / "sample_logs" / sample
    out = SCRATCH / "report"
    shutil.rmtree(out, ignore_errors=True)
    w = watch([CLI, "report", str(bundle), "--out", str(out)], label="report")
    shutil.rmtree(out, ignore_errors=True)
    if w.returncode != 0:
        return {"skipped": f"report failed (exit {w.returncode}): {w.stderr.strip().splitlines()[-1:]}"}
    return {"sample": sample, "cold_s": w.seconds, "jvm_peak_mb": w.jvm_peak_mb}


# --------------------------------------------------------------------------- machine and figures


def machine() -> dict:
    def cmd(*args: str) -> str:
        try:
            r = subprocess.run(args, capture_output=True, text=True)
            return (r.stdout + r.stderr).strip()
        except OSError:
            return "n/a"

    cpu = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                if ln.startswith("model name")), platform.processor())
    mem_kb = next(int(ln.split()[1]) for ln in Path("/proc/meminfo").read_text().splitlines()
                  if ln.startswith("MemTotal"))
    import pyspark

    return {
        "nproc": os.cpu_count(),
        "memory_gb": round(mem_kb / 2**20, 1),
        "cpu": cpu,
        "python": platform.python_version(),
        "java": cmd("java", "-version").splitlines()[0],
        "spark": pyspark.__version__,
        "loadavg": Path("/proc/loadavg").read_text().strip(),
    }


def fmt(x, digits: int = 1, none: str = "n/a") -> str:
    if x is None:
        return none
    return f"{x:,.{digits}f}"


def ratio(a, b):
    return a / b if a and b else None


def figures_markdown(res: dict) -> str:
    rows = res["sizes"]
    head = ("| GB | lines | grep s | baseline s | CLI parse cold s | pipeline cold s | pipeline warm s "
            "| warm MB/s | warm lines/s | baseline / warm | grep / warm | warm s per GB "
            "| driver peak MB | JVM peak MB | cache 1st/2nd |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        warm = r["pipeline"]["warm_s"] or r["pipeline"]["first_run_s"]  # first run where no warm run was made
        base = r["baseline"]["seconds"]
        base_txt = fmt(base) + (" (extrap.)" if r["baseline"].get("extrapolated") else "")
        lines.append(
            f"| {r['gb']:.3f} | {r['lines']:,} | {fmt(r['grep_s'], 2)} | {base_txt} | {fmt(r['cli']['first_s'])} "
            f"| {fmt(r['pipeline']['cold_s'])} | {fmt(warm)}{'' if r['pipeline']['warm_s'] else ' (1st run)'} | {fmt(r['bytes'] / 1e6 / warm)} "
            f"| {fmt(r['lines'] / warm, 0)} | {fmt(ratio(base, warm), 2)} | {fmt(ratio(r['grep_s'], warm), 3)} "
            f"| {fmt(warm / r['gb'])} | {fmt(r['pipeline']['driver_peak_rss_mb'], 0)} "
            f"| {fmt(r['pipeline']['jvm_peak_mb'], 0)} | {fmt(ratio(r['cli']['first_s'], r['cli']['second_s']), 2)} |"
        )
    return "\n".join(lines)


def stages_markdown(res: dict) -> str:
    order = ["parse", "events", "timeline", "detect"]
    names = sorted({n for r in res["sizes"] for n in r["pipeline"]["warm_stages"]},
                   key=lambda n: (order.index(n) if n in order else len(order), n))
    out = ["| GB | " + " | ".join(f"{n} s" for n in names) + " |", "|---|" + "---|" * len(names)]
    for r in res["sizes"]:
        st = r["pipeline"]["warm_stages"]
        out.append(f"| {r['gb']:.3f} | " + " | ".join(fmt(st.get(n), 1) for n in names) + " |")
    skipped = res["sizes"][0]["pipeline"]["skipped"] if res["sizes"] else {}
    for name, why in skipped.items():
        out.append(f"\n_{name}: skipped ({why})_")
    return "\n".join(out)


def evaluate_targets(res: dict) -> list[tuple[str, str, str, str]]:
    """(target, figure, met?, note) rows; figures missing at this run's sizes say so."""
    rows = []
    sizes = res["sizes"]
    by_gb = {round(r["gb"]): r for r in sizes if r["gb"] >= 0.9}
    two = next((r for r in sizes if abs(r["gb"] - 2) < 0.1), None)
    if two:
        x = ratio(two["baseline"]["seconds"], two["pipeline"]["warm_s"])
        ext = " (baseline extrapolated)" if two["baseline"].get("extrapolated") else ""
        rows.append(("warm pipeline at 2 GB >= 1.5x faster than baseline", f"{x:.2f}x{ext}",
                     "met" if x >= TARGETS["warm_vs_baseline_2gb"] else "missed", ""))
    else:
        largest = sizes[-1]
        x = ratio(largest["baseline"]["seconds"], largest["pipeline"]["warm_s"])
        rows.append(("warm pipeline at 2 GB >= 1.5x faster than baseline",
                     f"{x:.2f}x at {largest['gb']:.2f} GB (2 GB not run)", "not measured", ""))
    sp = res.get("speedup")
    if not sp:
        rows.append(("local[2] >= 1.7x faster than local[1]", "-", "not measured", "not reached (run cut short)"))
    else:
        x = sp["local1_warm_s"] / sp["local2_warm_s"]
        rows.append(("local[2] >= 1.7x faster than local[1]", f"{x:.2f}x at {sp['gb']:.2f} GB",
                     "met" if x >= TARGETS["local2_vs_local1"] else "missed", ""))
    small, large = sizes[0], sizes[-1]
    if large is not small:
        # First runs exist at every size (warm runs may be skipped above --warm-max-gb).
        lin = (large["pipeline"]["first_run_s"] / large["gb"]) / (small["pipeline"]["first_run_s"] / small["gb"])
        rows.append((f"time/GB at 4 GB within 1.2x of 0.5 GB (first run in a session)",
                     f"{lin:.2f}x ({large['gb']:.2f} GB vs {small['gb']:.2f} GB)",
                     ("met" if lin <= TARGETS["linearity_max"] else "missed")
                     + ("" if large["gb"] >= 3.5 else " at the sizes run; 4 GB not run"), ""))
        mem = large["pipeline"]["driver_peak_rss_mb"] / small["pipeline"]["driver_peak_rss_mb"]
        rows.append(("Python driver peak memory flat (within 1.2x)",
                     f"{mem:.2f}x ({fmt(large['pipeline']['driver_peak_rss_mb'], 0)} MB vs "
                     f"{fmt(small['pipeline']['driver_peak_rss_mb'], 0)} MB)",
                     ("met" if mem <= TARGETS["driver_memory_flat_max"] else "missed")
                     + ("" if large["gb"] >= 3.5 else " at the sizes run; 4 GB not run"), ""))
    rep = res.get("report", {"skipped": "not reached (run cut short)"})
    if "cold_s" in rep:
        rows.append(("report on a shipped sample < 60 s cold", f"{rep['cold_s']:.1f} s ({rep['sample']})",
                     "met" if rep["cold_s"] < TARGETS["report_cold_max_s"] else "missed", ""))
    else:
        rows.append(("report on a shipped sample < 60 s cold", "-", "not measured", rep.get("skipped", "")))
    cache = [ratio(r["cli"]["first_s"], r["cli"]["second_s"]) for r in sizes if r["cli"].get("first_s")]
    label = "" if res.get("cache_present") else "no parse cache in the toolkit yet: ratio is run-to-run noise"
    rows.append(("parse cache: 2nd run >= 3x faster", ", ".join(f"{c:.2f}x" for c in cache if c),
                 ("met" if min(c for c in cache if c) >= TARGETS["cache_speedup"] else "missed"), label))
    return rows


def render_markdown(res: dict) -> str:
    m = res["machine"]
    parts = [
        f"Command: `{res['command']}`  ",
        f"Started {res['started']} (took {res['elapsed_min']:.0f} min). "
        f"Load average at start: `{m['loadavg']}`, at end: `{res['loadavg_end']}`.  ",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gb']} GB RAM; Python {m['python']}; "
        f"{m['java']}; Spark {m['spark']}.",
        "",
        "### Figures (warm = second run in the same session, local[2])",
        "",
        figures_markdown(res),
        "",
        "### Warm pipeline time by stage",
        "",
        stages_markdown(res),
        "",
    ]
    parts += ["### CPU seconds (user+system of each process tree; steadier than wall time on a shared machine)",
              "", "| GB | baseline | CLI parse 1st | CLI parse 2nd | pipeline worker (session + 2 runs) |",
              "|---|---|---|---|---|"]
    for r in res["sizes"]:
        parts.append(f"| {r['gb']:.3f} | {fmt(r['baseline'].get('cpu_s'))} | {fmt(r['cli'].get('first_cpu_s'))} "
                     f"| {fmt(r['cli'].get('second_cpu_s'))} | {fmt(r['pipeline'].get('worker_cpu_s'))} |")
    parts.append("")
    sp = res.get("speedup")
    if sp:
        parts += [f"local[1] {sp['local1_warm_s']:.1f} s vs local[2] {sp['local2_warm_s']:.1f} s "
                  f"at {sp['gb']:.2f} GB ({sp.get('compared', 'warm runs')}): "
                  f"speedup {sp['local1_warm_s'] / sp['local2_warm_s']:.2f}x.", ""]
    rep = res.get("report", {"skipped": "not reached (run cut short)"})
    report_text = rep.get("skipped") or f"{rep['cold_s']:.1f} s cold on {rep['sample']}"
    parts += [f"`stream-incident report`: {report_text}", ""]
    parts += ["### Targets", "", "| target | figure | status | note |", "|---|---|---|---|"]
    parts += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in evaluate_targets(res)]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- main


def save_partial(res: dict) -> None:
    """Keep what is measured so far: a long run cut short still leaves its figures."""
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "partial.json").write_text(json.dumps(res, indent=2, default=str))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the toolkit against a plain-Python baseline and grep.")
    parser.add_argument("--sizes", default="0.5,1,2,4", help="GB of uncompressed log text, comma-separated")
    parser.add_argument("--quick", action="store_true", help=f"smoke run on tiny bundles ({QUICK_SIZES} GB)")
    parser.add_argument("--speedup-size", type=float, default=None,
                        help="size (GB) for the local[1] vs local[2] run (default: the smallest size)")
    parser.add_argument("--baseline-max-gb", type=float, default=None,
                        help="above this size the baseline is extrapolated from its measured per-line rate "
                             "instead of run (it is strictly linear; saves tens of minutes)")
    parser.add_argument("--report-sample", default="kafka-eos-stale-checkpoint",
                        help="shipped sample bundle for the cold 'report' timing")
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory for the pipeline workers")
    parser.add_argument("--render", type=Path, metavar="JSON",
                        help="only print the markdown of saved results (e.g. results/partial.json of a cut run)")
    parser.add_argument("--cli-max-gb", type=float, default=None,
                        help="run the cold CLI parse twice (parse cache ratio) only up to this size")
    parser.add_argument("--warm-max-gb", type=float, default=None,
                        help="above this size run the pipeline once per session (no warm run); "
                             "linearity is judged on first runs at every size")
    parser.add_argument("--speedup-runs", type=int, default=2,
                        help="runs of the local[1] worker; 1 compares first runs of both (cheaper, less exact)")
    args = parser.parse_args(argv)
    if args.render:
        saved = json.loads(args.render.read_text())
        saved.setdefault("elapsed_min", float("nan"))
        saved.setdefault("loadavg_end", "(run cut short)")
        print(render_markdown(saved))
        return 0
    sizes = [float(s) for s in (QUICK_SIZES if args.quick else args.sizes).split(",")]

    started = time.time()
    res: dict = {"command": "python benchmarks/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                 "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(), "sizes": []}
    if psutil is None:
        print("psutil not installed: JVM peak memory will show n/a (pip install psutil)", file=sys.stderr)

    from toolkit.ingest import parse_bundle
    import inspect

    from pipeline import CACHE_SWITCHES
    res["cache_present"] = any(n in inspect.signature(parse_bundle).parameters for n in CACHE_SWITCHES)

    SCRATCH.mkdir(parents=True, exist_ok=True)
    baseline_rate = None  # seconds per line of the largest baseline actually run
    for gb in sizes:
        ds = datasets.ensure(gb, say=lambda m: print(m, file=sys.stderr, flush=True))
        files = log_files(ds.path)
        print(f"== {ds.gb:.3f} GB, {ds.lines:,} lines, {len(files)} files: {ds.path}", file=sys.stderr, flush=True)
        row = {"gb": ds.gb, "bytes": ds.bytes, "lines": ds.lines, "bundle": str(ds.path)}
        row["grep_s"] = run_grep(files)
        if args.baseline_max_gb is None or gb <= args.baseline_max_gb or baseline_rate is None:
            row["baseline"] = run_baseline(ds.path)
            baseline_rate = row["baseline"]["seconds"] / ds.lines
        else:
            row["baseline"] = {"seconds": baseline_rate * ds.lines, "extrapolated": True}
        if args.cli_max_gb is None or gb <= args.cli_max_gb:
            row["cli"] = run_cli_twice(ds.path, SCRATCH)
        else:
            row["cli"] = {"first_s": None, "second_s": None, "skipped": f"above --cli-max-gb {args.cli_max_gb}"}
        repeat = 1 if args.warm_max_gb is not None and gb > args.warm_max_gb else 2
        row["pipeline"] = run_pipeline(ds.path, SCRATCH, "local[2]", args.driver_memory, repeat=repeat)
        res["sizes"].append(row)
        save_partial(res)
        print(f"   grep {row['grep_s']:.2f}s  baseline {row['baseline']['seconds']:.1f}s  "
              f"cli {fmt(row['cli']['first_s'])}s/{fmt(row['cli']['second_s'])}s  "
              f"pipeline cold {row['pipeline']['cold_s']:.1f}s first run {row['pipeline']['first_run_s']:.1f}s "
              f"warm {fmt(row['pipeline']['warm_s'])}s", file=sys.stderr, flush=True)

    speedup_gb = args.speedup_size if args.speedup_size is not None else sizes[0]
    row = min(res["sizes"], key=lambda r: abs(r["gb"] - speedup_gb))
    one = run_pipeline(Path(row["bundle"]), SCRATCH, "local[1]", args.driver_memory, repeat=args.speedup_runs)
    key = "warm_s" if args.speedup_runs > 1 else "first_run_s"  # compare like with like
    res["speedup"] = {"gb": row["gb"], "local1_warm_s": one[key], "local2_warm_s": row["pipeline"][key],
                      "compared": "warm (2nd) runs" if key == "warm_s" else "first runs in a fresh session",
                      "local1_stages": one["warm_stages"]}
    res["report"] = run_report(args.report_sample)
    res["elapsed_min"] = (time.time() - started) / 60
    res["loadavg_end"] = Path("/proc/loadavg").read_text().strip()
    shutil.rmtree(SCRATCH, ignore_errors=True)

    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / "latest.json").write_text(json.dumps(res, indent=2, default=str))
    text = render_markdown(res)
    (RESULTS_DIR / "latest.md").write_text(text)
    (RESULTS_DIR / "partial.json").unlink(missing_ok=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
