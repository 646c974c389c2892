"""Stage 1 of the pipeline: a bundle in, ``records.parquet`` and ``ingest.json`` out.

``ingest.json`` accounts for every line of every file: ``lines == records + continuation +
unparsed``. Damaged input is listed in ``problems`` with the file and the reason; it never stops
the run.
"""

from __future__ import annotations

import json
import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from toolkit import utc
from toolkit.bundle import Bundle, IngestProblem, mark_output_dir, open_bundle
from toolkit.bundle.export_cache import CACHE_FOLDER
from toolkit.bundle.settings import BUNDLE_TOML, unmatched_host_sections
from toolkit.cache import KEY_COLUMN, CachedFile, ParseCache, line_hosts_identity
from toolkit.jvm import LONG_LINE_CHARS, plan_for_lines
from toolkit.layouts import LINE_COUNT_SCHEMA, Detection, ParsedLogs, carries_line_hosts, parse_logs
from toolkit.schemas import CANDIDATE_COLUMN, STORED_RECORD_SCHEMA, UNPARSED
from toolkit.state.schemas import STATE_SCHEMAS, STATE_TABLES

REPLACEMENT_CHAR = "\ufffd"
UNPARSED_EXAMPLES = 3


#: ``IngestReport.readability()["status"]``: the detectors had log events to check; the bundle held nothing
#: to read (no log line, no state evidence); it held log lines, none of which a layout could read.
READABLE, EMPTY, UNREADABLE = "ok", "empty", "unreadable"


@dataclass
class FileSummary:
    """Line accounting for one log file."""

    path: str
    #: the file's host (its folder, archive or name); lines whose prefix names a host belong to that host
    host: str
    layout: str | None
    wrappers: list[str]
    #: the hosts of the file's records, sorted: the file's host, or the hosts its line prefixes named
    hosts: list[str] = field(default_factory=list)
    lines: int = 0
    records: int = 0
    continuation: int = 0
    unparsed: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    unparsed_examples: list[dict] = field(default_factory=list)
    #: for a file rewritten from a log-platform export: the export's path (``file``), its ``format`` and the
    #: ``entries`` of this host it holds (``lines`` counts their printed lines; a stack in one entry is several)
    export: dict | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def accounted(self) -> bool:
        return self.lines == self.records + self.continuation + self.unparsed


@dataclass
class IngestReport:
    """What ``parse`` found: per-file accounting, problems and totals."""

    bundle: str
    files: list[FileSummary]
    problems: list[IngestProblem]
    evidence: list[dict]
    #: parse-cache keys of the log files, when a cache was used (they name the records for derived tables); a
    #: file whose lines name their host adds the identity of the host sections it was read with
    file_keys: list[str] = field(default_factory=list)
    #: identity of the state facts read (see :meth:`toolkit.state.StateRows.digest`); "" without state evidence
    state_digest: str = ""

    @property
    def totals(self) -> dict[str, int]:
        keys = ("lines", "records", "continuation", "unparsed")
        out = {k: sum(getattr(f, k) for f in self.files) for k in keys}
        out["files"] = len(self.files)
        out["problems"] = len(self.problems)
        out["unaccounted_files"] = sum(1 for f in self.files if not f.accounted)
        return out

    @property
    def log_hosts(self) -> list[str]:
        """The hosts of the log records, sorted: each file's host, or the hosts its line prefixes named."""
        return sorted({h for f in self.files for h in f.hosts or [f.host]})

    def readability(self) -> dict[str, Any]:
        """What the detectors had to read, in plain words (``findings.json``'s ``ingest``, detect's text and the
        report's verdict; schema in ``docs/findings-schema.md``).

        ``status`` is ``ok``; ``empty`` when the bundle holds no log line and no state evidence (unusable
        input); or ``unreadable`` when it holds log lines but a layout read none of them, so no log event
        could be checked. ``message`` says which in one sentence (None when ``ok``).
        """
        totals = self.totals
        files, lines, unparsed, state = totals["files"], totals["lines"], totals["unparsed"], len(self.evidence)
        if lines == 0 and state == 0:
            status = EMPTY
            message = ("no log file and no state evidence found in the bundle" if files == 0 else
                       f"no log line found: the bundle's {files} log file{'s are' if files != 1 else ' is'} empty "
                       "and it holds no state evidence")
            if totals["problems"]:
                message += f" ({totals['problems']} ingest problem{'s' if totals['problems'] != 1 else ''}: "\
                           "files that could not be read)"
        elif lines > 0 and totals["records"] == 0:
            status = UNREADABLE
            message = (f"{unparsed} of {lines} log lines could not be read (unknown layout), so no log event could be "
                       "checked" + ("; findings rest on the state evidence only" if state else ""))
        else:
            status, message = READABLE, None
        return {"status": status, "files": files, "lines": lines, "unparsed": unparsed, "state_items": state,
                "message": message}

    def to_json(self) -> dict:
        return {
            "bundle": self.bundle,
            "totals": self.totals,
            "readability": self.readability(),
            # ``export`` only on files rewritten from a log-platform export
            "files": [{**{k: v for k, v in asdict(f).items() if k != "export" or v is not None},
                       "accounted": f.accounted} for f in self.files],
            "problems": [asdict(p) for p in self.problems],
            "evidence": self.evidence,
        }


