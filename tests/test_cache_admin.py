"""``stream-incident cache``: what the parse cache holds, pruned by last use, on a cache real runs filled."""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import pytest

from toolkit import cache_admin
from toolkit.cache import ParseCache
from toolkit.cli import main
from toolkit.pipeline import parse

LINE = ("[2026-03-07 14:02:{:02d},000] INFO stream-thread [a-StreamThread-1] State transition from "
        "PARTITIONS_ASSIGNED to RUNNING (org.apache.kafka.streams.processor.internals.StreamThread)\n")
DAY = 86400.0


@pytest.fixture(autouse=True)
def _digests_of_fresh_files_kept(monkeypatch):
    """The bundles here are written a moment before they are parsed: keep their digests anyway (see
    ``toolkit.cache.RACY_SECONDS``), as a run on files collected earlier does."""
    monkeypatch.setattr("toolkit.cache.RACY_SECONDS", -1.0)


def _bundle(root: Path) -> Path:
    for host in ("h-0", "h-1"):
        (root / host).mkdir(parents=True)
        (root / host / "app.log").write_text(LINE.format(1) + LINE.format(2) + (LINE.format(3) if host == "h-1" else ""))
    return root


def _parse(spark, bundle: Path, out: Path, cache: ParseCache):
    said: list[str] = []
    parsed = parse(spark, bundle, out, cache=cache, progress=said.append, shapes=False)
    rows = sorted((r.source, r.line_no, r.message) for r in parsed.records.collect())
    return said, rows


def _age_everything(cache: ParseCache, days: float) -> None:
    then = time.time() - days * DAY
    for path in cache.root.rglob("*"):
        os.utime(path, (then, then))


def _key_of(cache: ParseCache, source: str) -> str:
    import json

    return next(p.stem for p in cache.meta_dir.glob("*.json")
                if p.name.count(".") == 1 and json.loads(p.read_text())["source"] == source)


def test_entries_of_a_filled_cache_and_their_last_use_follow_the_runs_that_read_them(spark, tmp_path):
    bundle, cache = _bundle(tmp_path / "bundle"), ParseCache(tmp_path / "cache")
    _parse(spark, bundle, tmp_path / "out1", cache)

    found = cache_admin.entries(cache)
    assert sorted((e.kind, e.complete) for e in found) == [
        ("derived", True), ("digest", True), ("digest", True), ("records", True), ("records", True)]
    records = [e for e in found if e.kind == "records"]
    assert all(e.bytes > 0 and any(p.is_dir() and p.name.startswith("cache_key=") for p in e.paths) for e in records)

    _age_everything(cache, days=40)
    assert all(time.time() - e.last_used > 39 * DAY for e in cache_admin.entries(cache))
    said, _ = _parse(spark, bundle, tmp_path / "out2", cache)
    assert "2 of 2 log files unchanged since an earlier run (cache)" in said
    assert "events unchanged since an earlier run (cache)" in said
    # the second run read every entry: none of them is old any more
    assert all(time.time() - e.last_used < DAY for e in cache_admin.entries(cache))


def test_pruning_by_age_removes_only_what_no_recent_run_used_and_the_next_run_parses_it_again(spark, tmp_path):
    bundle, cache = _bundle(tmp_path / "bundle"), ParseCache(tmp_path / "cache")
    _, first = _parse(spark, bundle, tmp_path / "out1", cache)
    old_key = _key_of(cache, "h-1/app.log")
    then = time.time() - 40 * DAY
    for path in (cache.meta_dir / f"{old_key}.json", cache.records_path(old_key)):
        os.utime(path, (then, then))

    planned = cache_admin.prune(cache, older_than_s=30 * DAY, dry_run=True)
    assert [(e.kind, e.name) for e in planned] == [("records", old_key)]
    assert cache.records_path(old_key).exists()  # a dry run removes nothing

    gone = cache_admin.prune(cache, older_than_s=30 * DAY)
    assert [(e.kind, e.name) for e in gone] == [("records", old_key)]
    assert not cache.records_path(old_key).exists() and cache.lookup(old_key) is None
    assert sum(e.kind == "records" for e in cache_admin.entries(cache)) == 1

    said, again = _parse(spark, bundle, tmp_path / "out2", cache)
    assert "1 of 2 log files unchanged since an earlier run (cache)" in said
    assert any(s.startswith("parsing 1 log files") for s in said)
    assert again == first and len(again) == 5


