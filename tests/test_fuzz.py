"""Seeded fuzzing of ingest: several hundred mutated copies of the sample logs, parsed in ONE bundle.

Asserts, for every case: nothing crashes; every detectable damage is a problem row (in the report
and in ``ingest.json``) naming the file and the reason; every file that could be read satisfies
``lines == records + continuation + unparsed``; and ``lines`` equals the physical lines Python counts
in the bytes Spark was given. Set ``FUZZ_SEED`` to replay another seed.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections import Counter

import pytest
from pyspark.sql import functions as F

from support.fuzz import MUTATIONS, build_fuzz_bundle, matches, physical_lines
from toolkit.ingest import parse_bundle

SEED = int(os.environ.get("FUZZ_SEED", "20261122"))
N_CASES = 360  # ten of each of the 36 mutations, plus the 20 MB line


@pytest.fixture(scope="module")
def fuzzed(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-bundle")
    cases = build_fuzz_bundle(root, SEED, N_CASES)
    out = tmp_path_factory.mktemp("fuzz-out")
    bundle, report, records = parse_bundle(spark, root, out)  # one parse for every case
    data = json.loads((out / "ingest.json").read_text(encoding="utf-8"))
    yield cases, bundle, report, records, data
    for path in (root, out):  # 20 MB line and friends: do not keep them in pytest's retained dirs
        shutil.rmtree(path, ignore_errors=True)


def _case_of(source: str) -> str:
    return source.split("/", 1)[0]


def test_cases_cover_every_mutation(fuzzed):
    cases = fuzzed[0]
    kinds = Counter(c.mutation for c in cases)
    per_mutation, rest = divmod(N_CASES, len(MUTATIONS))
    assert rest == 0, "N_CASES must use every mutation equally often"
    assert kinds == {**{kind: per_mutation for kind in MUTATIONS}, "huge_line": 1}


def test_every_case_is_seen(fuzzed):
    """Nothing disappears: each case folder yields a parsed file or a problem row."""
    cases, bundle, report, _, _ = fuzzed
    seen = {_case_of(f.path) for f in report.files} | {_case_of(p.source) for p in report.problems}
    missing = [c.name + " " + c.mutation for c in cases if c.name not in seen]
    assert not missing, missing


def test_detectable_damage_is_reported_with_file_and_reason(fuzzed):
    cases, _, report, _, data = fuzzed
    rows = [(p.source, p.problem + " " + p.detail) for p in report.problems]
    json_rows = [(p["source"], p["problem"] + " " + p["detail"]) for p in data["problems"]]
    assert sorted(rows) == sorted(json_rows)
    failures = []
    for case in cases:
        for source, pattern in case.must.items():
            if not any(s == source and matches(r, pattern) for s, r in rows):
                got = [r for s, r in rows if s == source]
                failures.append(f"{case.name} {case.mutation} {case.detail}: {source} wants /{pattern}/, got {got}")
    assert not failures, "\n".join(failures)


def test_line_accounting_identity_holds_for_every_file(fuzzed):
    _, _, report, _, data = fuzzed
    bad = [(f.path, f.lines, f.records, f.continuation, f.unparsed) for f in report.files if not f.accounted]
    assert not bad, bad
    assert data["totals"]["unaccounted_files"] == 0
    t = data["totals"]
    assert t["lines"] == t["records"] + t["continuation"] + t["unparsed"]


def text_for_spark(log) -> bytes:
    """The text Spark reads from a log: an intact gzip is handed to Spark as it is and decompressed there."""
    data = log.local_path.read_bytes()
    return gzip.decompress(data) if log.gzip else data


def test_spark_lines_equal_python_physical_lines(fuzzed):
    """Independent count on the bytes handed to Spark (after gunzip), with \\r\\n and \\r as line ends."""
    _, bundle, report, _, _ = fuzzed
    by_path = {f.path: f for f in report.files}
    wrong = []
    for log in bundle.logs:
        expected = physical_lines(text_for_spark(log))
        if by_path[log.source].lines != expected:
            wrong.append((log.source, by_path[log.source].lines, expected))
    assert not wrong, wrong
    assert len(bundle.logs) > 250


def test_records_and_line_numbers_are_consistent(fuzzed):
    """Per file, records tile the lines 1..n without overlap (sum of line_count == lines, max end == lines)."""
    _, _, report, records, _ = fuzzed
    per_file = {r["source"]: r for r in records.groupBy("source").agg(
        F.sum("line_count").alias("covered"), F.max(F.col("line_no") + F.col("line_count") - 1).alias("last"),
        F.count(F.lit(1)).alias("n"), F.countDistinct("line_no").alias("distinct_starts"),
    ).collect()}
    wrong = []
    for f in report.files:
        row = per_file.get(f.path)
        if f.lines == 0:
            if row is not None:
                wrong.append((f.path, "records for an empty file"))
            continue
        if row is None or row["covered"] != f.lines or row["n"] != row["distinct_starts"]:
            wrong.append((f.path, f.lines, row and row.asDict()))
    assert not wrong, wrong[:20]


def test_gzip_recovery_keeps_the_text_before_the_damage(fuzzed):
    cases, bundle, report, _, _ = fuzzed
    logs = {f.source: f for f in bundle.logs}
    checked = 0
    for case in cases:
        for source, original in case.prefix_of.items():
            if source not in logs:  # cut inside the gzip header: nothing to recover, a problem says so
                assert any(p.source == source for p in report.problems), source
                continue
            text = text_for_spark(logs[source])
            assert original.startswith(text), (case.name, len(text), len(original))
            checked += 1
    assert checked >= 10
    concatenated = [c for c in cases if c.mutation == "gzip_concatenated"]
    for case in concatenated:  # every member of `cat a.gz b.gz` is read
        (source, original), = case.prefix_of.items()
        assert logs[source].gzip  # read whole by Spark's own gzip reader
        assert text_for_spark(logs[source]) == original


def test_bad_bytes_never_reach_the_records(fuzzed):
    """Undecodable bytes are reported, then kept as U+FFFD: records.parquet is valid UTF-8."""
    _, _, _, records, _ = fuzzed
    invalid = records.where(~F.is_valid_utf8(F.concat_ws("\n", "message", "stack", "thread", "logger"))).count()
    assert invalid == 0


def test_odd_file_names_parse(fuzzed):
    """Glob characters, ':' and codec suffixes on plain text must not break the Spark read."""
    cases, _, report, _, _ = fuzzed
    by_path = {f.path: f for f in report.files}
    odd = [c for c in cases if c.mutation == "odd_name"]
    for case in odd:
        (name,) = [p for p in by_path if _case_of(p) == case.name]
        f = by_path[name]
        assert f.lines > 0 and f.accounted, (case.detail, f)  # Spark read it (a bad name fails the whole job)


def test_unreadable_files(fuzzed):
    """As root chmod 000 changes nothing (the file is read and accounted); FIFOs and sockets are refused."""
    cases, _, report, _, _ = fuzzed
    by_path = {f.path: f for f in report.files}
    for case in cases:
        if case.mutation == "chmod_000":
            source = f"{case.name}/app.log"
            if os.geteuid() == 0:
                assert by_path[source].lines > 0 and by_path[source].accounted
            else:
                assert source not in by_path
        if case.mutation in ("fifo", "socket"):
            assert f"{case.name}/app.log" not in by_path


def test_the_20_mb_line(fuzzed):
    cases, _, report, records, _ = fuzzed
    (case,) = [c for c in cases if c.mutation == "huge_line"]
    f = next(f for f in report.files if f.path == f"{case.name}/app.log")
    assert (f.lines, f.records + f.unparsed) == (1, 1)
    (row,) = records.where(F.col("source") == f.path).select(F.length("message").alias("n"), "layout").collect()
    assert row["n"] > 20_000_000 - 200


def test_build_is_reproducible(tmp_path):
    """The same seed writes the same cases byte for byte (no Spark needed)."""
    def snapshot(root):
        out = {}
        for p in sorted(root.rglob("*")):
            rel = str(p.relative_to(root))
            if p.is_symlink():
                out[rel] = "link:" + os.readlink(p)
            elif p.is_file():
                os.chmod(p, 0o600)
                out[rel] = p.read_bytes()
            else:
                out[rel] = "dir" if p.is_dir() else "special"
        return out

    a = build_fuzz_bundle(tmp_path / "a", SEED, 70, huge_line=False)
    b = build_fuzz_bundle(tmp_path / "b", SEED, 70, huge_line=False)
    assert [(c.mutation, c.detail, c.must) for c in a] == [(c.mutation, c.detail, c.must) for c in b]
    assert snapshot(tmp_path / "a") == snapshot(tmp_path / "b")