def _iso(ts: Any) -> str | None:
    return ts.isoformat() if ts is not None else None


#: The accounting figures of a file none of whose lines became a record (an empty file).
NO_RECORDS = {"records": 0, "continuation": 0, "unparsed": 0, "bad_utf8_lines": 0, "nul_lines": 0,
              "first_ts": None, "last_ts": None, "examples": [], "hosts": []}

#: Figures counted on the raw lines by the parse's first pass (``ParsedLogs.line_counts``).
LINE_CHECKS = ("bad_utf8_lines", "nul_lines")


def record_figures(records: DataFrame, text_checks: bool = False) -> dict[str, dict]:
    """Per file (``source``): what the line accounting needs from its records (counts, first and last
    timestamp as ISO text, the first unparsed lines), in two small Spark jobs.

    With ``text_checks`` the records' text is also scanned for undecodable and NUL bytes
    (``bad_utf8_lines``, ``nul_lines``, counted per record). That is a pass over all the text: it is
    only needed for files whose raw lines were not read in this run and were not counted before.
    """
    checks = []
    if text_checks:
        text = F.concat_ws("\n", *[F.col(c) for c in ("ts_raw", "thread", "logger", "message", "stack")])
        checks = [
            # Spark keeps undecodable bytes as they are (contains('\ufffd') does not see them); lines that
            # went through a regex were already decoded with replacement characters.
            F.sum(F.when(text.contains(REPLACEMENT_CHAR) | ~F.is_valid_utf8(text), 1).otherwise(0)).alias("bad_utf8_lines"),
            F.sum(F.when(text.contains("\u0000"), 1).otherwise(0)).alias("nul_lines"),
        ]
    per_file = records.groupBy("source").agg(
        F.sum(F.when(F.col("layout") != UNPARSED, 1).otherwise(0)).alias("records"),
        F.sum(F.when(F.col("layout") != UNPARSED, F.col("line_count") - 1).otherwise(0)).alias("continuation"),
        F.sum(F.when(F.col("layout") == UNPARSED, 1).otherwise(0)).alias("unparsed"),
        *checks,
        F.min("ts").alias("first_ts"),
        F.max("ts").alias("last_ts"),
        # A file whose lines name their host (kubectl --prefix, compose) holds several: a handful per file.
        *([F.sort_array(F.collect_set("host")).alias("hosts")] if "host" in records.columns else []),
    )
    figures = {}
    for row in utc.collect(per_file):
        one = row.asDict()
        source = one.pop("source")
        figures[source] = {**one, "first_ts": _iso(one["first_ts"]), "last_ts": _iso(one["last_ts"]), "examples": []}
    # The first unparsed lines of each file, picked before they are gathered: a file of millions of
    # unparsed lines must not build one list of all of them.
    first_lines = Window.partitionBy("source").orderBy("line_no", "text")
    unparsed_rows = (
        records.where(F.col("layout") == UNPARSED)
        .select("source", "line_no", F.substring("message", 1, 300).alias("text"))
        .withColumn("_n", F.row_number().over(first_lines))
        .where(F.col("_n") <= UNPARSED_EXAMPLES)
        .groupBy("source")
        .agg(F.sort_array(F.collect_list(F.struct("line_no", "text"))).alias("examples"))
        .collect()
    )
    for row in unparsed_rows:
        figures[row["source"]]["examples"] = [{"line_no": e["line_no"], "text": e["text"]} for e in row["examples"]]
    return figures


