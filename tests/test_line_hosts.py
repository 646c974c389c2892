"""Hosts named by a per-line prefix (kubectl --prefix, docker compose, stern, journald) get their own
``bundle.toml`` settings: zone, clock offset and date, line by line (see docs/time.md).

Each case parses the same lines twice, once as one prefixed file and once as one file per host, and
finds the same records per host.
"""

from __future__ import annotations

import json
import re
import shutil
from datetime import datetime, timezone
from pathlib import Path

from support import EOS_SAMPLE, REPO
from toolkit.cache import ParseCache
from toolkit.ingest import parse_bundle

COMPOSE_BUNDLE = REPO / "tests" / "bundles" / "kafka7672-2.1.0-compose-quickstart-alos"
#: docker compose's ``service  | `` in front of a line, as the compose wrapper strips it.
COMPOSE_PREFIX = re.compile(r"^(\S+)\s+\| ?")
#: What a record says apart from where it sits in its file.
COMPARED = ("ts", "ts_raw", "level", "thread", "logger", "message", "stack", "layout", "ts_quality", "line_count")

#: Zones 17 hours apart and dates a day apart, in one file whose lines alternate between the hosts: a
#: midnight rollover counted over the whole file, not per host, would move records by a day.
COMPOSE_TOML = """
[defaults]
timezone = "UTC"
date = "2018-12-05"
[hosts.invoice-totals-1]
timezone = "Asia/Tokyo"
[hosts.invoice-totals-2]
timezone = "America/Los_Angeles"
date = "2018-12-04"
clock_offset_ms = 1250
"""


def _records_by_host(records) -> dict[str, list[tuple]]:
    """Each host's records in line order (a host's lines keep their order in the prefixed file)."""
    rows = sorted(records.collect(), key=lambda r: (r.host, r.source, r.line_no))
    by_host: dict[str, list[tuple]] = {}
    for r in rows:
        by_host.setdefault(r.host, []).append(tuple(r[c] for c in COMPARED))
    return by_host


def _parse(spark, bundle: Path, out: Path, cache: ParseCache | None = None):
    said: list[str] = []
    _, report, records = parse_bundle(spark, bundle, out, cache=cache, progress=said.append)
    assert all(f.accounted for f in report.files)
    return report, records, said


def _kubectl_bundle(root: Path) -> Path:
    """The EOS sample's two pod logs as one ``kubectl logs --prefix`` file, with the sample's bundle.toml."""
    root.mkdir(parents=True)
    shutil.copy(EOS_SAMPLE / "bundle.toml", root / "bundle.toml")
    lines = [f"[pod/{pod}/streams] {line}"
             for pod in ("orders-agg-0", "orders-agg-1")
             for line in (EOS_SAMPLE / pod / "app.log").read_text(encoding="utf-8").splitlines()]
    (root / "pods.log").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_kubectl_prefixed_hosts_get_their_own_zone_and_clock_offset(spark, tmp_path):
    separate = _records_by_host(_parse(spark, EOS_SAMPLE, tmp_path / "out-separate")[1])
    report, records, _ = _parse(spark, _kubectl_bundle(tmp_path / "prefixed"), tmp_path / "out-prefixed")
    prefixed = _records_by_host(records)

    assert set(prefixed) == {"orders-agg-0", "orders-agg-1"}
    # orders-agg-0 prints Berlin time (10:00:00 is 09:00 UTC); orders-agg-1's clock is 1.25 s fast.
    assert prefixed["orders-agg-0"][0][:2] == (datetime(2026, 3, 7, 9, 0, 0), "2026-03-07 10:00:00,000")
    assert prefixed["orders-agg-1"][0][:2] == (datetime(2026, 3, 7, 9, 0, 0, 97000), "2026-03-07 09:00:01,347")
    assert prefixed == separate

    # ingest.json names the hosts the prefix carried; the file itself sits in no host folder.
    (summary,) = report.files
    assert (summary.host, summary.hosts) == ("unknown-host", ["orders-agg-0", "orders-agg-1"])
    written = json.loads((tmp_path / "out-prefixed" / "ingest.json").read_text())
    assert written["files"][0]["hosts"] == ["orders-agg-0", "orders-agg-1"]


