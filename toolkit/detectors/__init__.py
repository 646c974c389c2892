"""Timeline -> findings: small registered detectors that name a root cause with its evidence lines.

Each detector lives in its own module of this package, registers itself with
:func:`detector` under a stable id and has a playbook of the same name
(``playbooks/<id>.md``). :func:`run_detectors` runs them all (or some) on a
:class:`~toolkit.timeline.Timeline` and ranks the findings: severity, then the detector's role (root
cause, trigger, consequence), then confidence, then time. Each detector sees a view of the timeline
holding only the tables it declares in ``needs``. A detector whose declared precondition (``requires``,
:mod:`toolkit.detectors.preconditions`) the timeline provably lacks is skipped: the preconditions of all
selected detectors are checked in one query first. A detector that raises becomes a finding of status
``error`` ("detector X failed: ...") instead of ending the run. The log lines that findings cite are
read for all findings at once, in one join. :func:`findings_to_json` gives the machine-readable form
documented in ``docs/findings-schema.md``.

Seed detectors (one per incident class of the sample bundles):

* ``eos-stale-restore-checkpoint`` (KAFKA-20685), ``standby-lock-stale-checkpoint`` (KAFKA-8187),
  ``restore-skipped-after-reassignment`` (KAFKA-7672), ``alos-crash-reprocessing``,
  ``kinesis-checkpoint-migration-loss`` (NIFI-16003).

General detectors: ``rebalance-storm``, ``lock-contention``, ``restore-from-scratch``,
``eos-task-corruption-wipe``, ``unclean-shutdown``, ``cleaner-races-assignment``,
``eos-checkpoint-stale-during-running``, and for NiFi's own state ``nifi-component-state-reset``,
``nifi-flowfile-repo-not-restored``, ``nifi-checkpoints-stopped``.
"""

from __future__ import annotations

import importlib
import logging
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from toolkit import utc
from toolkit.detectors.base import (
    CONFIDENCES,
    ERROR,
    EVIDENCE_KINDS,
    FINDING_SEVERITIES,
    MAX_EVIDENCE,
    REGISTRY,
    ROLES,
    SCHEMA_VERSION,
    SEVERITIES,
    DetectorSpec,
    Evidence,
    Finding,
    Impact,
    detector,
    iso_utc,
    playbook_path,
)
from toolkit.detectors.preconditions import atoms, check_row_counts, evaluate
from toolkit.knowledge import evidence_pointer, logging_steps

#: Modules that register the built-in detectors (imported on first use).
DETECTOR_MODULES: tuple[str, ...] = (
    "eos_stale_restore_checkpoint",
    "standby_lock_stale_checkpoint",
    "restore_skipped_after_reassignment",
    "alos_crash_reprocessing",
    "kinesis_checkpoint_migration_loss",
    "rebalance_storm",
    "lock_contention",
    "restore_from_scratch",
    "eos_task_corruption_wipe",
    "unclean_shutdown",
    "cleaner_races_assignment",
    "eos_checkpoint_stale_during_running",
)
#: NiFi repository and component-state detectors.
DETECTOR_MODULES += ("nifi_component_state_reset", "nifi_flowfile_repo_not_restored", "nifi_checkpoints_stopped")

__all__ = [
    "CONFIDENCES",
    "ERROR",
    "EVIDENCE_KINDS",
    "FINDING_SEVERITIES",
    "ROLES",
    "SCHEMA_VERSION",
    "SEVERITIES",
    "DetectorSpec",
    "Evidence",
    "Finding",
    "Impact",
    "detector",
    "DetectorResults",
    "FindingsError",
    "check_findings_json",
    "findings_from_json",
    "read_findings",
    "findings_to_json",
    "registered_detectors",
    "resolve_evidence",
    "run_detectors",
    "TimelineView",
]

_log = logging.getLogger(__name__)


def _load_builtin() -> None:
    for name in DETECTOR_MODULES:
        importlib.import_module(f"{__name__}.{name}")


def registered_detectors() -> dict[str, DetectorSpec]:
    """Every registered detector by id (the built-in ones are imported on first call)."""
    _load_builtin()
    return dict(sorted(REGISTRY.items()))


class SharedResults:
    """Results the detectors of one run share (process runs, captured checkpoints...), each computed once,
    also when several detectors ask at the same moment."""

    def __init__(self) -> None:
        self._values: dict = {}
        self._locks: dict = {}
        self._lock = threading.Lock()

    def get(self, key: Any, compute: Callable[[], Any]) -> Any:
        """The value for ``key``, from ``compute()`` the first time."""
        with self._lock:
            if key in self._values:
                return self._values[key]
            key_lock = self._locks.setdefault(key, threading.Lock())
        with key_lock:
            if key not in self._values:
                self._values[key] = compute()
            return self._values[key]