def _line_checks(*candidates: Mapping[str, Any] | None) -> dict[str, int] | None:
    """The first candidate's bad- and NUL-line counts (:data:`LINE_CHECKS`), or None when none has both."""
    for figures in candidates:
        if figures and all(figures.get(k) is not None for k in LINE_CHECKS):
            return {k: int(figures[k]) for k in LINE_CHECKS}
    return None


def _with_line_checks(kept: dict | None) -> dict | None:
    """Accounting kept by an earlier version named its text checks ``bad_utf8`` and ``nul_records``, and kept
    no ``hosts``: that is aggregated again (None), since a prefixed file's records name other hosts than its own."""
    if kept is not None and "hosts" not in kept:
        return None
    if kept is not None and "bad_utf8" in kept and "bad_utf8_lines" not in kept:
        kept = {**kept, "bad_utf8_lines": kept.pop("bad_utf8"), "nul_lines": kept.pop("nul_records", 0)}
    return kept


def summarize(bundle: Bundle, parsed: ParsedLogs, records: DataFrame, cache: ParseCache | None = None,
              keys: Mapping[str, str] | None = None) -> IngestReport:
    """Aggregate the records per file (small Spark jobs) and check the line accounting.

    With the parse cache and every file's cache key (``keys``: source → key), a bundle whose files all
    have their figures kept from an earlier run is accounted without a Spark job; otherwise the figures
    are aggregated and kept for the next run.
    """
    # Line counts of the raw bytes, with bad and NUL lines for the files this run read: a small local table.
    line_stats = {r["source"]: {k: v for k, v in r.asDict().items() if v is not None}
                  for r in parsed.line_counts.collect()}
    kept = {src: _with_line_checks(cache.recall_accounting(key)) for src, key in keys.items()} \
        if cache is not None and keys else {}
    if kept and all(kept.get(f.source) is not None for f in bundle.logs):
        figures = kept
    else:
        # Bad and NUL lines were counted on the raw lines by the first pass, or kept from an earlier run of
        # an unchanged file; only when some file has neither is the records' text scanned for them.
        unchecked = any(_line_checks(line_stats.get(f.source), kept.get(f.source)) is None for f in bundle.logs)
        figures = record_figures(records, text_checks=unchecked)
    checks = {f.source: _line_checks(line_stats.get(f.source), kept.get(f.source), figures.get(f.source))
              or {} for f in bundle.logs}
    if cache is not None and keys and figures is not kept:
        for src, key in keys.items():
            cache.remember_accounting(key, {**figures.get(src, NO_RECORDS), **checks.get(src, {})})
    stats = {src: {**figures.get(src, {}), **line_stats.get(src, {}), **checks.get(src, {})}
             for src in {*figures, *line_stats}}

    problems = list(bundle.problems)
    files = []
    for f in bundle.logs:
        det = parsed.detections.get(f.source)
        s = stats.get(f.source, {})
        summary = FileSummary(
            path=f.source,
            host=f.host,
            layout=det.layout if det else None,
            wrappers=list(det.wrappers) if det else [],
            hosts=list(s.get("hosts") or [f.host]),  # a file without records: the host it was given
            lines=int(s.get("lines_read") or 0),
            records=int(s.get("records") or 0),
            continuation=int(s.get("continuation") or 0),
            unparsed=int(s.get("unparsed") or 0),
            first_ts=s["first_ts"] + "Z" if s.get("first_ts") else None,
            last_ts=s["last_ts"] + "Z" if s.get("last_ts") else None,
            unparsed_examples=list(s.get("examples") or []),
            export=bundle.exported.get(f.source),
        )
        # The file's problems, each once: in the file's summary and, with a detail, in the report's one list
        # (which the CLI, ingest.json's count and the HTML report's table all show as it is).
        found: list[tuple[str, str]] = []
        example = summary.unparsed_examples[0] if summary.unparsed_examples else None
        first_unparsed = f"line {example['line_no']}: {str(example['text'])[:160]}" if example else ""
        if f.size and det and det.layout is None:
            found.append(("unknown layout: every line kept as unparsed",
                          f"{summary.unparsed} of {summary.lines} lines" + (f"; {first_unparsed}" if example else "")))
        elif summary.unparsed:
            found.append((f"{summary.unparsed} of {summary.lines} lines unparsed (kept with layout 'unparsed')",
                          first_unparsed))
        if s.get("bad_utf8_lines"):
            found.append((f"{s['bad_utf8_lines']} lines contain bytes that are not valid UTF-8 (kept as U+FFFD)", ""))
        if s.get("nul_lines"):
            found.append((f"{s['nul_lines']} lines contain NUL bytes", ""))
        if not summary.accounted:
            found.append((f"line accounting mismatch: {summary.lines} read, "
                          f"{summary.records + summary.continuation + summary.unparsed} in records", ""))
        summary.problems = [problem for problem, _ in found]
        problems.extend(IngestProblem(f.source, problem, detail) for problem, detail in found)
        files.append(summary)
    evidence = [{"path": e.source, "host": e.host, "kind": e.kind} for e in bundle.evidence]
    # A section applies to a file's own host (its lines without a prefix read with it) and to the hosts
    # its lines name; one that matches none of them was meant for a host that is not here (or misspelt).
    hosts = {f.host for f in files} | {h for f in files for h in f.hosts} | {e.host for e in bundle.evidence}
    problems.extend(unmatched_host_sections(bundle.hosts, hosts))
    return IngestReport(bundle=str(bundle.root), files=files, problems=problems, evidence=evidence)