def test_compose_prefixed_time_only_lines_take_each_hosts_zone_date_and_offset(spark, tmp_path):
    lines = (COMPOSE_BUNDLE / "compose-logs.txt").read_text(encoding="utf-8").splitlines()
    prefixed_root, separate_root = tmp_path / "prefixed", tmp_path / "separate"
    prefixed_root.mkdir()
    (prefixed_root / "bundle.toml").write_text(COMPOSE_TOML)
    (prefixed_root / "compose-logs.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    per_service: dict[str, list[str]] = {}
    for line in lines:
        service = COMPOSE_PREFIX.match(line)
        per_service.setdefault(service.group(1), []).append(line[service.end():])
    separate_root.mkdir()
    (separate_root / "bundle.toml").write_text(COMPOSE_TOML)
    for service, own in per_service.items():
        (separate_root / service).mkdir()
        (separate_root / service / "app.log").write_text("\n".join(own) + "\n", encoding="utf-8")

    report, records, _ = _parse(spark, prefixed_root, tmp_path / "out-prefixed")
    prefixed = _records_by_host(records)
    separate = _records_by_host(_parse(spark, separate_root, tmp_path / "out-separate")[1])

    assert set(prefixed) == {"invoice-totals-1", "invoice-totals-2", "invoice-totals-3"}
    first = {host: rows[0][:2] for host, rows in prefixed.items()}
    assert first == {
        "invoice-totals-1": (datetime(2018, 12, 5, 4, 2, 10, 511000), "13:02:10,511"),  # Tokyo, UTC+9
        "invoice-totals-2": (datetime(2018, 12, 4, 21, 2, 9, 843000), "13:02:11,093"),  # Los Angeles, UTC-8; 1.25 s fast
        "invoice-totals-3": (datetime(2018, 12, 5, 13, 6, 40, 372000), "13:06:40,372"),  # no section: [defaults]
    }
    assert {row[8] for rows in prefixed.values() for row in rows} == {"date_inferred"}
    assert prefixed == separate
    assert report.files[0].hosts == ["invoice-totals-1", "invoice-totals-2", "invoice-totals-3"]


def test_the_cache_parses_a_prefixed_file_again_when_a_host_it_carries_changes(spark, tmp_path):
    bundle = _kubectl_bundle(tmp_path / "prefixed")
    cache = ParseCache(tmp_path / "cache")
    first, records, _ = _parse(spark, bundle, tmp_path / "out1", cache)
    assert _records_by_host(records)["orders-agg-1"][0][0] == datetime(2026, 3, 7, 9, 0, 0, 97000)

    again, records, said = _parse(spark, bundle, tmp_path / "out2", cache)
    assert "1 of 1 log files unchanged since an earlier run (cache)" in said
    assert again.file_keys == first.file_keys

    # The file lies in no host folder: only the section of a host its lines name changes.
    toml = (bundle / "bundle.toml").read_text().replace("clock_offset_ms = 1250", "clock_offset_ms = 0")
    (bundle / "bundle.toml").write_text(toml)
    changed, records, said = _parse(spark, bundle, tmp_path / "out3", cache)
    assert "0 of 1 log files unchanged since an earlier run (cache)" in said
    assert _records_by_host(records)["orders-agg-1"][0][0] == datetime(2026, 3, 7, 9, 0, 1, 347000)
    # The tables derived from the records (events, timeline) are keyed anew too.
    assert changed.file_keys != first.file_keys


def _retimed_compose(root: Path, toml: str, times: list[tuple[str, str]]) -> Path:
    """A compose file of the quickstart bundle's own record lines, one per (service, time of day) in that order."""
    own: dict[str, list[str]] = {}
    for line in (COMPOSE_BUNDLE / "compose-logs.txt").read_text(encoding="utf-8").splitlines():
        service = COMPOSE_PREFIX.match(line)
        if re.match(r"\d\d:\d\d:\d\d,\d{3} ", line[service.end():]):
            own.setdefault(service.group(1), []).append(line)
    used = {name: iter(lines) for name, lines in own.items()}
    lines = [re.sub(r"\| \d\d:\d\d:\d\d,\d{3} ", f"| {at},000 ", next(used[service]), count=1)
             for service, at in times]
    root.mkdir()
    (root / "bundle.toml").write_text(toml)
    (root / "compose-logs.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_hosts_sharing_a_clock_in_one_file_share_its_midnights(spark, tmp_path):
    """One service stops before midnight, the other goes on past it: the midnight is the file's, whichever
    service's line crosses it, with the date from bundle.toml (the first record's day) or from the file's
    modification time (the last record's day)."""
    import os

    one, two = "invoice-totals-1", "invoice-totals-2"
    times = [(one, "23:50:00"), (one, "23:59:00"), (two, "00:10:00"), (two, "00:20:00")]
    dated = _retimed_compose(tmp_path / "dated", '[defaults]\ntimezone = "UTC"\ndate = "2018-12-05"\n', times)
    from_mtime = _retimed_compose(tmp_path / "mtime", '[defaults]\ntimezone = "UTC"\n', times)
    stamp = datetime(2018, 12, 6, 0, 31, tzinfo=timezone.utc).timestamp()
    os.utime(from_mtime / "compose-logs.txt", (stamp, stamp))
    expected = {one: [datetime(2018, 12, 5, 23, 50), datetime(2018, 12, 5, 23, 59)],
                two: [datetime(2018, 12, 6, 0, 10), datetime(2018, 12, 6, 0, 20)]}
    for bundle in (dated, from_mtime):
        stamps = {host: [row[0] for row in rows]
                  for host, rows in _records_by_host(_parse(spark, bundle, tmp_path / f"out-{bundle.name}")[1]).items()}
        assert stamps == expected, bundle.name


def test_the_bundles_hosts_are_those_its_line_prefixes_name():
    """``report --host`` checks a name against these: a pod named only by a kubectl prefix is a host of the bundle."""
    from toolkit.ingest import FileSummary, IngestReport

    files = [FileSummary("pods.log", host="unknown-host", layout="log4j", wrappers=["kubectl-prefix"],
                         hosts=["orders-agg-0", "orders-agg-1"]),
             FileSummary("orders-agg-2/app.log", host="orders-agg-2", layout="log4j", wrappers=[])]
    ingest = IngestReport(bundle="b", files=files, problems=[], evidence=[])
    assert ingest.log_hosts == ["orders-agg-0", "orders-agg-1", "orders-agg-2"]
