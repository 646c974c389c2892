"""The toolkit against ``grep`` and the script an engineer writes instead, on the same bundles, in one run.

    python benchmarks/run.py --sizes 0.5,1,2,4          # the full measurement (GB of log text)
    python benchmarks/run.py --quick                    # smallest generated bundle, two samples
    python benchmarks/run.py --sizes 0.5 --no-samples   # one size, no small-bundle figures

For every size, on the same files (``benchmarks/data/``, generated once by ``datasets.py``):

* ``grep``      ``LC_ALL=C grep -c -F`` with the script's literal phrases: one pass over the bytes;
* ``script``    ``benchmarks/baseline.py`` with each of its three prefilters (``python``, ``chunks``,
                ``grep``); the toolkit is compared with the FASTEST of the three, and each is shown;
* ``cold``      ``stream-incident detect BUNDLE`` as a fresh process with an empty parse cache (Spark
                start included), then the same command again (the parse cache's re-run ratio);
* ``warm``      ``benchmarks/pipeline.py``: analyse + detectors twice in one session, parse cache off;
                warm = the second run (a re-analysis in the same session); then once more to fill a parse
                cache and twice on it: warm cached = the last (a re-analysis as a user repeats it);
* ``local[1]``  the same worker with one core at one size, for the parallel speedup.

Small bundles (every shipped sample, ``sample_logs/*``): ``detect`` and ``report`` cold (fresh
process, no parse cache), ``detect`` warm in one session (second run of the worker; and its last run
on a parse cache it filled), and ``detect``
through a running ``stream-incident serve`` server (after one warm-up run there).

Peak memory: the Python driver from ``ru_maxrss`` inside the worker; the JVM by sampling the java
children with psutil. CPU seconds of each process tree are recorded beside wall seconds: on a shared
machine they are the steadier figure. Results go to ``benchmarks/results/latest.{json,md}``.
Benchmarks print figures and the targets' verdicts; they never fail on a number.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

import datasets  # noqa: E402  (benchmarks/ is not a package)
from baseline import PHRASES, log_files  # noqa: E402

try:
    import psutil
except ImportError:  # psutil is not a declared dependency of the toolkit
    psutil = None

PYTHON = sys.executable
CLI = str(Path(sys.executable).with_name("stream-incident"))
SCRATCH = HERE / "data" / "scratch"
RESULTS_DIR = HERE / "results"
SAMPLES_DIR = REPO / "sample_logs"
QUICK_SIZES = "0.1"
#: Runs of the warm worker on a parse cache it filled itself (a notebook re-run, or `detect` again in a session).
CACHED_WARM_RUNS = 2
PREFILTERS = ("python", "chunks", "grep")

# The "done when" of the speed work, measured on the 2-core reference machine.
TARGETS = {
    "cold_vs_script_2gb_max": 1.5,   # cold detect at 2 GB <= 1.5x the fastest script
    "warm_vs_script_max": 1.0,       # warm re-analysis at least as fast as the fastest script
    "per_gb_flat_max": 1.2,          # time per GB at the largest size within 1.2x of the smallest
    "local2_vs_local1_min": 1.7,     # at 2 GB
    "sample_detect_cold_max_s": 20.0,
    "sample_detect_warm_max_s": 5.0,
    "sample_report_cold_max_s": 45.0,
    "cache_rerun_min": 5.0,          # first / second run on an unchanged bundle
}


# --------------------------------------------------------------------------- running and watching processes


@dataclass
class Watched:
    """A finished child process: wall time, output, sampled peak memory (MB) and CPU seconds."""

    seconds: float
    returncode: int
    stdout: str
    stderr: str
    python_peak_mb: float | None = None
    jvm_peak_mb: float | None = None
    cpu_s: float | None = None  # user+system CPU of the process tree


class Sampler(threading.Thread):
    """Samples RSS of a process and of its java descendants, and the CPU time of the whole tree."""

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
                self.jvm_peak = max(self.jvm_peak, sum(c.memory_info().rss for c in tree[1:] if c.name() == "java"))
                for proc in tree:
                    t = proc.cpu_times()
                    # children_* holds reaped grandchildren (grep under the script, for instance)
                    self.cpu_by_pid[proc.pid] = t.user + t.system + t.children_user + t.children_system
            except psutil.Error:
                pass  # a child came or went between listing and reading
            self.done.wait(self.interval)


def watch(cmd: list[str], *, env: dict | None = None, label: str = "", unset: tuple[str, ...] = ()) -> Watched:
    """Run ``cmd`` to the end with ``env`` added to (and ``unset`` removed from) this environment."""
    print(f"    {label or cmd[0]}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    full = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
                            env=full)
    sampler = Sampler(proc.pid) if psutil else None
    if sampler:
        sampler.start()
    out, err = proc.communicate()
    seconds = time.perf_counter() - t0
    if not sampler:
        return Watched(seconds, proc.returncode, out, err)
    sampler.done.set()
    sampler.join()
    mb = (lambda b: b / 2**20 if b else None)
    return Watched(seconds, proc.returncode, out, err, mb(sampler.python_peak), mb(sampler.jvm_peak),
                   sum(sampler.cpu_by_pid.values()))


def last_json(text: str) -> dict:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            return json.loads(line)
    raise ValueError("no JSON line in output")


def check(w: Watched, what: str) -> None:
    if w.returncode not in (0, 4):  # 4 = detect --fail-on matched, not a failure
        tail = "\n".join(w.stderr.strip().splitlines()[-15:])
        raise SystemExit(f"{what} failed (exit {w.returncode}):\n{tail}")


def no_server_env(cache_dir: Path | None = None) -> dict:
    """Environment for a command that must start its own Spark (a running serve server is not used).

    ``cache_dir``: its parse cache (emptied first), so that the user's default cache never answers a
    command that is timed as a first run.
    """
    env = {"SPARK_MASTER": "local[*]"}
    if cache_dir is not None:
        shutil.rmtree(cache_dir, ignore_errors=True)
        env["STREAM_INCIDENT_CACHE"] = str(cache_dir)
    return env


def above(gb: float, limit: float | None) -> bool:
    """A generated bundle's size against a ``--*-max-gb`` limit: sizes are only near their nominal
    value (2.002 GB for "2"), so a limit of 2 includes it."""
    return limit is not None and gb > limit * 1.05


NO_REMOTE = ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")


# --------------------------------------------------------------------------- the contenders


def run_grep(files: list[Path]) -> dict:
    """One ``grep -c -F`` pass over all files (zcat | grep for gzipped ones).

    Output goes to a pipe, not /dev/null: GNU grep stops at the first match when its output is
    /dev/null, which would time nothing.
    """
    args = [a for k in PHRASES for a in ("-e", k)]
    plain = [str(f) for f in files if f.suffix != ".gz"]
    env = {**os.environ, "LC_ALL": "C"}
    t0, c0 = time.perf_counter(), os.times()
    if plain:
        subprocess.run(["grep", "-c", "-F", *args, *plain], stdout=subprocess.PIPE, env=env, check=False)
    for gz in (f for f in files if f.suffix == ".gz"):
        zcat = subprocess.Popen(["zcat", str(gz)], stdout=subprocess.PIPE)
        subprocess.run(["grep", "-c", "-F", *args], stdin=zcat.stdout, stdout=subprocess.PIPE, env=env, check=False)
        zcat.wait()
    c1 = os.times()
    return {"wall_s": time.perf_counter() - t0,
            "cpu_s": (c1.children_user - c0.children_user) + (c1.children_system - c0.children_system)}


def run_script(bundle: Path, prefilters: tuple[str, ...]) -> dict:
    """baseline.py with each prefilter; ``fastest`` names the one with the least wall time."""
    out = {}
    for prefilter in prefilters:
        w = watch([PYTHON, str(HERE / "baseline.py"), str(bundle), "--json", "--prefilter", prefilter],
                  label=f"script ({prefilter})")
        check(w, f"baseline.py --prefilter {prefilter}")
        res = last_json(w.stdout)
        out[prefilter] = {"wall_s": w.seconds, "cpu_s": w.cpu_s, "events": res["events"],
                          "peak_mb": w.python_peak_mb}
    fastest = min(out, key=lambda p: out[p]["wall_s"])
    return {"by_prefilter": out, "fastest": fastest, "wall_s": out[fastest]["wall_s"],
            "cpu_s": out[fastest]["cpu_s"]}


def run_detect_cold(bundle: Path, scratch: Path, twice: bool) -> dict:
    """``stream-incident detect`` in a fresh process on an empty parse cache; with ``twice`` the
    same command again on the now filled cache (the re-run on an unchanged bundle)."""
    out, cache_dir = scratch / "detect-out", scratch / "detect-cache"
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    cmd = [CLI, "detect", str(bundle), "--out", str(out), "--format", "json", "--quiet", "--cache-dir", str(cache_dir)]
    env = no_server_env()
    first = watch(cmd, env=env, label="detect cold", unset=NO_REMOTE)
    check(first, "stream-incident detect")
    res = {"wall_s": first.seconds, "cpu_s": first.cpu_s, "jvm_peak_mb": first.jvm_peak_mb,
           "python_peak_mb": first.python_peak_mb,
           "detectors": json.loads(first.stdout)["summary"]["detectors"]}
    if twice:
        shutil.rmtree(out, ignore_errors=True)
        second = watch(cmd, env=env, label="detect again (parse cache)", unset=NO_REMOTE)
        check(second, "stream-incident detect (second run)")
        res.update(rerun_wall_s=second.seconds, rerun_cpu_s=second.cpu_s)
    shutil.rmtree(out, ignore_errors=True)
    shutil.rmtree(cache_dir, ignore_errors=True)
    return res


def run_worker(bundles: list[Path], scratch: Path, master: str, repeat: int, driver_memory: str | None,
               cached_runs: int = 0) -> dict:
    """benchmarks/pipeline.py: every bundle analysed and detected ``repeat`` times in one session (parse cache
    off), then with ``cached_runs`` once more to fill a parse cache and ``cached_runs`` times reading it."""
    cmd = [PYTHON, str(HERE / "pipeline.py"), *map(str, bundles), "--master", master, "--repeat", str(repeat),
           "--scratch", str(scratch / "pipeline"), "--cached-runs", str(cached_runs)]
    if driver_memory:
        cmd += ["--driver-memory", driver_memory]
    w = watch(cmd, env=no_server_env(scratch / "worker-cache"), label=f"worker {master}", unset=NO_REMOTE)
    check(w, f"pipeline worker ({master})")
    res = last_json(w.stdout)
    res.update(jvm_peak_mb=w.jvm_peak_mb, worker_cpu_s=w.cpu_s, worker_wall_s=w.seconds)
    return res


def last_cached_s(cached: list[dict]) -> float | None:
    """The worker's last run on the parse cache it filled (its first cached run fills it)."""
    return sum(cached[-1].values()) if len(cached) > 1 else None


