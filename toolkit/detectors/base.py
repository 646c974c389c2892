"""Findings, evidence and the detector registry.

A detector is a small function of the :class:`~toolkit.timeline.Timeline` that returns
:class:`Finding` objects. It is registered with :func:`detector` under a stable id, which is also
the file name of its playbook (``playbooks/<id>.md``). Detectors run Spark queries and collect
only bounded results (a handful of evidence rows), never raw lines.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable, Iterable, Literal

from toolkit.detectors.preconditions import Precondition, atoms, columns_read, tables_of
from toolkit.tables import check_detector_reads

Severity = Literal["critical", "warning", "info"]
Confidence = Literal["confirmed", "likely", "possible"]

SEVERITIES: tuple[str, ...] = ("critical", "warning", "info")
#: A detector that raised gets a finding of its own status ``error``: not a diagnosis (ranked after
#: every real finding, never the verdict) but counted by ``detect --fail-on`` at any level.
ERROR = "error"
FINDING_SEVERITIES: tuple[str, ...] = (*SEVERITIES, ERROR)
CONFIDENCES: tuple[str, ...] = ("confirmed", "likely", "possible")
#: What a detector's findings are to an incident, in ranking order: the upstream bug or mechanism that
#: explains it, a precondition or trigger of such a bug, or a routine consequence.
ROLES: tuple[str, ...] = ("root-cause", "trigger", "consequence")
EVIDENCE_KINDS: tuple[str, ...] = ("log", "state", "aws")

#: Bumped when a field of the JSON output changes meaning or disappears (adding fields does not).
SCHEMA_VERSION = 1

#: How many evidence items one finding carries at most (the playbook says how to find the rest;
#: ``truncation["evidence"]`` says how many there were).
MAX_EVIDENCE = 16


@dataclass(frozen=True)
class Evidence:
    """One line of a log file, one state fact, or one AWS record a finding rests on.

    ``source`` is the path inside the bundle (``host/app.log``, ``host/logs.tar.gz!/app.log``),
    ``line_no`` the 1-based line in that file (``None`` for facts without a line, such as a file
    inside a state capture), ``text`` the raw log line's message (first line) or a one-line
    description of the fact. A log reference whose ``text`` is ``None`` is still to be read: the
    runner resolves the references of all findings in one join (:func:`toolkit.detectors.run_detectors`).
    """

    source: str
    line_no: int | None
    text: str | None
    kind: str = "log"
    ts: datetime | None = None

    def location(self) -> str:
        """``file:line`` (or just the file) as editors and grep print it."""
        return f"{self.source}:{self.line_no}" if self.line_no is not None else self.source


@dataclass(frozen=True)
class Impact:
    """What the incident cost, in words and numbers, and how the numbers were computed."""

    summary: str
    figures: dict[str, Any] = field(default_factory=dict)
    method: str = ""


@dataclass
class Finding:
    """One diagnosis: what happened, how sure we are, and the lines that prove it."""

    detector: str
    severity: str
    confidence: str
    title: str
    explanation: str
    hosts: list[str] = field(default_factory=list)
    tasks: list[str] = field(default_factory=list)
    ts: datetime | None = None
    evidence: list[Evidence] = field(default_factory=list)
    missing_evidence: list[str] = field(default_factory=list)
    impact: Impact | None = None
    known_bugs: list[str] = field(default_factory=list)
    playbook: str = ""
    #: Lists cut to a bounded size: ``{"partitions": {"total": 120, "shown": 40}}`` (empty when nothing was cut).
    truncation: dict[str, dict[str, int]] = field(default_factory=dict)
    #: The detector's role (``ROLES``); filled in by the runner from the registry.
    role: str = ""

    def __post_init__(self) -> None:
        if self.severity not in FINDING_SEVERITIES:
            raise ValueError(f"severity must be one of {FINDING_SEVERITIES}, not {self.severity!r}")
        if self.confidence not in CONFIDENCES:
            raise ValueError(f"confidence must be one of {CONFIDENCES}, not {self.confidence!r}")
        if not self.playbook:
            self.playbook = playbook_path(self.detector)

    def rank_key(self) -> tuple:
        """Severity first (detector errors last), then role (a root cause before its trigger before its
        routine consequences), then confidence, then time (unknown times last), then id."""
        ts = self.ts
        if ts is not None and ts.tzinfo is None:
            ts = ts.replace(tzinfo=timezone.utc)
        role = ROLES.index(self.role) if self.role in ROLES else len(ROLES)
        return (FINDING_SEVERITIES.index(self.severity), role, CONFIDENCES.index(self.confidence),
                ts is None, ts or datetime.max.replace(tzinfo=timezone.utc), self.detector)

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (times as ISO 8601 UTC strings); see ``docs/findings-schema.md``."""
        data = asdict(self)
        data["ts"] = iso_utc(self.ts)
        data["evidence"] = [{**asdict(e), "ts": iso_utc(e.ts)} for e in self.evidence]
        return data


