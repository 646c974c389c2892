"""The real-log corpus: manifests, hand-written expectations, and one Spark run of the toolkit over all of it.

Used by ``tests/test_real_logs.py`` (thresholds) and ``tests/real_logs/coverage.py`` (the table of ``docs/development/real-logs.md``).
Format of the files: ``tests/real_logs/README.md``.
"""

from __future__ import annotations

import shutil
import tomllib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parent
KINDS = frozenset({"S", "R", "C"})


@dataclass(frozen=True)
class Expectation:
    """One row of an ``.expect`` file: what a human reading the line says about it."""

    line: int
    kind: str  # S (timestamped record start), R (record start without timestamp), C (anything else)
    instant: str | None  # UTC, ISO 8601 with a Z, for S rows
    event: str | None
    printed: str | None


@dataclass
class CorpusFile:
    """One corpus log with its manifest entry and expectations."""

    group: str
    id: str
    meta: dict
    log: Path
    expect_path: Path
    expectations: list[Expectation] = field(default_factory=list)
    physical_lines: int = 0

    @property
    def product(self) -> str:
        return str(self.meta.get("product", "")) or "unknown"

    @property
    def layout_family(self) -> str:
        return str(self.meta.get("layout", "")) or "unknown"

    @property
    def wrappers(self) -> list[str]:
        return [str(w) for w in self.meta.get("wrappers", [])]


def physical_lines(path: Path) -> int:
    """Lines as an editor counts them (``\\n``, ``\\r\\n``; a last line without a newline counts)."""
    data = path.read_bytes()
    if not data:
        return 0
    return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


def read_expectations(path: Path) -> list[Expectation]:
    """Parse an ``.expect`` file (tab-separated; ``#`` comment rows and the header row skipped)."""
    rows = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not raw.strip() or raw.startswith("#"):
            continue
        cells = raw.split("\t")
        if cells[0] == "line":
            continue
        if len(cells) < 5:
            raise ValueError(f"{path.name}:{number}: expected 5 tab-separated cells, got {len(cells)}")
        line, kind, instant, event, printed = cells[:5]
        rows.append(Expectation(int(line), kind, None if instant == "-" else instant,
                                None if event == "-" else event, None if printed == "-" else printed))
    return rows


def load_corpus(root: Path = CORPUS) -> tuple[list[CorpusFile], list[str]]:
    """Every corpus file with its manifest entry and expectations, and the problems found reading them."""
    files: list[CorpusFile] = []
    problems: list[str] = []
    for manifest in sorted(root.glob("*/manifest.toml")):
        group = manifest.parent
        try:
            entries = tomllib.loads(manifest.read_text(encoding="utf-8")).get("file", [])
        except tomllib.TOMLDecodeError as exc:
            problems.append(f"{group.name}/manifest.toml: {exc}")
            continue
        for meta in entries:
            fid = str(meta.get("id", ""))
            log, expect = group / f"{fid}.log", group / f"{fid}.expect"
            if not log.exists():
                problems.append(f"{group.name}/{fid}: manifest entry without a .log file")
                continue
            item = CorpusFile(group.name, fid, meta, log, expect, physical_lines=physical_lines(log))
            if expect.exists():
                try:
                    item.expectations = read_expectations(expect)
                except ValueError as exc:
                    problems.append(f"{group.name}/{fid}: {exc}")
            files.append(item)
    return files, problems


def log_files_without_manifest(root: Path = CORPUS) -> list[str]:
    """Corpus ``.log`` files that no manifest names."""
    named = set()
    for manifest in root.glob("*/manifest.toml"):
        try:
            entries = tomllib.loads(manifest.read_text(encoding="utf-8")).get("file", [])
        except tomllib.TOMLDecodeError:
            continue
        named |= {f"{manifest.parent.name}/{e.get('id')}.log" for e in entries}
    return sorted(str(p.relative_to(root)) for p in root.glob("*/*.log") if str(p.relative_to(root)) not in named)


# --------------------------------------------------------------------------- one Spark run over the corpus


def build_bundle(files: list[CorpusFile], into: Path) -> Path:
    """A bundle with one host folder per corpus file; ``bundle.toml`` carries each file's zone and date."""
    into.mkdir(parents=True, exist_ok=True)
    lines = ["[defaults]", 'timezone = "UTC"', ""]
    for f in files:
        host = into / f.id
        host.mkdir()
        shutil.copyfile(f.log, host / f"{f.id}.log")
        lines.append(f'[hosts."{f.id}"]')
        lines.append(f'timezone = "{f.meta.get("timezone") or "UTC"}"')
        if f.meta.get("date"):
            lines.append(f'date = "{f.meta["date"]}"')
        lines.append("")
    (into / "bundle.toml").write_text("\n".join(lines), encoding="utf-8")
    return into


@dataclass
class Record:
    line_no: int
    ts: str | None  # UTC, yyyy-MM-ddTHH:mm:ss.ffffff
    layout: str
    line_count: int


@dataclass
class FileResult:
    """What the toolkit made of one corpus file, line by line, next to the expectations."""

    file: CorpusFile
    detected_layout: str | None = None
    wrappers: tuple[str, ...] = ()
    records: dict[int, Record] = field(default_factory=dict)
    events: dict[int, str] = field(default_factory=dict)
    misses: list[str] = field(default_factory=list)
    ts_lines: int = 0
    ts_read: int = 0
    folded: int = 0
    event_lines: int = 0
    events_matched: int = 0
    false_events: int = 0

    @property
    def unknown_layout(self) -> bool:
        return self.detected_layout is None