def summarize_runs(runs: list[dict]) -> dict:
    first, last = runs[0], runs[-1]
    return {"first_run_s": sum(first.values()), "warm_s": sum(last.values()) if len(runs) > 1 else None,
            "stages": last}


def run_samples(samples: list[str], report_samples: list[str], scratch: Path, driver_memory: str | None,
                serve: bool) -> dict:
    """Small-bundle figures: detect/report cold, detect warm in a session, detect through serve."""
    res: dict = {"detect_cold": {}, "report_cold": {}, "detect_warm": {}, "serve": {}}
    for name in samples:
        cold = run_detect_cold(SAMPLES_DIR / name, scratch, twice=False)
        res["detect_cold"][name] = cold
        expected = json.loads((SAMPLES_DIR / name / "EXPECTED.json").read_text()).get("detectors", [])
        cold["expected"] = expected
        cold["expected_found"] = set(expected) <= set(cold["detectors"])
    for name in report_samples:
        out = scratch / "report"
        shutil.rmtree(out, ignore_errors=True)
        w = watch([CLI, "report", str(SAMPLES_DIR / name), "--out", str(out), "--quiet"],
                  env=no_server_env(scratch / "report-cache"),
                  label="report cold", unset=NO_REMOTE)
        res["report_cold"][name] = ({"wall_s": w.seconds, "cpu_s": w.cpu_s} if w.returncode == 0
                                    else {"failed": w.stderr.strip().splitlines()[-1:]})
        shutil.rmtree(out, ignore_errors=True)
    worker = run_worker([SAMPLES_DIR / n for n in samples], scratch, "local[2]", 2, driver_memory,
                        cached_runs=CACHED_WARM_RUNS)
    for name, runs in worker["by_bundle"].items():
        cached = worker.get("cached_by_bundle", {}).get(name, [])
        res["detect_warm"][name] = {**summarize_runs(runs),
                                    "cached_s": last_cached_s(cached)}
    res["warm_session_s"] = worker["session_s"]
    if serve:
        res["serve"] = run_serve(samples, report_samples, scratch)
    return res


