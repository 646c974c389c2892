"""The real-log corpus (tests/real_logs/): logs nobody here wrote, read line by line against hand-written
expectations, in one Spark analysis of the whole corpus."""

from __future__ import annotations

import pytest

from real_logs.corpus import (
    CORPUS,
    KINDS,
    analyse_corpus,
    load_corpus,
    log_files_without_manifest,
    misses_table,
    totals,
)

FILES, PROBLEMS = load_corpus()

#: Thresholds the corpus run must meet.
MIN_TS_SHARE = 0.99
MIN_EVENT_SHARE = 0.97


def test_every_corpus_file_has_a_manifest_entry_and_one_expectation_per_line():
    assert PROBLEMS == []
    assert FILES, f"no corpus files under {CORPUS}"
    assert log_files_without_manifest() == []
    ids = [f.id for f in FILES]
    assert len(ids) == len(set(ids)), "file ids must be unique across the corpus"
    bad = []
    for f in FILES:
        if not str(f.meta.get("source_url", "")).startswith(("http://", "https://")):
            bad.append(f"{f.group}/{f.id}: no source URL")
        if not f.expect_path.exists():
            bad.append(f"{f.group}/{f.id}: no .expect file")
            continue
        lines = [e.line for e in f.expectations]
        if lines != list(range(1, f.physical_lines + 1)):
            bad.append(f"{f.group}/{f.id}: {len(lines)} expectation rows for {f.physical_lines} lines "
                       f"(or not numbered 1..n in order)")
        for e in f.expectations:
            if e.kind not in KINDS:
                bad.append(f"{f.group}/{f.id}:{e.line}: kind {e.kind!r}")
            if (e.kind == "S") != (e.instant is not None):
                bad.append(f"{f.group}/{f.id}:{e.line}: an instant belongs to S rows and only to them")
    assert bad == []


@pytest.fixture(scope="module")
def corpus_results(spark, tmp_path_factory):
    return analyse_corpus(spark, FILES, tmp_path_factory.mktemp("real-logs"))


def test_timestamps_record_starts_and_events_of_the_real_logs(corpus_results):
    t = totals(corpus_results)
    report = (
        f"\n{t.files} files, {t.lines} lines: timestamps read {t.ts_read}/{t.ts_lines} ({t.ts_share:.2%}), "
        f"folded S lines {t.folded}, events {t.events_matched}/{t.event_lines} ({t.event_share:.2%}), "
        f"false events {t.false_events}\n" + misses_table(corpus_results)
    )
    assert t.ts_lines > 0 and t.event_lines > 0
    assert t.ts_share >= MIN_TS_SHARE, report
    assert t.folded == 0, report
    assert t.event_share >= MIN_EVENT_SHARE, report
    assert t.false_events == 0, report


def test_unknown_layout_is_rare(corpus_results):
    """A file is 'unknown layout' only when none of its lines reads as a timestamped record start."""
    unknown = [r.file.id for r in corpus_results if r.unknown_layout]
    stamped = [r.file.id for r in corpus_results if r.unknown_layout and any(e.kind == "S" for e in r.file.expectations)]
    assert stamped == [], f"files with timestamped lines but no layout: {stamped}"
    assert len(unknown) <= max(1, len(corpus_results) // 10), unknown