Progress = Callable[[str], None]


def _parse_with_cache(spark: SparkSession, bundle: Bundle, cache: ParseCache, say: Progress,
                      redact: bool = True) -> tuple[ParsedLogs, dict[str, str], list[str]]:
    """Parse only files the cache has not seen; read everything else back from the cache.

    Returns the parsed logs, every file's cache key (by source) and what the tables derived from the
    records are keyed by (:attr:`IngestReport.file_keys`): the keys, each joined by the identity of the host
    sections its file was read with when the file's lines name their host.
    """
    # hashlib releases the GIL while it hashes: files are read and hashed on every core at once.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1, thread_name_prefix="hash-log") as pool:
        keys = dict(zip((f.source for f in bundle.logs),
                        pool.map(lambda f: cache.key_for(f, bundle.settings_for(f.host), redact=redact), bundle.logs)))
    line_hosts = {f.source: line_hosts_identity(bundle.line_host_settings(f)) for f in bundle.logs}
    known = {src: cache.lookup(key) for src, key in keys.items()}
    for src, entry in known.items():
        # A file whose lines name their host was parsed with the sections of the hosts it may name.
        if entry is not None and carries_line_hosts(entry.wrappers) and entry.line_hosts != line_hosts[src]:
            known[src] = None
    misses = [f for f in bundle.logs if known[f.source] is None]
    # Records read back from the cache carry their file's longest line (unknown for an entry without it,
    # which only a damaged cache has: taken as long); files parsed now are measured by their first pass.
    plan_for_lines(spark, max((e.longest_line if e.longest_line is not None else LONG_LINE_CHARS + 1
                               for e in known.values() if e is not None), default=0))
    counts: dict[str, dict] = {}
    for f in bundle.logs:
        if known[f.source] is not None:  # found while reading the file (a damaged gzip): said again
            bundle.problems.extend(IngestProblem(**p) for p in cache.recall_problems(keys[f.source]))
    say(f"{len(bundle.logs) - len(misses)} of {len(bundle.logs)} log files unchanged since an earlier run (cache)")
    if misses:
        say(f"parsing {len(misses)} log files ({sum(f.size for f in misses) / 1e6:.1f} MB) on Spark")
        for f in misses:
            cache.forget(keys[f.source])  # leftovers of an interrupted run
        already = len(bundle.problems)
        parsed = parse_logs(spark, bundle, files=misses, redact=redact)
        found = bundle.problems[already:]
        for f in misses:
            cache.remember_problems(keys[f.source], [asdict(p) for p in found if p.source == f.source])
        keymap = utc.create_frame(spark, [(f.source, keys[f.source]) for f in misses], f"source string, {KEY_COLUMN} string")
        (parsed.records.join(F.broadcast(keymap), "source").select(*STORED_RECORD_SCHEMA.fieldNames(), KEY_COLUMN)
         .write.mode("append").partitionBy(KEY_COLUMN, CANDIDATE_COLUMN).parquet(str(cache.records_dir.resolve())))
        counts = {r["source"]: r.asDict() for r in parsed.line_counts.collect()}
        parsed.release()
        fresh = []
        for f in misses:
            det = parsed.detections[f.source]
            figures = counts.get(f.source, {})
            fresh.append(CachedFile(keys[f.source], f.source, det.layout, det.wrappers, det.start_share,
                                    int(figures.get("lines_read") or 0), int(figures.get("longest_line") or 0),
                                    line_hosts[f.source] if carries_line_hosts(det.wrappers) else ""))
        cache.remember(fresh)
        known.update({e.source: e for e in fresh})
    paths = [str(cache.records_path(k).resolve()) for k in keys.values() if cache.records_path(k).exists()]
    if paths:
        # The schema given (the key and candidate are partition folders' names): no job to read the footers.
        records = (spark.read.schema(StructType([*STORED_RECORD_SCHEMA.fields, StructField(KEY_COLUMN, StringType())]))
                   .option("basePath", str(cache.records_dir.resolve())).parquet(*paths)
                   .select(*STORED_RECORD_SCHEMA.fieldNames()))
    else:
        records = utc.create_frame(spark, [], STORED_RECORD_SCHEMA)
    # Bad and NUL lines are known for the files parsed now; the others' come from their kept accounting.
    line_counts = utc.create_frame(
        spark, [(e.source, e.lines_read, *[(counts.get(e.source) or {}).get(k) for k in LINE_CHECKS], e.longest_line)
         for e in known.values()], LINE_COUNT_SCHEMA)
    detections = {e.source: Detection(e.layout, e.wrappers, e.start_share) for e in known.values()}
    derived_inputs = sorted(f"{e.key}:{e.line_hosts}" if e.line_hosts else e.key for e in known.values())
    return ParsedLogs(records=records, line_counts=line_counts, detections=detections), keys, derived_inputs


