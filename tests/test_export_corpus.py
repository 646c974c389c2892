"""Log-platform exports of real lines (tests/real_logs/exports/, README there): every export read in one bundle,
each entry compared with the hand-written expectations of the corpus lines it carries (its ``.entries.tsv``
names them) — its own timestamp, its event, and the host the platform's labels name."""

from __future__ import annotations

import csv
import re
import shutil
from datetime import datetime, timedelta
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from real_logs.corpus import CORPUS, instant_micros, load_corpus
from toolkit.bundle.exports import sniff_export
from toolkit.bundle.files import read_head

EXPORTS = CORPUS / "exports"
#: Thresholds of every export (the same lines as log files read 100 %).
MIN_OWN_TS_SHARE = 0.99
MIN_EVENT_SHARE = 0.95
MIN_HOST_SHARE = 0.99


@dataclass(frozen=True)
class ExpectedEntry:
    export: str
    entry: int
    host: str
    origin: str
    first: int
    last: int
    duplicate_of: str | None


def export_files() -> list[Path]:
    return sorted(p for p in EXPORTS.iterdir() if p.is_file() and p.suffix not in (".tsv", ".py", ".md"))


def expected_entries(export: Path) -> list[ExpectedEntry]:
    rows = csv.DictReader((EXPORTS / f"{export.name}.entries.tsv").open(encoding="utf-8"), delimiter="\t")
    out = []
    for row in rows:
        origin, span = row["origin"].rsplit(":", 1)
        first, last = (int(n) for n in span.split("-"))
        dup = row["duplicate_of"]
        out.append(ExpectedEntry(export.name, int(row["entry"]), row["host"], origin, first, last,
                                 None if dup == "-" else dup))
    return out


def test_every_export_has_its_expectations_and_they_name_corpus_lines():
    files, problems = load_corpus()
    assert problems == []
    lines = {f.id: {e.line for e in f.expectations} for f in files}
    exports = export_files()
    assert len(exports) >= 12
    bad = []
    for export in exports:
        entries = expected_entries(export)
        assert entries, export.name
        assert len({e.entry for e in entries}) == len(entries), export.name
        for e in entries:
            if e.origin not in lines or not set(range(e.first, e.last + 1)) <= lines[e.origin]:
                bad.append(f"{export.name}:{e.entry}: {e.origin}:{e.first}-{e.last}")
    assert bad == []
    readme = (EXPORTS / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in exports if f"`{p.name}`" not in readme] == []


@dataclass
class ExportResult:
    dated: int = 0
    own_ts: int = 0
    events: int = 0
    classified: int = 0
    records: int = 0
    right_host: int = 0
    misses: list[str] = field(default_factory=list)


def _zones(files) -> dict[str, str]:
    """Each host's zone: that of the corpus files its entries carry (the zone the lines were printed in)."""
    zone_of = {f.id: f.meta.get("timezone") or "UTC" for f in files}
    zones: dict[str, set[str]] = {}
    for export in export_files():
        for e in expected_entries(export):
            zones.setdefault(e.host, set()).add(zone_of[e.origin])
    assert all(len(z) == 1 for z in zones.values()), zones
    return {host: z.pop() for host, z in zones.items()}


@pytest.fixture(scope="module")
def export_results(spark, tmp_path_factory) -> dict[str, ExportResult]:
    from pyspark.sql import functions as F

    from toolkit.events import classify
    from toolkit.ingest import parse_bundle

    files, _ = load_corpus()
    expectations = {f.id: {e.line: e for e in f.expectations} for f in files}
    work = tmp_path_factory.mktemp("exports")
    bundle = work / "bundle"
    bundle.mkdir()
    for export in export_files():
        hosts = {e.host for e in expected_entries(export)}
        if sniff_export(read_head(export, 65536)) is None:
            # labels-free output (logcli --output=raw) is a plain log: its host is its folder, as for any log file
            assert len(hosts) == 1, export.name
            (bundle / hosts.pop()).mkdir(exist_ok=True)
            shutil.copyfile(export, bundle / sorted({e.host for e in expected_entries(export)})[0] / export.name)
        else:
            shutil.copyfile(export, bundle / export.name)
    toml = ["[defaults]", 'timezone = "UTC"', ""]
    for host, zone in sorted(_zones(files).items()):
        toml += [f'[hosts."{host}"]', f'timezone = "{zone}"', ""]
    (bundle / "bundle.toml").write_text("\n".join(toml), encoding="utf-8")
    _, report, records = parse_bundle(spark, bundle, work / "out", work_dir=work / "work")
    assert [f.path for f in report.files if not f.accounted] == []
    rows = {(r.source, r.line_no): r for r in records.select(
        "source", "line_no", "host", "layout",
        F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias("ts")).collect()}
    events = {(e.source, e.line_no): e.event for e in classify(records).select("source", "line_no", "event").collect()}
    results = {}
    for export in export_files():
        result = results[export.name] = ExportResult()
        for e in expected_entries(export):
            if e.duplicate_of:
                continue  # read once, from the export that holds it first
            # a rewritten export's records are its host's (file#host); logcli's raw output is a plain log
            key = (f"{export.name}#{e.host}", e.entry)
            if key not in rows and (f"{e.host}/{export.name}", e.entry) in rows:
                key = (f"{e.host}/{export.name}", e.entry)
            record = rows.get(key)
            first = expectations[e.origin][e.first]
            if first.kind == "S":
                result.dated += 1
                if record is not None and _own_time(record.ts, first):
                    result.own_ts += 1
                else:
                    result.misses.append(f"{e.entry}: ts {record.ts if record else 'no record'} != {first.instant}")
            if first.event:
                result.events += 1
                if events.get(key) == first.event:
                    result.classified += 1
                else:
                    result.misses.append(f"{e.entry}: event {events.get(key)} != {first.event}")
            if record is not None and first.kind in ("S", "R"):
                result.records += 1
                if record.host == e.host:
                    result.right_host += 1
                else:
                    result.misses.append(f"{e.entry}: host {record.host} != {e.host}")
    return results


def _own_time(got: str | None, expected) -> bool:
    """The record's time is the line's own: its instant; or, for a stamp printed without a date (a time of day),
    within the printed second or millisecond, as the toolkit takes the platform's more precise instant for such lines
    (the same rule as a container runtime's stamp before a log line: docs/time.md)."""
    if got is None:
        return False
    want = instant_micros(expected.instant)
    if got == want:
        return True
    printed = expected.printed or ""
    if re.match(r"^\[?\d{4}-\d{2}-\d{2}", printed):
        return False
    step = timedelta(seconds=1) if re.fullmatch(r"[^.,]*\d{2}:\d{2}:\d{2}", printed.strip("[] ")) else \
        timedelta(milliseconds=1)
    start = datetime.fromisoformat(want)
    return start <= datetime.fromisoformat(got) < start + step


@pytest.mark.parametrize("export", [p.name for p in export_files()])
def test_an_export_reads_its_lines_own_times_events_and_hosts(export_results, export):
    r = export_results[export]
    report = f"\n{export}: own ts {r.own_ts}/{r.dated}, events {r.classified}/{r.events}, hosts " \
             f"{r.right_host}/{r.records}\n" + "\n".join(r.misses[:20])
    assert r.dated > 0 and r.records > 0, report
    assert r.own_ts >= MIN_OWN_TS_SHARE * r.dated, report
    assert r.classified >= MIN_EVENT_SHARE * r.events, report
    assert r.right_host >= MIN_HOST_SHARE * r.records, report
