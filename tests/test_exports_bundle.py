"""Log-platform exports as bundle files: the KAFKA-20685 bundle whose crashed pod (fraud-scoring-1) left its logs
only in a platform export reads as its log-file twin ``kafka20685-4.1.2-log4j2-location-info``.

Two variants (see their README.md): a Grafana Loki export (``logcli query --output=jsonl``: one entry a printed
line, newest first, the host in ``labels.pod``) and an Elasticsearch ``_search`` response from Filebeat (one hit a
multi-line record, sorted by ``@timestamp`` descending, the host in ``_source.kubernetes.pod.name``). Both must
read as the twin: the same raised findings, runs and timeline tables, and the crashed pod's evidence cites the
export file and the entry in it.

The first tests check the bundles themselves (unit tier): each export holds the twin's lines of fraud-scoring-1,
unchanged, in the platform's order, and nothing else differs from the twin. The others analyse the bundles (spark
tier, through the ``bundle`` fixture).
"""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from datetime import datetime, timezone

import pytest

from support import BUNDLES
from support.findings import raised

TWIN = "kafka20685-4.1.2-log4j2-location-info"
LOKI = f"{TWIN}-loki-export"
ES = f"{TWIN}-es-export"
#: The pod that crashed (kill -9 at 09:47): its logs are only in the export.
CRASHED = "fraud-scoring-1"
#: The export of each variant, at the top of the bundle (not in a host folder).
EXPORT = {LOKI: "loki-query.jsonl", ES: "es-search.json"}
#: The twin's files of the crashed pod, oldest first.
LOG_FILES = ("app.log.2.gz", "app.log.1", "app.log")
#: A place in those files that a text column quotes (``version_evidence``: ``... at fraud-scoring-1/app.log:89``).
TWIN_LOCATION = re.compile(rf"\b{CRASHED}/({'|'.join(map(re.escape, LOG_FILES))}):(\d+)\b")
#: The start of a log4j2 record as this bundle prints it (%d: 2026-05-12 08:00:03,613).
RECORD_START = re.compile(r"^(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}),(\d{3}) ")
#: How long after the printed time a line may have been shipped (the exports' own times).
SHIP_DELAY_NS = 50_000_000


# --- the bundles' own content (unit) ---------------------------------------------------------------------------------

def _twin_lines() -> list[tuple[str, int, str]]:
    """The crashed pod's printed lines in the twin, oldest first: (file, 1-based line in it, text)."""
    out = []
    for name in LOG_FILES:
        path = BUNDLES / TWIN / CRASHED / name
        data = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
        text = data.decode("utf-8")
        assert text.endswith("\n"), name
        out += [(name, n, line) for n, line in enumerate(text[:-1].split("\n"), 1)]
    return out


def _ns(text: str) -> int:
    """An RFC 3339 UTC time with up to nine fraction digits (``2026-05-12T08:00:03.615006468Z``) in nanoseconds."""
    m = re.fullmatch(r"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?Z", text)
    assert m, text
    seconds = int(datetime.fromisoformat(m.group(1)).replace(tzinfo=timezone.utc).timestamp())
    return seconds * 10**9 + int((m.group(2) or "0").ljust(9, "0"))


def _printed_ns(line: str) -> int | None:
    m = RECORD_START.match(line)
    if not m:
        return None
    return _ns(m.group(1).replace(" ", "T") + "Z") + int(m.group(2)) * 10**6


def _loki_entries() -> list[list[tuple[str, object]]]:
    """Each JSON line of the Loki export, its keys in file order."""
    text = (BUNDLES / LOKI / EXPORT[LOKI]).read_text(encoding="utf-8")
    assert text.endswith("\n")
    return [json.loads(line, object_pairs_hook=list) for line in text[:-1].split("\n")]


def _es_hits() -> list[dict]:
    return json.loads((BUNDLES / ES / EXPORT[ES]).read_text(encoding="utf-8"))["hits"]["hits"]