#: Tables written at once. Writing a small table is mostly driver work (planning, code generation,
#: scheduling a few tiny tasks); several at a time keep every core busy instead of one.
CONCURRENT_WRITES = 4


def write_records(records: DataFrame, path: Path) -> None:
    """Write ``records.parquet``, partitioned by ``candidate`` (see ``toolkit.schemas.CANDIDATE_COLUMN``)."""
    records.write.mode("overwrite").partitionBy(CANDIDATE_COLUMN).parquet(str(path.resolve()))


def read_records(spark: SparkSession, path: Path) -> DataFrame:
    """``records.parquet`` read back, with its schema given (no job to infer it); a filter on ``candidate``
    reads only that partition's files."""
    return spark.read.schema(STORED_RECORD_SCHEMA).parquet(str(path.resolve()))


def write_tables(tables: Mapping[str, DataFrame], paths: Mapping[str, str]) -> None:
    """Write each table to its parquet path (overwriting), several at a time."""
    def write(name: str) -> None:
        tables[name].write.mode("overwrite").parquet(paths[name])

    with ThreadPoolExecutor(max_workers=CONCURRENT_WRITES, thread_name_prefix="write-table") as pool:
        for done in [pool.submit(write, name) for name in tables]:
            done.result()  # re-raises the first failure