def iso_utc(value: datetime | None) -> str | None:
    """``2026-03-07T10:06:07.807Z`` for a (naive UTC or aware) datetime; ``None`` stays ``None``."""
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="milliseconds") + "Z"


def playbook_path(detector_id: str) -> str:
    """Relative path of the playbook of a detector."""
    return f"playbooks/{detector_id}.md"


DetectorFn = Callable[[Any], Iterable[Finding]]


@dataclass(frozen=True)
class DetectorSpec:
    """A registered detector: its id, headline, default severity, the timeline tables it reads, its role
    and what the timeline must hold before it can find anything (``None``: always run)."""

    id: str
    title: str
    severity: str
    needs: tuple[str, ...]
    fn: DetectorFn
    role: str = "consequence"
    requires: Precondition | None = None

    @property
    def playbook(self) -> str:
        return playbook_path(self.id)


REGISTRY: dict[str, DetectorSpec] = {}


def detector(*, id: str, title: str, severity: str, needs: tuple[str, ...] = (),
             role: str = "consequence", requires: Precondition | None = None) -> Callable[[DetectorFn], DetectorFn]:
    """Register a detector function under ``id`` (also its playbook name).

    ``severity`` is the severity of its root-cause findings; ``needs`` names the timeline
    attributes it reads: the runner hands it a view holding only those (``events``, ``state``,
    ``process_runs``...), so reading anything else fails the detector. ``role`` (``ROLES``) ranks its
    findings among others of the same severity. ``requires`` (:mod:`toolkit.detectors.preconditions`)
    is a condition on tables of ``needs`` without which the detector cannot produce a finding: when
    the timeline provably lacks it, the runner skips the detector.

    Raises ``ValueError`` when ``needs`` names no table the ``Timeline`` holds, or ``requires`` reads a table or
    a column the table registry (:mod:`toolkit.tables`) does not declare.
    """
    if severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}")
    if role not in ROLES:
        raise ValueError(f"role must be one of {ROLES}")
    undeclared = sorted(tables_of(requires) - set(needs))
    if undeclared:
        raise ValueError(f"detector {id!r}: requires reads {', '.join(undeclared)}, which needs does not declare")
    # Against the table registry: a misspelt table or column fails here, at import, instead of as a detector
    # whose precondition is never true (skipped on every bundle) or that fails on every run.
    check_detector_reads(id, needs, [(atom.table, columns_read(atom.where)) for atom in atoms(requires)])

    def register(fn: DetectorFn) -> DetectorFn:
        if id in REGISTRY and REGISTRY[id].fn is not fn:
            raise ValueError(f"detector id {id!r} registered twice")
        REGISTRY[id] = DetectorSpec(id=id, title=title, severity=severity, needs=tuple(needs), fn=fn, role=role,
                                    requires=requires)
        fn.detector_id = id  # type: ignore[attr-defined]
        return fn

    return register