def _es_log_order(hits: list[dict]) -> list[int]:
    """The hits' indexes in log order: by @timestamp, and by byte offset in the container's log file within one
    millisecond (the response keeps ties in the order they were indexed, so reversing it is not the log order)."""
    return sorted(range(len(hits)), key=lambda i: (hits[i]["_source"]["@timestamp"],
                                                   hits[i]["_source"]["log"]["offset"]))


def test_the_loki_export_holds_the_crashed_pods_lines_newest_first():
    lines = _twin_lines()
    entries = _loki_entries()
    assert len(entries) == len(lines) == 1217
    # logcli's encoding/json map: keys sorted, labels too (--include-common-labels keeps pod on every entry)
    assert {tuple(key for key, _ in entry) for entry in entries} == {("labels", "line", "timestamp")}
    entries = [dict(entry) for entry in entries]
    assert {tuple(key for key, _ in entry["labels"]) for entry in entries} == {
        ("app", "container", "filename", "job", "namespace", "node_name", "pod", "service_name", "stream")}
    assert {dict(entry["labels"])["pod"] for entry in entries} == {CRASHED}
    # one entry a printed line, unchanged, newest first (logcli's default --direction=backward)
    assert [entry["line"] for entry in reversed(entries)] == [text for _, _, text in lines]
    shipped = [_ns(entry["timestamp"]) for entry in entries]
    assert all(a > b for a, b in zip(shipped, shipped[1:]))
    # shipped a little after log4j2 printed the record (the export's time is not the record's time)
    for entry, at in zip(entries, shipped):
        printed = _printed_ns(entry["line"])
        assert printed is None or 0 < at - printed < SHIP_DELAY_NS, entry["line"]


def test_the_es_export_holds_the_crashed_pods_records_newest_first():
    lines = _twin_lines()
    hits = _es_hits()
    sources = [hit["_source"] for hit in hits]
    assert {s["kubernetes"]["pod"]["name"] for s in sources} == {CRASHED}
    stamps = [s["@timestamp"] for s in sources]
    assert stamps == sorted(stamps, reverse=True)  # sort: @timestamp desc
    # one hit a record, its lines joined with \n, unchanged: together the twin's lines in log order
    order = _es_log_order(hits)
    assert "\n".join(sources[i]["message"] for i in order) == "\n".join(text for _, _, text in lines)
    assert all(_printed_ns(s["message"]) is not None for s in sources)
    assert any("\n" in s["message"] for s in sources) and len(hits) < len(lines)
    # hits sharing a millisecond keep their indexing order: reversing the response is not the log order
    assert order != list(reversed(range(len(hits))))
    for s in sources:
        assert 0 <= _ns(s["@timestamp"]) - _printed_ns(s["message"]) < SHIP_DELAY_NS, s["message"][:80]


def _bundle_files(name: str) -> dict[str, bytes]:
    root = BUNDLES / name
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("name", [LOKI, ES])
def test_only_the_crashed_pods_logs_differ_from_the_twin(name):
    twin, variant = _bundle_files(TWIN), _bundle_files(name)
    kept = {path for path in twin if path not in {"README.md", "EXPECTED.json"}
            and path not in {f"{CRASHED}/{log}" for log in LOG_FILES}}
    assert set(variant) == kept | {"README.md", "EXPECTED.json", EXPORT[name]}
    assert {path: variant[path] for path in kept} == {path: twin[path] for path in kept}
    assert sorted(p for p in variant if p.startswith(f"{CRASHED}/")) == [f"{CRASHED}/state-{CRASHED}-1004.tar.gz"]
    expected, twin_expected = json.loads(variant["EXPECTED.json"]), json.loads(twin["EXPECTED.json"])
    assert expected["bundle"] == name
    assert {k: v for k, v in expected.items() if k not in {"bundle", "layout"}} == {
        k: v for k, v in twin_expected.items() if k not in {"bundle", "layout"}}


