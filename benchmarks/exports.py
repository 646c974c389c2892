"""Log-platform exports at size: what reading an export costs next to reading the same logs as files.

An eventful bundle (``eventful.py``: pods of Kafka Streams lines, a storm and routine catalogued lines) is
written once more as the export a user pulls from the log platform when the pods are gone: Loki's
``logcli query --output=jsonl`` (every pod's entries in one file in time order, newest first as logcli prints
by default, or oldest first with ``--forward``), or Elasticsearch NDJSON hits from Filebeat (one ``_source``
per line). For each size, on the same files in one run:

* ``grep -c -F`` with the plain script's phrases over the export (the floor);
* the toolkit's rewrite of the export alone (``open_bundle``: recognise, order per pod, write runtime JSON
  logs): wall seconds, MB/s and the driver's peak memory, which must not grow with the export; then the same
  again, when the rewritten logs kept by the first run are linked (a re-run on the same bundle);
* with ``--detect``: cold ``stream-incident detect`` on the export and on its log-file twin (fresh process,
  empty parse cache), their findings compared.

    python benchmarks/exports.py --sizes 0.5,1.75 --order newest-first
    python benchmarks/exports.py --sizes 0.3 --hosts 4 --threads 2 --detect
"""

from __future__ import annotations

import argparse
import heapq
import json
import re
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import eventful  # noqa: E402  (benchmarks/ is not a package)
from run import PYTHON, check, fmt, machine, run_detect_cold, run_grep, save, watch  # noqa: E402

EXPORTS_DIR = HERE / "data" / "exports"
# Kafka's log4j pattern, the layout of the pods' files: the line's own time orders and stamps the entry.
_STAMP = re.compile(rb"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3})\]")

CONVERT = """
import json, resource, sys, time
from pathlib import Path
from toolkit.bundle import open_bundle
t0 = time.perf_counter()
bundle = open_bundle(Path(sys.argv[1]), Path(sys.argv[2]), export_cache=sys.argv[3] if len(sys.argv) > 3 else None)
print(json.dumps({"seconds": time.perf_counter() - t0, "files": len(bundle.logs),
                  "entries": sum(v["entries"] for v in bundle.exported.values()),
                  "problems": [p.problem for p in bundle.problems],
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def _pod_lines(path: Path, pod: str) -> Iterator[tuple[str, str, bytes]]:
    """(instant, pod, line) of one pod's file; a line without a stamp (a stack frame) takes the one before."""
    last = "1970-01-01T00:00:00.000"
    with path.open("rb") as lines:
        for line in lines:
            m = _STAMP.match(line)
            if m:
                last = f"{m.group(1).decode().replace(' ', 'T')}.{m.group(2).decode()}"
            yield last, pod, line.rstrip(b"\r\n")


def _entry(export: str, instant: str, pod: str, line: bytes) -> str:
    text = line.decode("utf-8", "replace")
    if export == "loki":
        return json.dumps({"labels": {"app": "orders-agg", "container": "streams", "namespace": "streams",
                                      "pod": pod}, "line": text, "timestamp": f"{instant}000000Z"})
    return json.dumps({"_index": ".ds-logs-generic-default-2026.03.07-000001", "_id": "x", "_score": None,
                       "_source": {"@timestamp": f"{instant}Z", "message": text,
                                   "kubernetes": {"pod": {"name": pod}, "namespace": "streams"},
                                   "host": {"name": "node-a"}, "agent": {"type": "filebeat"}}})