def test_leftovers_of_an_interrupted_run_are_listed_as_such_and_pruned(spark, tmp_path):
    bundle, cache = _bundle(tmp_path / "bundle"), ParseCache(tmp_path / "cache")
    _parse(spark, bundle, tmp_path / "out1", cache)
    key = _key_of(cache, "h-0/app.log")
    (cache.meta_dir / f"{key}.json").unlink()  # as a run that stopped between writing records and metadata
    building = cache.root / "derived" / "0123abcd.4242.tmp"
    building.mkdir()
    (building / "part-0.parquet").write_bytes(b"x" * 10)

    leftovers = {(e.kind, e.name) for e in cache_admin.entries(cache) if not e.complete}
    assert leftovers == {("records", key), ("derived", building.name)}
    assert "2 left by interrupted runs" not in cache_admin.summary(cache, cache_admin.entries(cache))
    assert "(1 left by interrupted runs)" in cache_admin.summary(cache, cache_admin.entries(cache))

    _age_everything(cache, days=2)
    cache_admin.prune(cache, older_than_s=DAY)
    assert cache_admin.entries(cache) == [] and not building.exists() and not cache.records_path(key).exists()


def _entry(name: str, size: int, used: float) -> cache_admin.CacheEntry:
    return cache_admin.CacheEntry("records", name, (), size, used)


def test_a_size_limit_removes_the_least_recently_used_until_the_rest_fits():
    now = 1_000_000.0
    found = [_entry("a", 40, now - 500), _entry("b", 30, now - 400), _entry("c", 20, now - 300),
             _entry("d", 10, now - 10)]
    assert [e.name for e in cache_admin.choose(found, max_bytes=60, now=now)] == ["a"]
    assert [e.name for e in cache_admin.choose(found, max_bytes=59, now=now)] == ["a", "b"]
    assert [e.name for e in cache_admin.choose(found, max_bytes=100, now=now)] == []
    assert [e.name for e in cache_admin.choose(found, max_bytes=0, now=now)] == ["a", "b", "c", "d"]
    # age first, then size over what is left
    assert [e.name for e in cache_admin.choose(found, older_than_s=350, max_bytes=15, now=now)] == ["a", "b", "c"]
    assert [e.name for e in cache_admin.choose(found, older_than_s=350, max_bytes=0, now=now)] == ["a", "b", "c", "d"]


@pytest.mark.parametrize("text, seconds", [("30d", 30 * DAY), ("12h", 12 * 3600), ("90m", 5400), ("45s", 45),
                                           ("2w", 14 * DAY), ("1.5 days", 1.5 * DAY)])
def test_durations(text, seconds):
    assert cache_admin.parse_duration(text) == seconds


@pytest.mark.parametrize("text, size", [("20GB", 20 * 10**9), ("500M", 500 * 10**6), ("8GiB", 8 * 2**30),
                                        ("1.5t", 1_500_000_000_000), ("4096", 4096), ("10 kb", 10_000)])
def test_sizes(text, size):
    assert cache_admin.parse_size(text) == size


@pytest.mark.parametrize("text", ["5x", "GB", "1iB", "", "-3G"])
def test_a_size_that_is_not_one_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError):
        cache_admin.parse_size(text)