def run_serve(samples: list[str], report_samples: list[str], scratch: Path) -> dict:
    """Start ``stream-incident serve`` (its own cache dir), detect each sample twice through it, stop it."""
    env = {"STREAM_INCIDENT_CACHE": str(scratch / "serve-cache")}
    shutil.rmtree(scratch / "serve-cache", ignore_errors=True)
    unset = ("SPARK_MASTER", *NO_REMOTE)
    env_all = {k: v for k, v in {**os.environ, **env}.items() if k not in unset}
    t0 = time.perf_counter()
    started = subprocess.run([CLI, "serve", "start", "--master", "local[2]"], capture_output=True, text=True,
                             env=env_all, cwd=REPO)
    res: dict = {"start_s": time.perf_counter() - t0, "detect": {}, "report": {}}
    if started.returncode != 0:
        res["failed"] = started.stderr.strip().splitlines()[-3:]
        return res
    try:
        for name in samples:
            cmd = [CLI, "detect", str(SAMPLES_DIR / name), "--format", "json", "--quiet"]
            first = watch([*cmd, "--no-cache"], env=env, unset=unset, label="detect via serve (1st)")
            again = watch([*cmd, "--no-cache"], env=env, unset=unset, label="detect via serve (2nd)")
            # As a user re-runs it: the parse cache on (filled by the first of these two).
            filling = watch(cmd, env=env, unset=unset, label="detect via serve (cache filled)")
            cached = watch(cmd, env=env, unset=unset, label="detect via serve (cached)")
            res["detect"][name] = {"first_s": first.seconds, "wall_s": again.seconds, "cpu_s": again.cpu_s,
                                   "cached_s": cached.seconds,
                                   "ok": first.returncode == again.returncode == filling.returncode
                                   == cached.returncode == 0}
        for name in report_samples:
            out = scratch / "report-serve"
            shutil.rmtree(out, ignore_errors=True)
            w = watch([CLI, "report", str(SAMPLES_DIR / name), "--out", str(out), "--quiet"], env=env,
                      unset=unset, label="report via serve")
            res["report"][name] = {"wall_s": w.seconds, "cpu_s": w.cpu_s, "ok": w.returncode == 0}
            shutil.rmtree(out, ignore_errors=True)
    finally:
        subprocess.run([CLI, "serve", "stop"], capture_output=True, text=True, env=env_all, cwd=REPO)
    return res


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

    from toolkit.spark import default_driver_memory

    return {"nproc": os.cpu_count(), "memory_gb": round(mem_kb / 2**20, 1), "cpu": cpu,
            "python": platform.python_version(), "java": cmd("java", "-version").splitlines()[0],
            "spark": pyspark.__version__, "driver_memory": default_driver_memory(),
            "loadavg": Path("/proc/loadavg").read_text().strip()}


