"""Running detectors: the gate that skips those a timeline provably cannot feed, each detector on a view of only
the tables it declares, several at a time, a failure turned into a finding, and the ranked results.
"""

from __future__ import annotations

import logging
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterable, Sequence

from toolkit.detectors.base import ERROR, DetectorSpec, Finding
from toolkit.detectors.evidence import drop_logging_already_kept, resolve_evidence
from toolkit.detectors.preconditions import atoms, check_row_counts, evaluate
from toolkit.detectors.registry import registered_detectors

_log = logging.getLogger(__name__)


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
#: How a finding's missing evidence begins when the lines it cites could not be read.
EVIDENCE_UNREAD = "evidence lines could not be read"


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
    drop_logging_already_kept(timeline, findings)
    if any(e.text is None for f in findings for e in f.evidence):
        try:
            resolve_evidence(timeline, findings)
        except Exception as exc:  # evidence text is an aid; the findings stand without it
            for finding in findings:
                finding.evidence = [e for e in finding.evidence if e.text is not None]
                finding.missing_evidence = [*finding.missing_evidence,
                                            f"{EVIDENCE_UNREAD}: {type(exc).__name__}"]
    return DetectorResults(sorted(findings, key=Finding.rank_key), ran=[spec.id for spec in ran], skipped=skipped)