@pytest.mark.parametrize("text", ["7", "1.5", "", "-3d", "3 fortnights"])
def test_a_duration_without_its_unit_or_that_is_not_one_is_refused(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not a duration with its unit"):
        cache_admin.parse_duration(text)


def test_the_command_shows_prunes_and_clears(spark, tmp_path, capsys):
    bundle, cache_dir = _bundle(tmp_path / "bundle"), tmp_path / "cache"
    _parse(spark, bundle, tmp_path / "out1", ParseCache(cache_dir))

    assert main(["cache", "--cache-dir", str(cache_dir)]) == 0
    shown = capsys.readouterr().out
    assert f"parse cache at {cache_dir}" in shown
    assert "records       2 entries" in shown and "derived       1 entries" in shown and "total         5 entries" in shown

    assert main(["cache", "prune", "--cache-dir", str(cache_dir)]) == 2
    assert "needs --older-than AGE, --max-size SIZE or both" in capsys.readouterr().err
    assert main(["cache", "clear", "--older-than", "30d", "--cache-dir", str(cache_dir)]) == 2
    assert "go with cache prune, not cache clear" in capsys.readouterr().err
    assert main(["cache", "info", "--max-size", "1GB", "--cache-dir", str(cache_dir)]) == 2
    assert "go with cache prune, not cache info" in capsys.readouterr().err
    assert len(cache_admin.entries(ParseCache(cache_dir))) == 5
    assert main(["cache", "prune", "--older-than", "30d", "--cache-dir", str(cache_dir)]) == 0
    assert "removed 0 entries, 0 bytes" in capsys.readouterr().out

    assert main(["cache", "clear", "--dry-run", "--cache-dir", str(cache_dir)]) == 0
    assert "would remove 5 entries" in capsys.readouterr().out
    assert len(cache_admin.entries(ParseCache(cache_dir))) == 5
    assert main(["cache", "clear", "--cache-dir", str(cache_dir)]) == 0
    out = capsys.readouterr().out
    assert "removed 5 entries" in out and "total         0 entries" in out
    assert cache_admin.entries(ParseCache(cache_dir)) == []


def _stamp_aged(cache: ParseCache, days: float) -> None:
    stamp = cache.root / cache_admin.TRIM_STAMP
    stamp.touch()
    then = time.time() - days * DAY
    os.utime(stamp, (then, then))


def test_a_run_trims_the_cache_to_its_limit_sparing_what_recent_runs_used(spark, tmp_path, monkeypatch):
    cache = ParseCache(tmp_path / "cache")
    _parse(spark, _bundle(tmp_path / "old"), tmp_path / "out1", cache)
    old = {(e.kind, e.name) for e in cache_admin.entries(cache)}
    _age_everything(cache, days=2)
    monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, "1 byte")

    bundle = tmp_path / "new"
    _bundle(bundle)
    (bundle / "h-0" / "app.log").write_text(LINE.format(9))  # other content: entries of its own
    said, rows = _parse(spark, bundle, tmp_path / "out2", cache)
    left = {(e.kind, e.name) for e in cache_admin.entries(cache)}
    removed = [s for s in said if s.startswith("parse cache above 1 byte")]
    # the older run's entries go but the records its file h-1/app.log shares with this run (same content,
    # path and host), which this run read and so used; digests are kept per path, so the old ones go
    assert old - left == old - {("records", _key_of(cache, "h-1/app.log"))} and len(removed) == 1
    assert f"removed {len(old) - 1} entries no run used within the last hour" in removed[0]
    assert sorted(e.kind for e in cache_admin.entries(cache)) == ["derived", "digest", "digest", "records", "records"]
    assert len(rows) == 4  # the run's own records, unaffected

    # within the hour no run trims again, however far above the limit
    _age_everything(cache, days=2)
    said, _ = _parse(spark, bundle, tmp_path / "out3", cache)
    assert not any(s.startswith("parse cache above") for s in said)
    assert {(e.kind, e.name) for e in cache_admin.entries(cache)} == left