def instant_micros(instant: str) -> str:
    """``2018-10-23T08:27:07.684Z`` -> ``2018-10-23T08:27:07.684000`` (microseconds, as Spark keeps them)."""
    body = instant.rstrip("Z")
    if "." in body:
        whole, frac = body.split(".", 1)
    else:
        whole, frac = body, ""
    return f"{whole}.{(frac + '000000')[:6]}"


def compare(result: FileResult) -> FileResult:
    """Fill the counters and the human-readable list of misses of one file."""
    for exp in result.file.expectations:
        rec = result.records.get(exp.line)
        got_event = result.events.get(exp.line)
        if exp.kind == "S":
            result.ts_lines += 1
            if rec is None:
                result.folded += 1
                result.misses.append(f"line {exp.line}: S line folded into the record above (printed {exp.printed!r})")
            elif exp.instant and rec.ts == instant_micros(exp.instant):
                result.ts_read += 1
            else:
                result.misses.append(f"line {exp.line}: instant {rec.ts or 'none'} != {exp.instant} "
                                     f"(printed {exp.printed!r}, layout {rec.layout})")
        if exp.event:
            result.event_lines += 1
            if got_event == exp.event:
                result.events_matched += 1
            else:
                why = "line folded into the record above" if rec is None else f"got {got_event or 'no event'}"
                result.misses.append(f"line {exp.line}: event {exp.event} missed ({why}, layout "
                                     f"{rec.layout if rec else '-'})")
        elif got_event:
            result.false_events += 1
            result.misses.append(f"line {exp.line}: event {got_event} where the label says none")
    return result


def analyse_corpus(spark, files: list[CorpusFile], work: Path) -> list[FileResult]:
    """Parse and classify the whole corpus in one Spark analysis; compare every file with its expectations."""
    from pyspark.sql import functions as F

    from toolkit.events import classify
    from toolkit.ingest import parse_bundle

    bundle_dir = build_bundle(files, work / "bundle")
    _, report, records = parse_bundle(spark, bundle_dir, work / "out", work_dir=work / "work")
    by_source = {f"{f.id}/{f.id}.log": FileResult(f) for f in files}
    for summary in report.files:
        if summary.path in by_source:
            by_source[summary.path].detected_layout = summary.layout
            by_source[summary.path].wrappers = tuple(summary.wrappers)
    rows = records.select(
        "source", "line_no", F.date_format("ts", "yyyy-MM-dd'T'HH:mm:ss.SSSSSS").alias("ts"), "layout", "line_count",
    ).where(F.col("layout") != "unparsed").collect()
    for r in rows:
        if r.source in by_source:
            by_source[r.source].records[r.line_no] = Record(r.line_no, r.ts, r.layout, r.line_count)
    events = classify(records).select("source", "line_no", "event").collect()
    for e in events:
        if e.source in by_source:
            by_source[e.source].events[e.line_no] = e.event
    return [compare(res) for res in by_source.values()]


@dataclass
class Totals:
    files: int = 0
    lines: int = 0
    ts_lines: int = 0
    ts_read: int = 0
    folded: int = 0
    event_lines: int = 0
    events_matched: int = 0
    false_events: int = 0
    unknown_layout: int = 0

    def add(self, r: FileResult) -> None:
        self.files += 1
        self.lines += r.file.physical_lines
        self.ts_lines += r.ts_lines
        self.ts_read += r.ts_read
        self.folded += r.folded
        self.event_lines += r.event_lines
        self.events_matched += r.events_matched
        self.false_events += r.false_events
        self.unknown_layout += int(r.unknown_layout)

    @property
    def ts_share(self) -> float:
        return self.ts_read / self.ts_lines if self.ts_lines else 1.0

    @property
    def event_share(self) -> float:
        return self.events_matched / self.event_lines if self.event_lines else 1.0


def totals(results: list[FileResult]) -> Totals:
    out = Totals()
    for r in results:
        out.add(r)
    return out


def misses_table(results: list[FileResult], limit_per_file: int = 12) -> str:
    """Per file with misses: its counters and the first misses, for a failing test's message."""
    out = []
    for r in sorted(results, key=lambda r: (r.file.group, r.file.id)):
        if not r.misses:
            continue
        out.append(f"{r.file.group}/{r.file.id} (layout {r.detected_layout}, wrappers {list(r.wrappers)}): "
                   f"ts {r.ts_read}/{r.ts_lines}, folded {r.folded}, events {r.events_matched}/{r.event_lines}, "
                   f"false {r.false_events}")
        out.extend(f"    {m}" for m in r.misses[:limit_per_file])
        if len(r.misses) > limit_per_file:
            out.append(f"    ... {len(r.misses) - limit_per_file} more")
    return "\n".join(out)


def coverage_rows(results: list[FileResult]) -> list[tuple[str, str, str, Totals]]:
    """Totals per (product, layout the toolkit read the file with, wrappers the manifest names)."""
    groups: dict[tuple[str, str, str], Totals] = {}
    for r in results:
        key = (r.file.product, r.detected_layout or "none", ", ".join(r.file.wrappers) or "-")
        groups.setdefault(key, Totals()).add(r)
    return [(p, l, w, t) for (p, l, w), t in sorted(groups.items())]


def event_label_counts(results: list[FileResult]) -> Counter:
    """How often each labelled event was missed (for the 'still not read' list)."""
    missed: Counter = Counter()
    for r in results:
        for exp in r.file.expectations:
            if exp.event and r.events.get(exp.line) != exp.event:
                missed[exp.event] += 1
    return missed