# --- analysed: the twin's findings, runs and evidence (spark) --------------------------------------------------------

def _key(finding) -> tuple:
    return finding.detector, tuple(finding.hosts), tuple(finding.tasks)


@pytest.mark.parametrize("name", [LOKI, ES])
def test_the_export_raises_the_twins_findings(bundle, name):
    _, twin = bundle(TWIN)
    _, found = bundle(name)
    assert raised(twin)  # the twin's incident is found at all
    assert sorted(map(_key, raised(found))) == sorted(map(_key, raised(twin)))


@pytest.mark.parametrize("name", [LOKI, ES])
def test_the_crashed_pods_runs_are_the_twins(bundle, name):
    def runs(analysis):
        rows = analysis.timeline.process_runs.where(f"host = '{CRASHED}'").orderBy("run_no").collect()
        return [(r.run_no, r.start, r.end, r.end_kind, r.version) for r in rows]

    twin, _ = bundle(TWIN)
    analysis, _ = bundle(name)
    assert len(runs(twin)) == 2
    assert runs(analysis) == runs(twin)


def _loki_line_no() -> dict[tuple[str, int], int]:
    """(twin file, line in it) -> the 1-based line of the same printed line in the Loki export (newest first)."""
    lines = _twin_lines()
    return {(name, n): len(lines) - index for index, (name, n, _) in enumerate(lines)}


def _es_line_no() -> dict[tuple[str, int], int]:
    """(twin file, line in it) -> the 1-based position in ``hits.hits`` of the hit the line is part of (an entry of
    a JSON document is cited by its position in the entry array; docs/inputs/log-platform-exports.md)."""
    hits = _es_hits()
    lines = iter(_twin_lines())
    out = {}
    for i in _es_log_order(hits):
        for _ in hits[i]["_source"]["message"].split("\n"):
            name, n, _text = next(lines)
            out[(name, n)] = i + 1
    assert next(lines, None) is None
    return out


def _cites_export(source: str, name: str) -> bool:
    """Whether an evidence source names the export file: the file itself, or ``file#host`` with the crashed pod."""
    file, _, host = source.partition("#")
    return file == EXPORT[name] and host in ("", CRASHED)


def _evidence(finding, name: str | None = None) -> Counter:
    """A finding's evidence; a citation of the export (``file`` or ``file#host``) written as the file's name."""
    return Counter((e.kind, EXPORT[name] if name and _cites_export(e.source, name) else e.source, e.line_no, e.text,
                    e.ts) for e in finding.evidence)


def _in_export(twin_finding, name: str, line_no: dict[tuple[str, int], int]) -> Counter:
    """The twin finding's evidence as the export bundle must cite it: the crashed pod's log lines in the export."""
    out = Counter()
    for (kind, source, n, text, ts), count in _evidence(twin_finding).items():
        folder, _, file = source.partition("/")
        if kind == "log" and folder == CRASHED and file in LOG_FILES:
            source, n = EXPORT[name], line_no[(file, n)]
        out[(kind, source, n, text, ts)] += count
    return out


@pytest.mark.parametrize("name,line_no", [(LOKI, _loki_line_no), (ES, _es_line_no)], ids=["loki", "es"])
def test_the_crashed_pods_evidence_cites_the_export(bundle, name, line_no):
    """The crashed pod's evidence names the export file (``file`` or ``file#pod``) and the entry: for Loki its
    1-based line in the JSON-lines file, for Elasticsearch the hit's 1-based position in ``hits.hits``; all other
    evidence is the twin's."""
    _, twin = bundle(TWIN)
    _, found = bundle(name)
    mapping = line_no()
    twin_raised = sorted(raised(twin), key=lambda f: (_key(f), f.title))
    found_raised = sorted(raised(found), key=lambda f: (_key(f), f.title))
    assert list(map(_key, found_raised)) == list(map(_key, twin_raised))
    cited = [e for f in found_raised for e in f.evidence if _cites_export(e.source, name)]
    assert cited, "no evidence cites the export"
    assert [e.location() for f in found_raised for e in f.evidence
            if e.kind == "log" and e.source.startswith(f"{CRASHED}/")] == []
    assert all(e.kind == "log" and e.line_no in set(mapping.values()) for e in cited)
    for got, want in zip(found_raised, twin_raised):
        assert _evidence(got, name) == _in_export(want, name, mapping), got.title


