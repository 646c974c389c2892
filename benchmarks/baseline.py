"""The script an engineer writes instead of the toolkit: literal prefilter, one regex, pandas.

Reads each log file once (gzip too), keeps the lines that contain one of a dozen literal phrases of
the core Kafka Streams / NiFi state events, parses only those lines with one regex (timestamp and,
for state transitions, the two states), and returns a pandas frame sorted by time.

Three prefilters, each as an engineer would write it; the benchmark runs all three and compares the
toolkit with the fastest:

* ``python`` (default): ``for line in file`` and one compiled alternation of *literals* over the raw
  bytes of each line. Only literals: a pattern such as ``partitions \\[[^\\]]*\\] revoked`` or an
  anchor such as ``restoring$`` would make the regex engine try the whole alternation at every byte.
* ``chunks``: each literal searched with ``bytes.find`` over 64 MB blocks (a fast substring search
  per literal instead of a regex per line); the hits' lines are cut out and numbered.
* ``grep``: ``grep -F -n -f PHRASES`` per file does the filtering in C; Python parses its output.

It does less than the toolkit: no layout detection, no multi-line folding, no per-line accounting,
no time zones or clock offsets, no typed fields beyond the two states, no parquet output.

    python benchmarks/baseline.py BUNDLE [--prefilter python|chunks|grep] [--show 20] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd

# Literal phrase -> event. Every phrase is a plain string the core event's log line contains.
PHRASES: dict[str, str] = {
    "State transition from": "STATE",
    "Successfully joined group with generation": "JOINED",
    "Revoke previously assigned partitions": "REVOKED",
    "revoked at the beginning of consumer rebalance": "REVOKED",
    "Revoking active tasks": "REVOKED",
    "Adding newly assigned partitions": "ASSIGNED",
    "Handle new assignment with": "ASSIGNED",
    "assigned at the end of consumer rebalance": "ASSIGNED",
    "Failed to lock the state directory": "LOCK_FAILED",
    "LockException": "LOCK_FAILED",
    "Deleting obsolete state directory": "DIR_CLEANED",
    "initialized from checkpoint with offset": "CHECKPOINT_READ",
    "Checkpointable offsets read from checkpoint": "CHECKPOINT_READ",
    "Loaded offsets from the checkpoint file": "CHECKPOINT_READ",
    "did not find checkpoint offset": "CHECKPOINT_MISSING",
    "No checkpoint found": "CHECKPOINT_MISSING",
    "was added to the state updater": "RESTORE_START",
    "Restoration in progress": "RESTORE_START",
    "completed restoration": "RESTORE_END",
    "Finished restoring": "RESTORE_END",
    "Restored and ready to run": "RESTORE_END",
    "TaskCorruptedException": "CORRUPTED",
    "task corruption error": "CORRUPTED",
}
KEEP = re.compile(b"|".join(re.escape(p.encode()) for p in PHRASES))
EVENT_OF = {p.encode(): e for p, e in PHRASES.items()}
# One regex on kept lines: the first date-time anywhere in the line (log layouts, JSON fields and
# wrapper stamps alike) and the states of a transition.
PARSE = re.compile(rb"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})(?:[.,](\d{1,9}))?")
STATES = re.compile(rb"State transition from (\w+) to (\w+)")
LOG_SUFFIXES = (".log", ".gz", ".txt", ".out")
COLUMNS = ["ts", "host", "source", "line_no", "event", "from_state", "to_state", "line"]


def log_files(bundle: Path) -> list[Path]:
    if bundle.is_file():
        return [bundle]
    return sorted(p for p in bundle.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES)
                  and not p.name.endswith(".tar.gz"))


def _row(line: bytes, line_no: int, host: str, source: str, event: str) -> tuple:
    ts = PARSE.search(line)
    stamp = None
    if ts is not None:
        stamp = f"{ts.group(1).decode()} {ts.group(2).decode()}.{(ts.group(3) or b'0').decode()}"
    states = STATES.search(line) if event == "STATE" else None
    return (stamp, host, source, line_no, event,
            states.group(1).decode() if states else None, states.group(2).decode() if states else None,
            line.rstrip(b"\r\n").decode("utf-8", "replace"))


def _scan_python(path: Path, host: str, source: str) -> tuple[list[tuple], int]:
    rows = []
    line_no = 0
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        for line_no, line in enumerate(fh, 1):
            hit = KEEP.search(line)
            if hit is not None:
                rows.append(_row(line, line_no, host, source, EVENT_OF[hit.group(0)]))
    return rows, line_no


def _scan_chunks(path: Path, host: str, source: str, block: int = 64 << 20) -> tuple[list[tuple], int]:
    rows = []
    lines_before = 0  # newlines in earlier blocks
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as fh:
        carry = b""
        while True:
            chunk = fh.read(block)
            data = carry + chunk
            if not data:
                break
            # Work on whole lines only; the tail after the last newline waits for the next block.
            end = len(data) if not chunk else data.rfind(b"\n") + 1
            if end == 0:
                carry = data
                continue
            body, carry = data[:end], data[end:]
            hits: dict[int, bytes] = {}
            for literal in EVENT_OF:
                at = body.find(literal)
                while at >= 0:
                    start = body.rfind(b"\n", 0, at) + 1
                    hits.setdefault(start, literal)
                    at = body.find(literal, at + len(literal))
            counted_to, line_no = 0, lines_before
            for start in sorted(hits):
                line_no += body.count(b"\n", counted_to, start)
                counted_to = start
                stop = body.find(b"\n", start)
                line = body[start:stop if stop >= 0 else len(body)]
                rows.append(_row(line, line_no + 1, host, source, EVENT_OF[hits[start]]))
            lines_before += body.count(b"\n") + (0 if body.endswith(b"\n") else 1)
            if not chunk:
                break
    return rows, lines_before


def _scan_grep(path: Path, host: str, source: str, phrases_file: str) -> tuple[list[tuple], int]:
    """``grep -F -n`` does the filtering; lines are counted by ``wc -l`` semantics on the same pass."""
    cmd = ["grep", "-a", "-F", "-n", "-f", phrases_file]
    if path.suffix == ".gz":
        cmd[0:1] = ["zgrep"]
    out = subprocess.run([*cmd, str(path)], capture_output=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"}).stdout
    rows = []
    for raw in out.splitlines():
        number, _, line = raw.partition(b":")
        hit = KEEP.search(line)
        if hit is not None:
            rows.append(_row(line, int(number), host, source, EVENT_OF[hit.group(0)]))
    return rows, -1  # grep does not count lines; the benchmark knows the bundle's line count


def scan(bundle: Path, prefilter: str = "python") -> tuple[pd.DataFrame, int]:
    """(events frame sorted by time, lines read; -1 when the grep prefilter did not count them)."""
    rows: list[tuple] = []
    lines_read = 0
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as phrases:
        phrases.write("\n".join(PHRASES) + "\n")
        phrases.flush()
        for path in log_files(bundle):
            source = str(path.relative_to(bundle)) if bundle.is_dir() else path.name
            host = path.relative_to(bundle).parts[0] if bundle.is_dir() else ""
            if prefilter == "grep":
                found, _ = _scan_grep(path, host, source, phrases.name)
                lines_read = -1
            elif prefilter == "chunks":
                found, n = _scan_chunks(path, host, source)
                lines_read += n
            else:
                found, n = _scan_python(path, host, source)
                lines_read += n
            rows.extend(found)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame["ts"] = pd.to_datetime(frame["ts"], errors="coerce", format="%Y-%m-%d %H:%M:%S.%f")
    return frame.sort_values(["ts", "source", "line_no"], kind="stable", ignore_index=True), lines_read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--prefilter", choices=("python", "chunks", "grep"), default="python")
    parser.add_argument("--show", type=int, default=0, help="print the first N events")
    parser.add_argument("--json", action="store_true", help="print one JSON line (for benchmarks/run.py)")
    args = parser.parse_args(argv)
    if args.prefilter == "grep" and not shutil.which("grep"):
        parser.error("grep is not on PATH")
    t0, cpu0 = time.perf_counter(), time.process_time()
    frame, lines = scan(args.bundle, args.prefilter)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if args.json:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"seconds": seconds, "cpu_s": cpu, "lines": lines, "events": len(frame),
                          "prefilter": args.prefilter, "peak_rss_mb": peak_mb}))
        return 0
    print(f"{len(frame):,} events from {lines:,} lines in {seconds:.2f} s ({args.prefilter} prefilter)")
    print(frame["event"].value_counts().to_string())
    if args.show:
        print(frame.head(args.show).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
