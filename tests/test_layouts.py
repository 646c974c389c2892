"""Layouts are data: every sample line in the layout catalogue parses to its fields, in Python
(detection) and on Spark (the real parser)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from toolkit.bundle import open_bundle
from toolkit.layouts import detect_lines, load_layouts, parse_logs

CAT = load_layouts()
TEXT_LAYOUTS = [l for l in CAT.layouts if not l.json]


@pytest.mark.parametrize("layout", TEXT_LAYOUTS, ids=lambda l: l.id)
def test_layout_samples_match_their_fields(layout):
    assert layout.samples, f"{layout.id} has no sample line"
    for sample in layout.samples:
        fields = layout.fields(sample["line"])
        assert fields, f"{layout.id} does not match its own sample {sample['line']!r}"
        for name in ("ts", "level", "thread", "logger", "message"):
            if name in sample:
                got = fields[name]
                got = got.strip() if name == "thread" else got
                assert got == sample[name], (layout.id, name, got)


@pytest.mark.parametrize("layout", CAT.layouts, ids=lambda l: l.id)
def test_each_layout_is_detected_on_its_own_samples(layout):
    det = detect_lines([s["line"] for s in layout.samples])
    assert det.layout == layout.id
    assert det.wrappers == ()


@pytest.mark.parametrize("wrapper", list(CAT.wrappers.values()), ids=lambda w: w.id)
def test_wrappers_are_detected_and_stripped(wrapper):
    det = detect_lines([wrapper.sample] * 3)
    assert wrapper.id in det.wrappers
    assert det.layout == "kafka-log4j"


def test_detection_prefers_nothing_over_a_wrong_guess():
    det = detect_lines(["hello world", "this is not a log line", "12345"])
    assert det.layout is None


def test_every_sample_parses_on_spark(spark, tmp_path):
    """One file per layout; the Spark parser must give each sample's fields back."""
    (tmp_path / "bundle.toml").write_text('[defaults]\ntimezone = "UTC"\ndate = "2026-01-05"\n')
    for layout in CAT.layouts:
        host = tmp_path / f"host-{layout.id}"
        host.mkdir()
        (host / "app.log").write_text("\n".join(s["line"] for s in layout.samples) + "\n")
    bundle = open_bundle(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    parsed = parse_logs(spark, bundle)
    rows = {(r.source, r.line_no): r for r in parsed.records.collect()}
    for layout in CAT.layouts:
        source = f"host-{layout.id}/app.log"
        assert parsed.detections[source].layout == layout.id
        for i, sample in enumerate(layout.samples, start=1):
            rec = rows[(source, i)]
            assert rec.layout == layout.id
            assert rec.host == f"host-{layout.id}"
            assert rec.message == sample["message"]
            if "level" in sample:
                assert rec.level == sample["level"]
            if sample.get("thread"):
                assert rec.thread == sample["thread"]
            if sample.get("logger"):
                assert rec.logger == sample["logger"]
            if "ts" in sample:
                assert rec.ts is not None, (layout.id, sample["ts"])
                assert rec.ts_raw == sample["ts"]


def test_timestamps_are_converted_to_utc(spark, tmp_path):
    """Local times use the host zone from bundle.toml (DST included); offsets in the text win."""
    (tmp_path / "bundle.toml").write_text(
        '[hosts.berlin]\ntimezone = "Europe/Berlin"\n[hosts.offset]\ntimezone = "America/New_York"\n'
        '[hosts.skewed]\nclock_offset_ms = 1500\n'
    )
    for host in ("berlin", "offset", "skewed"):
        (tmp_path / host).mkdir()
    kafka = "[{}] INFO stream-thread [a-StreamThread-1] Starting (org.apache.kafka.streams.processor.internals.StreamThread)\n"
    (tmp_path / "berlin" / "app.log").write_text(kafka.format("2026-03-29 01:30:00,000") + kafka.format("2026-03-29 03:30:00,000"))
    (tmp_path / "offset" / "app.log").write_text(
        "2024-03-07T14:02:11.408+01:00  INFO 4242 --- [-StreamThread-1] o.a.k.s.p.internals.StreamThread         : "
        "stream-thread [a-StreamThread-1] Starting\n"
    )
    (tmp_path / "skewed" / "app.log").write_text(kafka.format("2026-01-05 10:00:01,500"))
    bundle = open_bundle(tmp_path, tmp_path.parent / f"{tmp_path.name}-work")
    got = {(r.source, r.line_no): r.ts for r in parse_logs(spark, bundle).records.collect()}
    utc = lambda *a: datetime(*a, tzinfo=timezone.utc).replace(tzinfo=None)  # noqa: E731
    # Berlin switches to CEST at 02:00 on 2026-03-29: 01:30 CET = 00:30 UTC, 03:30 CEST = 01:30 UTC.
    assert got[("berlin/app.log", 1)] == utc(2026, 3, 29, 0, 30)
    assert got[("berlin/app.log", 2)] == utc(2026, 3, 29, 1, 30)
    assert got[("offset/app.log", 1)] == utc(2024, 3, 7, 13, 2, 11, 408000)
    assert got[("skewed/app.log", 1)] == utc(2026, 1, 5, 10, 0, 0)