def write_empty_table(schema: StructType, path: Path) -> None:
    """An empty parquet table with ``schema`` (one empty file, as a Spark write leaves it), without a Spark job."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    target = utc.arrow_schema(schema)
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist([], schema=target), path / "part-00000.parquet")
    (path / "_SUCCESS").write_text("")


def write_state_tables(spark: SparkSession, bundle: Bundle, out: Path) -> str:
    """Read the bundle's state evidence and write one parquet table per fact kind under ``out/state/``.

    Problems (malformed checkpoints, broken JSON) join the bundle's ingest problems. Returns the
    identity of the facts read (:meth:`toolkit.state.StateRows.digest`).
    """
    from toolkit.state import StateItem, read_state

    items = [StateItem(e.host, e.local_path, e.source, e.kind) for e in bundle.evidence]
    tables = read_state(spark, items)
    paths = {name: out / "state" / f"{name}.parquet" for name in STATE_TABLES}
    # Most bundles fill two or three of the tables: an empty one is written here, not by a Spark job.
    empty = [name for name in STATE_TABLES if tables.row_counts.get(name) == 0]
    for name in empty:
        write_empty_table(STATE_SCHEMAS[name], paths[name])
    write_tables({name: getattr(tables, name) for name in STATE_TABLES if name not in empty},
                 {name: str(path.resolve()) for name, path in paths.items()})
    bundle.problems.extend(IngestProblem(source, reason) for source, reason in tables.problems)
    return tables.digest



def parse_bundle(
    spark: SparkSession,
    bundle: Bundle | Path | str | list,
    out_dir: Path | str,
    *,
    timezone: str | None = None,
    work_dir: Path | str | None = None,
    progress: Progress | None = None,
    cache: ParseCache | None = None,
    redact: bool = True,
) -> tuple[Bundle, IngestReport, DataFrame]:
    """Parse a bundle and write ``records.parquet`` and ``ingest.json`` under ``out_dir``.

    ``bundle`` is an opened :class:`Bundle` or anything :func:`open_bundle` accepts. Returns the
    bundle, the ingest report and the records DataFrame read back from parquet (so later stages
    do not re-parse the text). With a :class:`ParseCache`, files parsed before (same content and
    settings) are read back from the cache and only new or changed files are parsed.
    """
    say = progress or (lambda _msg: None)
    out = mark_output_dir(out_dir)
    if not isinstance(bundle, Bundle):
        say("discovering files")
        bundle = open_bundle(bundle, work_dir or out / "work", timezone=timezone, out_dir=out,
                             export_cache=cache.root / CACHE_FOLDER if cache else None)
    if bundle.skipped_folders:
        say(f"not read as evidence, folders stream-incident wrote: {', '.join(bundle.skipped_folders)}")
    parsed, keys, derived_inputs = _parse_with_cache(spark, bundle, cache, say, redact) if cache else (None, {}, [])
    file_keys = sorted(keys.values())
    if parsed is None:
        say(f"parsing {len(bundle.logs)} log files ({sum(f.size for f in bundle.logs) / 1e6:.1f} MB) on Spark")
        parsed = parse_logs(spark, bundle, redact=redact)
    records_path = out / "records.parquet"
    if cache is not None and cache.link_records(file_keys, records_path):
        pass  # the cache holds every file's records already: link them, do not write them again
    else:
        write_records(parsed.records, records_path)
    parsed.release()
    records = read_records(spark, records_path)
    state_digest = ""
    shutil.rmtree(out / "state", ignore_errors=True)  # an earlier run's facts must not join this bundle's
    if bundle.evidence:
        say(f"reading {len(bundle.evidence)} state evidence items")
        state_digest = write_state_tables(spark, bundle, out)
    say("checking line accounting")
    report = summarize(bundle, parsed, records, cache, keys)
    for problem in report.problems:  # settings that were not applied change every time read: say so now
        if problem.source == BUNDLE_TOML:
            say(f"{BUNDLE_TOML}: {problem.problem} ({problem.detail})")
    report.file_keys, report.state_digest = derived_inputs, state_digest
    (out / "ingest.json").write_text(json.dumps(report.to_json(), indent=2, default=str), encoding="utf-8")
    return bundle, report, records
