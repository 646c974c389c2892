"""The verdict of a run, decided once: what the findings (and what could be read) say about the bundle.

``detect``'s text and the report's first screen used to decide this each on its own (what comes first, when
"nothing found" is an all-clear, which finding heads the list). :func:`decide_verdict` decides it;
:func:`verdict_text` renders it for a terminal here, and :func:`toolkit.report.sections.verdict_html` renders
the same :class:`Verdict` as HTML (``toolkit/report/templates/verdict.html``).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Sequence

from toolkit.detectors.base import ERROR, FINDING_SEVERITIES, Finding
from toolkit.ingest import EMPTY, READABLE

#: The bundle held nothing the detectors could read: no finding is no all-clear.
NOTHING_READ = "nothing-read"
#: No finding in the report's scope, but warnings or worse outside it: no all-clear either.
OUT_OF_SCOPE = "out-of-scope"
#: Everything was read and no detector matched.
CLEAN = "clean"
#: At least one finding (a failed detector counts: it is listed, never the headline unless alone).
FOUND = "found"
OUTCOMES: tuple[str, ...] = (NOTHING_READ, OUT_OF_SCOPE, CLEAN, FOUND)

#: Severities of the findings outside a scope that withhold the scope's all-clear.
RAISED: tuple[str, ...] = ("critical", "warning")


@dataclass(frozen=True)
class Verdict:
    """What one run concludes, before it is rendered.

    ``findings`` are ranked (the runner's order), ``top`` the headline: the first finding that is not a failed
    detector (the first finding when all failed), ``None`` without findings. ``counts`` are (severity, number)
    in :data:`~toolkit.detectors.base.FINDING_SEVERITIES` order, ``error`` only when a detector failed.
    ``unread`` is the ingest's readability message (a clause, no full stop) when not everything was read,
    ``unread_status`` its status (``empty``, ``unreadable``). ``elsewhere`` are the warnings or worse the
    report's ``scope`` (its hosts and tasks, in words) leaves out.
    """

    outcome: str
    bundle: str
    findings: tuple[Finding, ...] = ()
    top: Finding | None = None
    counts: tuple[tuple[str, int], ...] = ()
    unread: str | None = None
    unread_status: str | None = None
    elsewhere: tuple[Finding, ...] = ()
    scope: str = ""

    @property
    def unread_sentence(self) -> str:
        """``unread`` as a sentence's start (capitalised, no full stop); empty when everything was read."""
        return self.unread[0].upper() + self.unread[1:] if self.unread else ""

    @property
    def nothing_collected(self) -> bool:
        """The bundle held no log file and no state evidence (rather than logs in a layout nobody reads)."""
        return self.unread_status == EMPTY

    @property
    def worst_elsewhere(self) -> Finding | None:
        """The first critical finding outside the scope, else the first warning; ``None`` when none."""
        return next((f for f in self.elsewhere if f.severity == "critical"), self.elsewhere[0] if self.elsewhere else None)


def decide_verdict(findings: Sequence[Finding], bundle: str = "", readability: dict[str, Any] | None = None,
                   outside: Sequence[Finding] = (), scope: str = "") -> Verdict:
    """The verdict on ranked ``findings`` of ``bundle``.

    ``readability`` (:meth:`toolkit.ingest.IngestReport.readability`, ``findings.json``'s ``ingest``): when not
    everything could be read, an empty result is ``nothing-read``, never ``clean``. ``outside``: findings the
    report's ``scope`` leaves out; warnings or worse among them make an empty result ``out-of-scope``.
    """
    readability = readability or {}
    unread = readability.get("message") if readability.get("status") not in (None, READABLE) else None
    findings = tuple(findings)
    common = dict(bundle=bundle, findings=findings, unread=unread,
                  unread_status=readability.get("status") if unread else None, scope=scope)
    if not findings:
        elsewhere = tuple(f for f in outside if f.severity in RAISED)
        outcome = NOTHING_READ if unread else OUT_OF_SCOPE if elsewhere else CLEAN
        return Verdict(outcome, elsewhere=elsewhere if outcome == OUT_OF_SCOPE else (), **common)
    counts = tuple((s, sum(f.severity == s for f in findings)) for s in FINDING_SEVERITIES
                   if s != ERROR or any(f.severity == ERROR for f in findings))
    top = next((f for f in findings if f.severity != ERROR), findings[0])
    return Verdict(FOUND, top=top, counts=counts, **common)


#: Width of ``detect``'s text output.
TEXT_WIDTH = 110


def verdict_text(verdict: Verdict) -> str:
    """The verdict for a terminal: what could not be read first, then the counts and every finding ranked with
    its explanation, evidence excerpts, impact, gaps, known bugs and playbook."""
    name = verdict.bundle or "the bundle"
    warning = [f"WARNING: {verdict.unread_sentence}.",
               "  The unparsed lines and every ingest problem: `stream-incident parse BUNDLE --out DIR` (ingest.json).",
               ""] if verdict.unread else []
    if verdict.outcome == NOTHING_READ:
        return "\n".join([*warning, f"No findings for {name}, because nothing could be read: this is no all-clear."]) + "\n"
    if verdict.outcome == OUT_OF_SCOPE:
        return (f"No findings for {name} in {verdict.scope or 'the scope'}; {len(verdict.elsewhere)} finding(s) "
                "elsewhere in the bundle.\n")
    if verdict.outcome == CLEAN:
        return f"No findings for {name}.\n"
    counts = ", ".join(f"{n} {s}" for s, n in verdict.counts)
    lines = [*warning, f"{len(verdict.findings)} finding(s) for {name}: {counts}", ""]
    for n, f in enumerate(verdict.findings, 1):
        lines += _finding_text(n, f)
    return "\n".join(lines)


def _finding_text(n: int, f: Finding) -> list[str]:
    wrap = textwrap.TextWrapper(width=TEXT_WIDTH, initial_indent="    ", subsequent_indent="    ")
    when = f.ts.strftime("%Y-%m-%d %H:%M:%S UTC") if f.ts else "time unknown"
    lines = [f"{n}. [{f.severity.upper()} / {f.confidence}] {f.title}",
             f"    detector {f.detector}; {when}; hosts {', '.join(f.hosts) or '-'}; tasks {', '.join(f.tasks) or '-'}"]
    lines += wrap.wrap(f.explanation)
    if f.evidence:
        lines.append("    evidence:")
        lines += [f"      {e.location()}  {e.text}" for e in f.evidence]
    if f.impact is not None:
        lines += textwrap.wrap(f"impact: {f.impact.summary}", width=TEXT_WIDTH, initial_indent="    ",
                               subsequent_indent="      ")
    if f.missing_evidence:
        lines.append("    missing evidence:")
        lines += [f"      - {m}" for m in f.missing_evidence]
    if f.known_bugs:
        lines.append("    known bugs:")
        lines += [f"      - {k}" for k in f.known_bugs]
    lines.append(f"    playbook: {f.playbook}")
    lines.append("")
    return lines