def test_trimming_removes_least_recently_used_first_and_never_what_was_used_within_the_grace(spark, tmp_path):
    cache = ParseCache(tmp_path / "cache")
    _parse(spark, _bundle(tmp_path / "bundle"), tmp_path / "out1", cache)
    _age_everything(cache, days=2)
    older = _key_of(cache, "h-1/app.log")
    then = time.time() - 3 * DAY
    for path in cache.key_paths(older):
        if path.exists():
            os.utime(path, (then, then))
    found = cache_admin.entries(cache)
    total = sum(e.bytes for e in found)

    assert [(e.kind, e.name) for e in cache_admin.trim(cache, total)] == []
    assert [(e.kind, e.name) for e in cache_admin.trim(cache, total - 1)] == [("records", older)]
    # with a grace of three days every entry left (last used two days ago) is spared, limit or not
    assert cache_admin.trim(cache, 0, grace_s=3 * DAY) == []
    assert len(cache_admin.trim(cache, 0)) == len(found) - 1
    assert cache_admin.entries(cache) == []


@pytest.mark.parametrize("setting, expected", [(None, 10 * 10**9), ("", 10 * 10**9), ("20GB", 20 * 10**9),
                                               ("8GiB", 8 * 2**30), ("None", None)])
def test_the_size_limit_setting(monkeypatch, setting, expected):
    if setting is None:
        monkeypatch.delenv(cache_admin.MAX_SIZE_ENV, raising=False)
    else:
        monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, setting)
    assert cache_admin.size_limit() == expected


def test_a_bad_limit_or_none_leaves_the_cache_alone_and_says_why(spark, tmp_path, monkeypatch):
    cache = ParseCache(tmp_path / "cache")
    _parse(spark, _bundle(tmp_path / "bundle"), tmp_path / "out1", cache)
    _age_everything(cache, days=2)
    count = len(cache_admin.entries(cache))
    said: list[str] = []

    monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, "lots")
    assert cache_admin.trim_if_due(cache, said.append) == []
    assert said == ["$STREAM_INCIDENT_CACHE_MAX_SIZE='lots' is not a size such as 20GB or 8GiB (or none); "
                    "the parse cache is not trimmed"]
    assert "runs let it grow: $STREAM_INCIDENT_CACHE_MAX_SIZE='lots' is not a size" in \
        cache_admin.summary(cache, cache_admin.entries(cache))

    monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, "none")
    assert cache_admin.trim_if_due(cache, said.append) == [] and len(said) == 1
    assert "runs let it grow ($STREAM_INCIDENT_CACHE_MAX_SIZE=none)" in cache_admin.summary(cache, cache_admin.entries(cache))
    assert len(cache_admin.entries(cache)) == count

    monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, "1kB")
    assert "runs keep it within 1 KB ($STREAM_INCIDENT_CACHE_MAX_SIZE)" in cache_admin.summary(cache, cache_admin.entries(cache))
    _stamp_aged(cache, days=2)
    assert len(cache_admin.trim_if_due(cache, said.append)) == count


def test_an_analysis_trims_after_its_timeline_so_the_tables_it_just_read_stay(spark, tmp_path, monkeypatch):
    from toolkit.pipeline import analyse

    bundle, cache = _bundle(tmp_path / "bundle"), ParseCache(tmp_path / "cache")
    analyse(spark, bundle, tmp_path / "out1", cache=cache, shapes=False)
    kept = {(e.kind, e.name) for e in cache_admin.entries(cache)}
    assert sum(kind == "derived" for kind, _ in kept) == 2  # events and timeline
    _age_everything(cache, days=2)
    monkeypatch.setenv(cache_admin.MAX_SIZE_ENV, "1 byte")

    said: list[str] = []
    analyse(spark, bundle, tmp_path / "out2", cache=cache, progress=said.append, shapes=False)
    assert "timeline unchanged since an earlier run (cache)" in said
    # every entry was read by this run (so used within the hour): the trim, due now, removes none of them
    assert not any(s.startswith("parse cache above") for s in said)
    assert {(e.kind, e.name) for e in cache_admin.entries(cache)} == kept
    assert time.time() - (cache.root / cache_admin.TRIM_STAMP).stat().st_mtime < 600