class TimelineView:
    """The part of a timeline one detector declared in ``needs``; any other attribute is refused.

    A detector that reads a table it did not declare fails (and is reported as an ``error``), so
    ``needs`` always says what a detector really depends on. ``memo`` holds results several detectors
    of one run share (see :func:`toolkit.detectors.common.shared`).
    """

    def __init__(self, timeline: Any, needs: Iterable[str], detector_id: str = "",
                 memo: SharedResults | None = None) -> None:
        self._detector_id = detector_id
        self._needs = tuple(needs)
        self._memo = SharedResults() if memo is None else memo
        for name in self._needs:
            object.__setattr__(self, name, getattr(timeline, name))

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(f"detector {self._detector_id or '?'} reads timeline.{name} but does not declare it "
                             f"in needs ({', '.join(self._needs) or 'nothing'})")


def _failure_finding(spec: DetectorSpec, exc: BaseException) -> Finding:
    last = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
    where = f" (at {last[0].filename.rsplit('/', 1)[-1]}:{last[0].lineno})" if last else ""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return Finding(
        detector=spec.id,
        severity=ERROR,
        confidence="possible",
        title=f"detector {spec.id} failed: {type(exc).__name__}: {message}"[:300],
        explanation=(f"The detector raised {type(exc).__name__}{where}; its root cause could not be checked. "
                     "The other detectors ran normally. Please report this with the bundle's ingest.json."),
        role=spec.role,
    )


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


class DetectorResults(list):
    """The ranked findings of :func:`run_detectors` (a plain list of :class:`Finding`), with which
    detectors ran and which were skipped because their precondition was false (id -> precondition)."""

    def __init__(self, findings: Iterable[Finding] = (), ran: Sequence[str] = (),
                 skipped: dict[str, str] | None = None) -> None:
        super().__init__(findings)
        self.ran: tuple[str, ...] = tuple(ran)
        self.skipped: dict[str, str] = dict(skipped or {})


def gate_detectors(timeline: Any, specs: Sequence[DetectorSpec]) -> dict[str, str]:
    """The detectors among ``specs`` whose precondition ``timeline`` provably lacks: id -> that precondition.

    All preconditions are checked in one query; a detector whose precondition cannot be checked (a
    table the timeline lacks, a query that fails) is not skipped.
    """
    checks = [check for spec in specs for check in atoms(spec.requires)]
    if not checks:
        return {}
    try:
        facts = check_row_counts(timeline, checks)
    except Exception as exc:  # the gate only saves time: without it every detector runs
        _log.debug("detector preconditions not checked: %s: %s", type(exc).__name__, exc)
        return {}
    return {spec.id: spec.requires.describe() for spec in specs
            if spec.requires is not None and evaluate(spec.requires, facts) is False}


#: Detectors run at once. Each is a few small Spark queries whose cost is mostly driver work (planning,
#: code generation, scheduling tiny tasks): several at a time keep every core busy instead of one.
CONCURRENT_DETECTORS = 4


def _run_one(spec: DetectorSpec, timeline: Any, memo: SharedResults) -> list[Finding]:
    try:
        produced = list(spec.fn(TimelineView(timeline, spec.needs, spec.id, memo)) or [])
    except Exception as exc:  # a broken detector must not hide the others' findings
        produced = [_failure_finding(spec, exc)]
    for finding in produced:
        finding.role = finding.role or spec.role
    return produced


def _run_each(specs: Sequence[DetectorSpec], timeline: Any, memo: SharedResults) -> list[list[Finding]]:
    """Each detector's findings, in the order of ``specs``, several detectors at a time."""
    if len(specs) <= 1:
        return [_run_one(spec, timeline, memo) for spec in specs]
    with ThreadPoolExecutor(max_workers=min(CONCURRENT_DETECTORS, len(specs)), thread_name_prefix="detector") as pool:
        return list(pool.map(lambda spec: _run_one(spec, timeline, memo), specs))