def fmt(x, digits: int = 1, none: str = "n/a") -> str:
    if x is None:
        return none
    return f"{x:,.{digits}f}"


def ratio(a, b):
    return a / b if a and b else None


NO_WARM = {"first_run_s": None, "warm_s": None, "stages": {}, "cached_s": None}


def _filled(row: dict) -> dict:
    """A size row with empty figures for contenders a cut run did not reach."""
    return {"cold": {}, "script": {"by_prefilter": {}, "fastest": None, "wall_s": None, "cpu_s": None},
            "grep": {"wall_s": None, "cpu_s": None}, **row, "warm": {**NO_WARM, **row.get("warm", {})}}


def sizes_markdown(res: dict) -> str:
    head = ("| GB | lines | grep s | script python s | script chunks s | script grep s | toolkit cold s "
            "| toolkit warm s | cold / script | warm / script | warm s per GB | warm, parse cache s "
            "| warm cached / script | re-run (cache) s | 1st / re-run | driver peak MB | JVM peak MB |")
    out = [head, "|" + "---|" * (head.count("|") - 1)]
    rows = [_filled(r) for r in res["sizes"]]
    for r in rows:
        s, cold, warm = r["script"], r["cold"], r["warm"]
        by = s["by_prefilter"]
        cells = [fmt(by[p]["wall_s"]) + (" *" if p == s["fastest"] else "") if p in by else "-" for p in PREFILTERS]
        warm_s = warm["warm_s"] or warm["first_run_s"]
        per_gb = warm_s / r["gb"] if warm_s else None
        out.append(
            f"| {r['gb']:.3f} | {r['lines']:,} | {fmt(r['grep']['wall_s'], 2)} | {' | '.join(cells)} "
            f"| {fmt(cold.get('wall_s'))} | {fmt(warm_s)}{' (1st)' if warm_s and not warm['warm_s'] else ''} "
            f"| {fmt(ratio(cold.get('wall_s'), s['wall_s']), 2)} | {fmt(ratio(warm_s, s['wall_s']), 2)} "
            f"| {fmt(per_gb)} | {fmt(warm.get('cached_s'))} | {fmt(ratio(warm.get('cached_s'), s['wall_s']), 2)} "
            f"| {fmt(cold.get('rerun_wall_s'))} "
            f"| {fmt(ratio(cold.get('wall_s'), cold.get('rerun_wall_s')), 2)} "
            f"| {fmt(warm.get('driver_peak_rss_mb'), 0)} | {fmt(max(filter(None, [warm.get('jvm_peak_mb'), cold.get('jvm_peak_mb')]), default=None), 0)} |")
    out += ["", "`*` = the fastest prefilter, the one the ratios use. Ratios are toolkit / script: below 1 the "
            "toolkit is faster.", "", "CPU seconds (user+system of each process tree):", "",
            "| GB | grep | script python | script chunks | script grep | toolkit cold | toolkit re-run | worker (session + runs) |",
            "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        by = r["script"]["by_prefilter"]
        out.append(f"| {r['gb']:.3f} | {fmt(r['grep']['cpu_s'], 2)} | "
                   + " | ".join(fmt(by.get(p, {}).get("cpu_s")) for p in PREFILTERS)
                   + f" | {fmt(r['cold'].get('cpu_s'))} | {fmt(r['cold'].get('rerun_cpu_s'))} "
                     f"| {fmt(r['warm'].get('worker_cpu_s'))} |")
    out += ["", "Warm run by stage (seconds):", ""]
    order = ["parse", "events", "timeline", "detect"]
    names = sorted({n for r in rows for n in r["warm"]["stages"]},
                   key=lambda n: (order.index(n) if n in order else len(order), n))
    out += ["| GB | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for r in rows:
        out.append(f"| {r['gb']:.3f} | " + " | ".join(fmt(r["warm"]["stages"].get(n)) for n in names) + " |")
    return "\n".join(out)


def samples_markdown(sm: dict) -> str:
    out = ["| sample | detect cold s (CPU s) | detect warm s | detect warm, parse cache s | detect via serve s "
           "| via serve, cached s | report cold s | report via serve s | expected findings |",
           "|---|---|---|---|---|---|---|---|---|"]
    for name, cold in sm["detect_cold"].items():
        warm = sm["detect_warm"].get(name, {})
        srv = sm.get("serve", {}).get("detect", {}).get(name, {})
        rep = sm["report_cold"].get(name, {})
        rsrv = sm.get("serve", {}).get("report", {}).get(name, {})
        out.append(f"| {name} | {fmt(cold['wall_s'])} ({fmt(cold['cpu_s'])}) | {fmt(warm.get('warm_s'))} "
                   f"| {fmt(warm.get('cached_s'))} "
                   f"| {fmt(srv.get('wall_s'))} | {fmt(srv.get('cached_s'))} | {fmt(rep.get('wall_s'), none='-')} | {fmt(rsrv.get('wall_s'), none='-')} "
                   f"| {'yes' if cold['expected_found'] else 'NO'} ({', '.join(cold['expected']) or 'none'}) |")
    if sm.get("serve", {}).get("start_s"):
        out.append(f"\nWarm session start {fmt(sm['warm_session_s'])} s; serve start {fmt(sm['serve']['start_s'])} s.")
    return "\n".join(out)


def evaluate_targets(res: dict) -> list[tuple[str, str, str]]:
    """(target, figure, verdict) rows; a target whose size was not run says so."""
    rows = []
    sizes = [_filled(r) for r in res["sizes"]]
    if sizes:
        two = next((r for r in sizes if abs(r["gb"] - 2) < 0.15), None)
        at = two or sizes[-1]
        where = f"at {at['gb']:.2f} GB" + ("" if two else " (2 GB not run)")
        cold = ratio(at["cold"].get("wall_s"), at["script"]["wall_s"])
        rows.append(("cold detect <= 1.5x the fastest script (2 GB)", f"{fmt(cold, 2)}x {where}",
                     _verdict(cold, cold is not None and cold <= TARGETS["cold_vs_script_2gb_max"], two)))
        warm_s = at["warm"]["warm_s"] or at["warm"]["first_run_s"]
        warm = ratio(warm_s, at["script"]["wall_s"])
        rows.append(("warm re-analysis at least as fast as the script (parse cache off)", f"{fmt(warm, 2)}x {where}",
                     _verdict(warm, warm is not None and warm <= TARGETS["warm_vs_script_max"], two)))
        cached = ratio(at["warm"].get("cached_s"), at["script"]["wall_s"])
        if cached is not None:
            rows.append(("warm re-analysis at least as fast as the script (parse cache on, the default)",
                         f"{fmt(cached, 2)}x {where}",
                         _verdict(cached, cached <= TARGETS["warm_vs_script_max"], two)))
        small, large = sizes[0], sizes[-1]
        if large is not small and small["warm"]["first_run_s"] and large["warm"]["first_run_s"]:
            per = lambda r: r["warm"]["first_run_s"] / r["gb"]  # noqa: E731  (first runs exist at every size)
            flat = per(large) / per(small)
            rows.append(("time per GB flat from 0.5 to 4 GB (within 1.2x; first runs in a session)",
                         f"{flat:.2f}x ({large['gb']:.2f} vs {small['gb']:.2f} GB)",
                         _verdict(flat, flat <= TARGETS["per_gb_flat_max"], large["gb"] >= 3.5)))
        reruns = [ratio(r["cold"].get("wall_s"), r["cold"].get("rerun_wall_s")) for r in sizes]
        reruns = [x for x in reruns if x]
        if reruns:
            rows.append(("re-run on an unchanged bundle >= 5x faster", ", ".join(f"{x:.1f}x" for x in reruns),
                         "met" if min(reruns) >= TARGETS["cache_rerun_min"] else "missed"))
    sp = res.get("speedup")
    if sp:
        x = ratio(sp["local1_s"], sp["local2_s"])
        rows.append(("local[2] >= 1.7x local[1] (2 GB)", f"{fmt(x, 2)}x at {sp['gb']:.2f} GB ({sp['compared']})",
                     _verdict(x, x is not None and x >= TARGETS["local2_vs_local1_min"], abs(sp["gb"] - 2) < 0.15)))
    sm = res.get("samples")
    if sm:
        cold = {n: c["wall_s"] for n, c in sm["detect_cold"].items()}
        warm = {n: w["warm_s"] for n, w in sm["detect_warm"].items() if w.get("warm_s")}
        warm_cached = {n: w["cached_s"] for n, w in sm["detect_warm"].items() if w.get("cached_s")}
        srv = {n: d["wall_s"] for n, d in sm.get("serve", {}).get("detect", {}).items()}
        srv_cached = {n: d["cached_s"] for n, d in sm.get("serve", {}).get("detect", {}).items() if d.get("cached_s")}
        rep = {n: r["wall_s"] for n, r in sm["report_cold"].items() if "wall_s" in r}
        for label, figures, limit in (("detect < 20 s cold on every sample", cold, "sample_detect_cold_max_s"),
                                      ("detect < 5 s warm (same session, parse cache off)", warm,
                                       "sample_detect_warm_max_s"),
                                      ("detect < 5 s warm (same session, parse cache on)", warm_cached,
                                       "sample_detect_warm_max_s"),
                                      ("detect < 5 s warm (through serve, --no-cache)", srv, "sample_detect_warm_max_s"),
                                      ("detect < 5 s warm (through serve, parse cache)", srv_cached,
                                       "sample_detect_warm_max_s"),
                                      ("report < 45 s cold", rep, "sample_report_cold_max_s")):
            if figures:
                worst = max(figures, key=figures.get)
                rows.append((label, f"max {figures[worst]:.1f} s ({worst}); {len(figures)} samples",
                             "met" if figures[worst] < TARGETS[limit] else "missed"))
        found = [c["expected_found"] for c in sm["detect_cold"].values()]
        rows.append(("every sample yields its expected findings", f"{sum(found)}/{len(found)}",
                     "met" if all(found) else "missed"))
    return rows


def _verdict(figure, ok: bool, at_target_size) -> str:
    if figure is None:
        return "not measured"
    return ("met" if ok else "missed") + ("" if at_target_size else " (at a smaller size)")


def class_archive_line(archive: dict | None) -> str:
    """One sentence on whether the timed JVMs started with the class archive."""
    if not archive:
        return "Class archive: not recorded (results from before it existed)."
    if not archive.get("used"):
        return "Class archive: not used" + (f" ({archive['error']})." if archive.get("error") else ".")
    how = (f"built by `stream-incident warm-up` before the run, untimed ({archive.get('warm_up_s', 0):.0f} s)"
           if archive.get("built_now") else "built before this run")
    return f"Class archive: used by every JVM ({how})."


def render_markdown(res: dict) -> str:
    m = res["machine"]
    parts = [f"Command: `{res['command']}`  ",
             f"Started {res['started']} (took {res.get('elapsed_min', float('nan')):.0f} min). Load average at "
             f"start `{m['loadavg']}`, at end `{res.get('loadavg_end', '(cut short)')}`.  ",
             f"Machine: {m['nproc']} CPUs ({m['cpu']}), {m['memory_gb']} GB RAM; Python {m['python']}; "
             f"{m['java']}; Spark {m['spark']}; local driver heap {m.get('driver_memory', 'n/a')}.",
             class_archive_line(res.get("class_archive")), ""]
    if res["sizes"]:
        parts += ["### Large bundles (wall seconds; local[2])", "", sizes_markdown(res), ""]
    sp = res.get("speedup")
    if sp:
        parts += [f"local[1] {sp['local1_s']:.1f} s vs local[2] {sp['local2_s']:.1f} s at {sp['gb']:.2f} GB "
                  f"({sp['compared']}); CPU s {fmt(sp.get('local1_cpu_s'))} vs {fmt(sp.get('local2_cpu_s'))}.", ""]
    if res.get("samples"):
        parts += ["### Shipped samples (wall seconds)", "", samples_markdown(res["samples"]), ""]
    parts += ["### Targets", "", "| target | figure | verdict |", "|---|---|---|"]
    parts += [f"| {a} | {b} | {c} |" for a, b, c in evaluate_targets(res)]
    return "\n".join(parts) + "\n"


# --------------------------------------------------------------------------- main


def prepare_class_archive(off: bool) -> dict:
    """Every timed command starts its JVM with this machine's class archive (built here first, untimed,
    when missing), or, with ``off``, without one. Commands run with throw-away parse caches, so the
    archive's folder is passed to them by name."""
    from toolkit import jvm

    if off:
        os.environ[jvm.ARCHIVE_ENV] = "0"
        return {"used": False}
    os.environ[jvm.ARCHIVE_DIR_ENV] = str(jvm.archive_dir())
    existed = bool(jvm.class_archive_options())
    t0 = time.perf_counter()
    built = subprocess.run([CLI, "warm-up", "--quiet"], capture_output=True, text=True)
    if built.returncode != 0:
        print(f"class archive not built: {built.stderr.strip()[-500:]}", file=sys.stderr, flush=True)
        return {"used": False, "error": built.stderr.strip()[-500:]}
    return {"used": True, "path": built.stdout.strip(), "built_now": not existed,
            "warm_up_s": time.perf_counter() - t0}


def save(res: dict, name: str) -> None:
    RESULTS_DIR.mkdir(exist_ok=True)
    (RESULTS_DIR / name).write_text(json.dumps(res, indent=2, default=str))


def say_saved(res: dict, name: str, message: str) -> None:
    save(res, f"{name}.partial.json")
    print(f"   [{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Benchmark the toolkit against grep and the plain script.")
    parser.add_argument("--sizes", default="0.5,1,2,4", help="GB of log text, comma-separated ('' for none)")
    parser.add_argument("--max-gb", type=float, default=None, help="skip sizes above this")
    parser.add_argument("--quick", action="store_true", help=f"smoke run: {QUICK_SIZES} GB and two samples")
    parser.add_argument("--prefilters", default=",".join(PREFILTERS), help="script prefilters to run")
    parser.add_argument("--warm-max-gb", type=float, default=None,
                        help="above this size the worker runs once (no warm run; its first run is shown)")
    parser.add_argument("--rerun-max-gb", type=float, default=None,
                        help="run the cold detect a second time (parse cache) only up to this size")
    parser.add_argument("--speedup-size", type=float, default=None,
                        help="GB for local[1] vs local[2] (default: 2 if run, else the largest size)")
    parser.add_argument("--speedup-runs", type=int, default=2, help="worker runs for the speedup (1 = first runs)")
    parser.add_argument("--no-speedup", action="store_true")
    parser.add_argument("--samples", default="all", help="shipped samples (comma-separated, 'all' or 'none')")
    parser.add_argument("--report-samples", default="all", help="samples for the report figures ('none' to skip)")
    parser.add_argument("--no-serve", action="store_true", help="skip the figures through 'stream-incident serve'")
    parser.add_argument("--driver-memory", default=None, help="spark.driver.memory of the workers")
    parser.add_argument("--no-class-archive", action="store_true",
                        help="start every JVM without the class archive (default: build it with "
                             "'stream-incident warm-up' if missing, untimed, and start every JVM with it)")
    parser.add_argument("--bundle", type=Path, action="append", default=[],
                        help="measure this bundle too, beside --sizes (e.g. a shipped sample: a smoke run)")
    parser.add_argument("--name", default="latest", help="results file name: results/NAME.{json,md}")
    parser.add_argument("--render", type=Path, metavar="JSON", help="only print the markdown of saved results")
    args = parser.parse_args(argv)
    if args.render:
        print(render_markdown(json.loads(args.render.read_text())))
        return 0
    sizes = [float(s) for s in (QUICK_SIZES if args.quick else args.sizes).split(",") if s.strip()]
    sizes = [s for s in sizes if args.max_gb is None or s <= args.max_gb]
    shipped = sorted(p.name for p in SAMPLES_DIR.iterdir() if (p / "EXPECTED.json").exists())
    pick = lambda spec: shipped if spec == "all" else [] if spec == "none" else spec.split(",")  # noqa: E731
    samples = shipped[:2] if args.quick and args.samples == "all" else pick(args.samples)
    report_samples = [s for s in pick(args.report_samples) if s in samples] if samples else []
    if args.quick and args.report_samples == "all":
        report_samples = samples[:1]
    prefilters = tuple(p for p in args.prefilters.split(",") if p)

    started = time.time()
    res: dict = {"command": "python benchmarks/" + " ".join([Path(sys.argv[0]).name, *sys.argv[1:]]),
                 "started": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "machine": machine(), "sizes": []}
    if psutil is None:
        print("psutil not installed: peak memory and CPU seconds will show n/a", file=sys.stderr)
    res["class_archive"] = prepare_class_archive(off=args.no_class_archive)
    SCRATCH.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(dir=SCRATCH))
    try:
        extra = [datasets.Dataset(b, 0, *datasets.measure(b)) for b in args.bundle]
        for ds in [*extra, *(datasets.ensure(gb, say=lambda m: print(m, file=sys.stderr, flush=True))
                             for gb in sizes)]:
            gb = ds.gb
            files = log_files(ds.path)
            print(f"== {ds.gb:.3f} GB, {ds.lines:,} lines, {len(files)} files: {ds.path}", file=sys.stderr, flush=True)
            row = {"gb": ds.gb, "bytes": ds.bytes, "lines": ds.lines, "bundle": str(ds.path)}
            res["sizes"].append(row)  # saved after every contender: a run cut short keeps what it measured
            row["grep"] = run_grep(files)
            row["script"] = run_script(ds.path, prefilters)
            say_saved(res, args.name, f"grep {row['grep']}; script {row['script']}")
            row["cold"] = run_detect_cold(ds.path, scratch, twice=not above(gb, args.rerun_max_gb))
            say_saved(res, args.name, f"cold {row['cold']}")
            repeat = 1 if above(gb, args.warm_max_gb) else 2
            worker = run_worker([ds.path], scratch, "local[2]", repeat, args.driver_memory,
                                cached_runs=0 if above(gb, args.warm_max_gb) else CACHED_WARM_RUNS)
            cached = next(iter(worker.get("cached_by_bundle", {}).values()), [])
            row["warm"] = {**summarize_runs(worker["runs"]), "session_s": worker["session_s"],
                           "cached_s": last_cached_s(cached),
                           "cached_stages": cached[-1] if len(cached) > 1 else {},
                           "driver_peak_rss_mb": worker["driver_peak_rss_mb"], "jvm_peak_mb": worker["jvm_peak_mb"],
                           "worker_cpu_s": worker["worker_cpu_s"]}
            say_saved(res, args.name, f"warm {row['warm']}")
            print(f"   grep {row['grep']['wall_s']:.2f}s  script {row['script']['wall_s']:.1f}s "
                  f"({row['script']['fastest']})  cold {row['cold']['wall_s']:.1f}s  "
                  f"warm {fmt(row['warm']['warm_s'])}s", file=sys.stderr, flush=True)
        if res["sizes"] and not args.no_speedup:
            target = args.speedup_size if args.speedup_size is not None else (
                2.0 if any(abs(r["gb"] - 2) < 0.15 for r in res["sizes"]) else res["sizes"][-1]["gb"])
            row = min(res["sizes"], key=lambda r: abs(r["gb"] - target))
            one = run_worker([Path(row["bundle"])], scratch, "local[1]", args.speedup_runs, args.driver_memory)
            key = "warm_s" if args.speedup_runs > 1 and row["warm"]["warm_s"] else "first_run_s"
            res["speedup"] = {"gb": row["gb"], "local1_s": summarize_runs(one["runs"])[key],
                              "local2_s": row["warm"][key], "local1_cpu_s": one["worker_cpu_s"],
                              "local2_cpu_s": row["warm"]["worker_cpu_s"],
                              "compared": "warm (2nd) runs" if key == "warm_s" else "first runs in a fresh session"}
            say_saved(res, args.name, f"speedup {res['speedup']}")
        if samples:
            res["samples"] = run_samples(samples, report_samples, scratch, args.driver_memory, not args.no_serve)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    res["elapsed_min"] = (time.time() - started) / 60
    res["loadavg_end"] = Path("/proc/loadavg").read_text().strip()
    save(res, f"{args.name}.json")
    text = render_markdown(res)
    (RESULTS_DIR / f"{args.name}.md").write_text(text)
    (RESULTS_DIR / f"{args.name}.partial.json").unlink(missing_ok=True)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
