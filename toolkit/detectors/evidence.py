"""The evidence of a run's findings: the log lines they cite, read in one join, and the evidence they still ask for
that the bundle already holds, taken out.

Both run once per :func:`toolkit.detectors.runner.run_detectors`, over every finding at once, so a run costs a
few queries whatever the number of findings.
"""

from __future__ import annotations

from typing import Any, Sequence

from toolkit import utc
from toolkit.detectors.base import MAX_EVIDENCE, Evidence, Finding
from toolkit.knowledge import evidence_pointer, logging_steps


def resolve_evidence(timeline: Any, findings: Sequence[Finding], limit: int = MAX_EVIDENCE) -> list[Finding]:
    """Read the log lines every finding cites (references whose ``text`` is ``None``) in one join.

    Each finding's evidence is then de-duplicated, ordered by time (facts without time last) and cut
    to ``limit`` items; a cut is recorded in ``truncation["evidence"]``. References to lines that are
    not in ``timeline.events`` are dropped.
    """
    from pyspark.sql import functions as F

    pending = sorted({(e.source, int(e.line_no)) for f in findings for e in f.evidence
                      if e.text is None and e.source and e.line_no is not None})
    lines: dict[tuple[str, int], Any] = {}
    if pending:
        events = timeline.events
        keys = utc.create_frame(events.sparkSession, pending, "source string, line_no bigint")
        got = (events.join(F.broadcast(keys), ["source", "line_no"])
               .select("source", "line_no", "ts", F.substring_index("message", "\n", 1).alias("text"))
               .dropDuplicates(["source", "line_no"]))
        got = utc.collect(got)
        lines = {(r.source, int(r.line_no)): r for r in got}
    for finding in findings:
        seen: set[tuple] = set()
        items: list[Evidence] = []
        for item in finding.evidence:
            if item.text is None:
                row = lines.get((item.source, int(item.line_no))) if item.line_no is not None else None
                if row is None:
                    continue
                item = Evidence(item.source, int(item.line_no), row.text or "", "log", row.ts)
            key = (item.source, item.line_no, item.text)
            if key not in seen:
                seen.add(key)
                items.append(item)
        items.sort(key=lambda e: (e.ts is None, _naive(e.ts), e.source, e.line_no or 0))
        if len(items) > limit:
            finding.truncation = {**finding.truncation, "evidence": {"total": len(items), "shown": limit}}
        finding.evidence = items[:limit]
    return list(findings)


def _naive(ts: Any) -> Any:
    from datetime import datetime, timezone

    if ts is None:
        return datetime.max
    return ts.astimezone(timezone.utc).replace(tzinfo=None) if getattr(ts, "tzinfo", None) else ts



#: Levels from the most to the least verbose: a logger that printed at one of them was set to it or finer.
_LEVEL_RANK = {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4}
#: The evidence step (``loggers.toml``) that asks for the startup config dump.
CONFIG_DUMP_POINTER = "config-dump"
#: (host, logger class, level) triples read at most to check the logging a finding asks for.
_MAX_LOGGER_LEVELS = 20_000


def drop_logging_already_kept(timeline: Any, findings: list[Finding]) -> None:
    """Take out of each finding's missing evidence the pointers its hosts already follow: "raise X to DEBUG" and
    "keep the 'StreamsConfig values:' block".

    A logging pointer is met when every host of the finding logged a classified line of every named logger class
    at that level or a finer one; loggers named by package, or hosts without such lines, keep the pointer. The
    config pointer is met when every host of the finding printed a config dump. Two small queries.
    """
    config_step = evidence_pointer(CONFIG_DUMP_POINTER)
    if (any(config_step in f.missing_evidence for f in findings) and hasattr(timeline, "config")
            and "host" in timeline.config.columns):
        dumped = {row["host"] for row in timeline.config.select("host").distinct().limit(_MAX_LOGGER_LEVELS).collect()}
        for finding in findings:
            if finding.hosts and set(finding.hosts) <= dumped:
                finding.missing_evidence = [m for m in finding.missing_evidence if m != config_step]
    asked: dict[str, list] = {}
    for finding in findings:
        if finding.missing_evidence and finding.detector not in asked:
            try:
                asked[finding.detector] = logging_steps(finding.detector)
            except KeyError:
                asked[finding.detector] = []
    if not any(asked.values()) or not hasattr(timeline, "events"):
        return
    from pyspark.sql import functions as F

    logger_class = F.substring_index(F.substring_index(F.col("logger"), ".", -1), "$", 1)
    seen: dict[tuple[str, str], int] = {}
    for row in (timeline.events.where(F.col("level").isin(*_LEVEL_RANK) & F.col("logger").isNotNull())
                .select("host", logger_class.alias("cls"), "level").distinct().limit(_MAX_LOGGER_LEVELS).collect()):
        key = (row["host"], row["cls"])
        seen[key] = min(seen.get(key, 9), _LEVEL_RANK[row["level"]])
    all_hosts = sorted({host for host, _ in seen})
    for finding in findings:
        hosts = finding.hosts or all_hosts
        met = {step.text for step in asked.get(finding.detector, [])
               if hosts and all(name[:1].isupper() and "." not in name for name in step.names)
               and all(seen.get((host, name), 9) <= _LEVEL_RANK[step.level] for host in hosts for name in step.names)}
        if met:
            finding.missing_evidence = [m for m in finding.missing_evidence if m not in met]