def ensure_export(twin: Path, export: str, order: str) -> Path:
    """The export of ``twin``'s pods (written once): one file, entries of every pod in time order."""
    root = EXPORTS_DIR / f"{twin.name}-{export}-{order}"
    marker = root.with_suffix(".done")
    if root.is_dir() and marker.exists():
        return root
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    t0 = time.perf_counter()
    pods = sorted(p for p in twin.rglob("*.log"))
    # a pod's file is the bundle's <pod>/app.log (or <pod>.log)
    merged = heapq.merge(*(_pod_lines(p, p.stem if p.parent == twin else p.parent.name) for p in pods),
                         key=lambda e: e[0])
    name = "query.jsonl" if export == "loki" else "hits.ndjson"
    forward = root / ("forward.tmp" if order == "newest-first" else name)
    with forward.open("w", encoding="utf-8") as out:
        for instant, pod, line in merged:
            out.write(_entry(export, instant, pod, line) + "\n")
    if order == "newest-first":
        with (root / name).open("wb") as out:
            subprocess.run(["tac", str(forward)], stdout=out, check=True)
        forward.unlink()
    (root / "bundle.toml").write_text('app_id = "orders-agg"\n[defaults]\ntimezone = "UTC"\n', encoding="utf-8")
    marker.write_text(json.dumps({"seconds": round(time.perf_counter() - t0, 1)}))
    print(f"  wrote {root.name} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return root


def measure(size: float, args: argparse.Namespace) -> dict:
    shape = eventful.Shape(gb=size, hosts=args.hosts, threads=args.threads, state_share=args.state_share,
                           catalogued_share=args.catalogued_share)
    twin, facts = eventful.ensure(shape, say=lambda m: print(m, file=sys.stderr))
    export = ensure_export(twin, args.export, args.order)
    files = sorted(f for f in export.iterdir() if f.suffix in (".jsonl", ".ndjson"))
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    scratch = HERE / "data" / "scratch" / "exports"
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    row = {"size_gb": size, "twin": twin.name, "export": export.name, "export_mb": round(size_mb, 1),
           "lines": facts["lines"], "grep": run_grep(files)}
    kept = scratch / "export-cache"
    for figure in ("rewrite", "rerun"):  # the first fills the kept copy, the second links it
        w = watch([PYTHON, "-c", CONVERT, str(export), str(scratch / "work"), str(kept)], label=figure)
        check(w, f"open_bundle on the export ({figure})")
        res = json.loads(w.stdout.strip().splitlines()[-1])
        row[figure] = {"wall_s": w.seconds, "open_bundle_s": res["seconds"], "mb_per_s": size_mb / res["seconds"],
                       "peak_mb": res["peak_mb"], "sampled_peak_mb": w.python_peak_mb, "files": res["files"],
                       "entries": res["entries"], "problems": res["problems"]}
    if args.detect:
        row["detect_export"] = run_detect_cold(export, scratch, twice=False)
        row["detect_twin"] = run_detect_cold(twin, scratch, twice=False)
    shutil.rmtree(scratch, ignore_errors=True)
    return row


def render(res: dict) -> str:
    lines = [f"# Log-platform exports at size ({res['when']})", "",
             f"{res['export']} export, {res['order']}, {res['hosts']} pods x {res['threads']} threads; "
             f"machine: {res['machine'].get('nproc')} CPUs, load {res['machine'].get('loadavg')}", "",
             "| size | export MB | entries | grep s | rewrite s | MB/s | rewrite / grep | driver peak MB | re-run s | "
             "detect export s | detect logs s |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in res["rows"]:
        rw = r["rewrite"]
        lines.append(f"| {r['size_gb']:g} GB | {r['export_mb']:,.0f} | {rw['entries']:,} | {fmt(r['grep']['wall_s'])} | "
                     f"{fmt(rw['open_bundle_s'])} | {fmt(rw['mb_per_s'])} | {fmt(rw['open_bundle_s'] / r['grep']['wall_s'])}× | "
                     f"{fmt(rw['peak_mb'], 0)} | {fmt(r['rerun']['open_bundle_s'])} | "
                     f"{fmt(r.get('detect_export', {}).get('wall_s'))} | "
                     f"{fmt(r.get('detect_twin', {}).get('wall_s'))} |")
    for r in res["rows"]:
        if "detect_export" in r:
            same = r["detect_export"]["detectors"] == r["detect_twin"]["detectors"]
            lines.append(f"\n{r['size_gb']:g} GB: findings of the export {'match' if same else 'DIFFER FROM'} the logs'.")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="0.5,1.75", help="GB of log text, comma-separated")
    parser.add_argument("--hosts", type=int, default=8)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--state-share", type=float, default=0.02)
    parser.add_argument("--catalogued-share", type=float, default=0.25)
    parser.add_argument("--export", choices=("loki", "elasticsearch"), default="loki")
    parser.add_argument("--order", choices=("newest-first", "oldest-first"), default="newest-first")
    parser.add_argument("--detect", action="store_true", help="also cold detect on the export and on its logs")
    parser.add_argument("--name", default="exports")
    args = parser.parse_args(argv)
    res = {"when": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"), "machine": machine(),
           "export": args.export, "order": args.order, "hosts": args.hosts, "threads": args.threads, "rows": []}
    for size in (float(s) for s in args.sizes.split(",") if s):
        print(f"== {size:g} GB", file=sys.stderr)
        res["rows"].append(measure(size, args))
        save(res, f"{args.name}.json")
    (HERE / "results" / f"{args.name}.md").write_text(render(res), encoding="utf-8")
    print(render(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