def run_detectors(timeline: Any, only: Iterable[str] | None = None, *, gate: bool = True) -> DetectorResults:
    """Run the registered detectors (or the ids in ``only``) on ``timeline``; ranked findings.

    Each detector gets a :class:`TimelineView` with only the tables of its ``needs``. With ``gate``,
    detectors whose precondition the timeline provably lacks are skipped (they could not have found
    anything); the result's ``ran`` and ``skipped`` say which. The others run several at a time (their
    findings do not depend on each other) and share what they all read (:class:`SharedResults`). Ranking:
    severity (critical, warning,
    info; detector errors last), then role (root cause, trigger, consequence), then confidence, then
    the time of the first relevant event. An unknown id in ``only`` raises ``KeyError``.
    """
    specs = registered_detectors()
    if only is not None:
        wanted = list(only)
        unknown = [d for d in wanted if d not in specs]
        if unknown:
            raise KeyError(f"unknown detector(s): {', '.join(unknown)}; known: {', '.join(specs)}")
        specs = {d: specs[d] for d in wanted}
    findings: list[Finding] = []
    runnable = []
    for spec in specs.values():
        absent = [name for name in spec.needs if not hasattr(timeline, name)]
        if absent:
            findings.append(_failure_finding(spec, AttributeError(f"timeline has no {', '.join(absent)}")))
        else:
            runnable.append(spec)
    skipped = gate_detectors(timeline, runnable) if gate else {}
    for detector_id, precondition in skipped.items():
        _log.debug("detector %s skipped: the timeline has no %s", detector_id, precondition)
    memo = SharedResults()
    ran = [spec for spec in runnable if spec.id not in skipped]
    for produced in _run_each(ran, timeline, memo):
        findings.extend(produced)
    _drop_logging_already_kept(timeline, findings)
    if any(e.text is None for f in findings for e in f.evidence):
        try:
            resolve_evidence(timeline, findings)
        except Exception as exc:  # evidence text is an aid; the findings stand without it
            for finding in findings:
                finding.evidence = [e for e in finding.evidence if e.text is not None]
                finding.missing_evidence = [*finding.missing_evidence,
                                            f"evidence lines could not be read: {type(exc).__name__}"]
    return DetectorResults(sorted(findings, key=Finding.rank_key), ran=[spec.id for spec in ran], skipped=skipped)


#: Levels from the most to the least verbose: a logger that printed at one of them was set to it or finer.
_LEVEL_RANK = {"TRACE": 0, "DEBUG": 1, "INFO": 2, "WARN": 3, "ERROR": 4}
#: The evidence step (``loggers.toml``) that asks for the startup config dump.
CONFIG_DUMP_POINTER = "config-dump"
#: (host, logger class, level) triples read at most to check the logging a finding asks for.
_MAX_LOGGER_LEVELS = 20_000


def _drop_logging_already_kept(timeline: Any, findings: list[Finding]) -> None:
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


def findings_to_json(findings: Sequence[Finding], **context: Any) -> dict[str, Any]:
    """The findings as one JSON-ready object (schema: ``docs/findings-schema.md``).

    ``context`` adds top-level keys such as ``bundle``; the keys ``schema_version``, ``findings``
    and ``summary`` are always present.
    """
    counts = {s: sum(1 for f in findings if f.severity == s) for s in FINDING_SEVERITIES}
    return {
        "schema_version": SCHEMA_VERSION,
        **context,
        "summary": {"findings": len(findings), **counts,
                    "detectors": sorted({f.detector for f in findings})},
        "findings": [f.to_json() for f in findings],
    }


def _known(cls: type, item: dict[str, Any]) -> dict[str, Any]:
    """The keys of ``item`` that are fields of the dataclass ``cls``."""
    from dataclasses import fields

    names = {f.name for f in fields(cls)}
    return {k: v for k, v in item.items() if k in names}


class FindingsError(ValueError):
    """A findings document that does not conform to its schema; the message names every problem."""


def check_findings_json(data: Any, where: str = "findings.json") -> None:
    """Raise :class:`FindingsError` when ``data`` breaks the JSON Schema of ``findings.json``
    (``toolkit/resources/schemas/findings.schema.json``, documented in ``docs/findings-schema.md``)."""
    from toolkit.validation import schema_problems

    problems = schema_problems(data, "findings")
    if problems:
        raise FindingsError(f"{where} does not conform to its schema: " + "; ".join(problems[:10])
                            + (f" (and {len(problems) - 10} more)" if len(problems) > 10 else ""))


def read_findings(path: str | Path) -> tuple[dict[str, Any], list[Finding]]:
    """A ``findings.json`` file read, checked against its schema, and its findings rebuilt."""
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise FindingsError(f"{path} is not JSON: {exc}") from None
    return data, findings_from_json(data, where=str(path))


def findings_from_json(data: dict[str, Any], where: str = "findings.json") -> list[Finding]:
    """Rebuild :class:`Finding` objects from :func:`findings_to_json` output (times stay strings), after checking
    it against the schema (:func:`check_findings_json`)."""
    check_findings_json(data, where)
    out = []
    for item in data.get("findings", []):
        # keys added by a later version are ignored, as docs/findings-schema.md tells every reader to
        item = _known(Finding, item)
        item["evidence"] = [Evidence(**_known(Evidence, e)) for e in item.get("evidence", [])]
        item["impact"] = Impact(**_known(Impact, item["impact"])) if item.get("impact") else None
        out.append(Finding(**item))
    return out
