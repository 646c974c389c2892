"""The script an engineer would write instead of the toolkit: one process, one regex, pandas.

Reads every log file of a bundle line by line (gzip too), searches each line once with a single
compiled alternation of the core Kafka Streams / NiFi state events, pulls the leading timestamp of
the lines that match, and returns a pandas frame sorted by time.

It is deliberately plain but not sabotaged: the regex is compiled once, files are read as buffered
text (the natural ``for line in fh``), the timestamp regex runs only on matching lines, and pandas
does the sorting. There is no hand-written prefilter: the engineer writing this would not add one.

It does less than the toolkit: no layout detection, no multi-line folding, no per-line accounting,
no time zones or clock offsets, no typed fields beyond the two states, no parquet output.

    python benchmarks/baseline.py BUNDLE [--show 20]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
import resource
import sys
import time
from pathlib import Path

import pandas as pd

# One alternation, one named group per event kind; ``match.lastgroup`` names the event.
CORE_EVENTS = re.compile(
    r"(?P<STATE>State transition from (?P<from_state>\w+) to (?P<to_state>\w+))"
    r"|(?P<JOINED>Successfully joined group with generation Generation\(generationId=\d+)"
    r"|(?P<REVOKED>revoked partitions|partitions \[[^\]]*\] revoked|Revoke previously assigned partitions"
    r"|Revoking active tasks)"
    r"|(?P<ASSIGNED>Adding newly assigned partitions|partitions \[[^\]]*\] assigned|Handle new assignment with"
    r"|Assigned \d+ total tasks)"
    r"|(?P<LOCK_FAILED>Failed to lock the state directory|Encountered lock exception|LockException)"
    r"|(?P<DIR_CLEANED>Deleting obsolete state directory)"
    r"|(?P<CHECKPOINT_READ>Checkpointable offsets read from checkpoint|Loaded offsets from the checkpoint file"
    r"|initialized from checkpoint with offset)"
    r"|(?P<CHECKPOINT_MISSING>did not find checkpoint offset)"
    r"|(?P<RESTORE_START>was added to the state updater|to restoring$|Restoration in progress)"
    r"|(?P<RESTORE_END>completed restoration|Finished restoring|Restored and ready to run)"
    r"|(?P<CORRUPTED>TaskCorruptedException|got corrupted|task corruption error)"
)
EVENT_NAMES = ("STATE", "JOINED", "REVOKED", "ASSIGNED", "LOCK_FAILED", "DIR_CLEANED", "CHECKPOINT_READ",
               "CHECKPOINT_MISSING", "RESTORE_START", "RESTORE_END", "CORRUPTED")
# Kafka's "[2026-03-07 10:00:00,114]", log4j/logback/NiFi "2026-03-07 10:00:00,114" or ISO "T".
LEADING_TS = re.compile(r"^\[?(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d{1,9})?)")
LOG_SUFFIXES = (".log", ".gz", ".txt", ".out")


def log_files(bundle: Path) -> list[Path]:
    if bundle.is_file():
        return [bundle]
    return sorted(p for p in bundle.rglob("*") if p.is_file() and p.name.endswith(LOG_SUFFIXES)
                  and not p.name.endswith(".tar.gz"))


def scan(bundle: Path) -> tuple[pd.DataFrame, int]:
    """(events frame sorted by time, lines read)."""
    rows = []
    lines_read = 0
    for path in log_files(bundle):
        opener = gzip.open if path.suffix == ".gz" else open
        source = str(path.relative_to(bundle)) if bundle.is_dir() else path.name
        host = path.relative_to(bundle).parts[0] if bundle.is_dir() else ""
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            line_no = 0
            for line_no, line in enumerate(fh, 1):
                match = CORE_EVENTS.search(line)
                if match is None:
                    continue
                ts = LEADING_TS.match(line)
                rows.append((ts.group(1) if ts else None, host, source, line_no, match.lastgroup,
                             match.group("from_state"), match.group("to_state"), line.rstrip("\n")))
            lines_read += line_no
    frame = pd.DataFrame(rows, columns=["ts", "host", "source", "line_no", "event", "from_state", "to_state",
                                        "line"])
    frame["ts"] = pd.to_datetime(frame["ts"].str.replace(",", ".", regex=False), errors="coerce")
    return frame.sort_values(["ts", "source", "line_no"], kind="stable", ignore_index=True), lines_read


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--show", type=int, default=0, help="print the first N events")
    parser.add_argument("--json", action="store_true", help="print one JSON line (for benchmarks/run.py)")
    args = parser.parse_args(argv)
    t0, cpu0 = time.perf_counter(), time.process_time()
    frame, lines = scan(args.bundle)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    if args.json:
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps({"seconds": seconds, "cpu_s": cpu, "lines": lines, "events": len(frame), "peak_rss_mb": peak_mb}))
        return 0
    print(f"{len(frame):,} events from {lines:,} lines in {seconds:.2f} s")
    print(frame["event"].value_counts().to_string())
    if args.show:
        print(frame.head(args.show).to_string())
    return 0


if __name__ == "__main__":
    sys.exit(main())