def _without_references(df, locate=None) -> list:
    """A table's rows without the columns that point into files (they differ by construction), sorted; ``locate``
    rewrites the file locations that text columns quote (a run's ``version_evidence``)."""
    columns = [c for c in df.columns if not (c in ("source", "line_no") or c.endswith(("_source", "_line_no")))]
    rows = (tuple(locate(v) if locate and isinstance(v, str) else v for v in row)
            for row in df.select(*columns).collect())
    return sorted(rows, key=repr)


@pytest.mark.parametrize("name,line_no", [(LOKI, _loki_line_no), (ES, _es_line_no)], ids=["loki", "es"])
def test_the_timeline_is_the_twins(bundle, name, line_no):
    """Every derived table (runs, generations, thread states, task phases, checkpoints, restorations, clock skew
    ...) and the crashed pod's events are the twin's but for their file references: the export's lines are read
    whole, in their log order, at their printed times; a location quoted in a text column names the export entry."""
    mapping = line_no()
    twin, _ = bundle(TWIN)
    analysis, _ = bundle(name)

    def in_export(text: str) -> str:
        return TWIN_LOCATION.sub(lambda m: f"{EXPORT[name]}:{mapping[(m[1], int(m[2]))]}", text)

    def plain(text: str) -> str:
        return re.sub(rf"\b{re.escape(EXPORT[name])}(?:#{CRASHED})?:(\d+)\b", rf"{EXPORT[name]}:\1", text)

    for table, df in twin.timeline.tables().items():
        assert (_without_references(analysis.timeline.tables()[table], plain)
                == _without_references(df, in_export)), table
    # the crashed pod's events: the same records, times, messages and line counts ("layout" left out: an export's
    # lines may be read through a wrapper)
    events = [c for c in twin.timeline.events.columns if c != "layout"]
    crashed = f"host = '{CRASHED}'"
    assert (_without_references(analysis.timeline.events.where(crashed).select(*events), plain)
            == _without_references(twin.timeline.events.where(crashed).select(*events), in_export))


@pytest.mark.parametrize("name", [LOKI, ES])
def test_the_crashed_pods_lines_are_read_as_in_the_twin(bundle, name):
    """Every printed line of the export is read as the twin reads it: the same lines, records, continuation lines
    (an empty line is one too) and records, and no problem with the export."""
    twin, _ = bundle(TWIN)
    analysis, _ = bundle(name)

    def accounting(files) -> tuple:
        return tuple(sum(getattr(f, k) for f in files) for k in ("lines", "records", "continuation", "unparsed"))

    crashed_files = [f for f in twin.ingest.files if f.path.startswith(f"{CRASHED}/")]
    export_files = [f for f in analysis.ingest.files if f.path.partition("#")[0] == EXPORT[name]]
    assert accounting(crashed_files) == (1217, 189, 1028, 0)
    assert export_files and {h for f in export_files for h in (f.hosts or [f.host])} == {CRASHED}
    assert accounting(export_files) == accounting(crashed_files)
    assert [p for p in analysis.ingest.problems if p.source.partition("#")[0] == EXPORT[name]] == []
    columns = [c for c in twin.records.columns if c != "layout"]
    crashed = f"host = '{CRASHED}'"
    assert (_without_references(analysis.records.where(crashed).select(*columns))
            == _without_references(twin.records.where(crashed).select(*columns)))
