"""The verdict, decided once (``toolkit.detectors.verdict``) and rendered twice: ``detect``'s text and the report's
first screen say the same thing about the same findings."""

from __future__ import annotations

import pytest

from toolkit.detect import format_text
from toolkit.detectors.base import Finding
from toolkit.detectors.verdict import CLEAN, FOUND, NOTHING_READ, OUT_OF_SCOPE, decide_verdict, verdict_text
from toolkit.report.sections import verdict_html

UNREADABLE = {"status": "unreadable", "message": "3 of 3 log lines could not be read (unknown layout), so no log "
                                                "event could be checked"}
EMPTY = {"status": "empty", "message": "no log file and no state evidence found in the bundle"}
READ = {"status": "ok", "message": None}


def _finding(detector: str, severity: str, title: str = "", **kw) -> Finding:
    return Finding(detector=detector, severity=severity, confidence="likely", title=title or f"{detector} {severity}",
                   explanation="because", **kw)


CRITICAL = _finding("eos-stale-restore-checkpoint", "critical", "orders-agg-0: <EOS> restart trusted a checkpoint",
                    hosts=["orders-agg-0"], tasks=["0_0"])
FAILED = _finding("lock-contention", "error", "detector lock-contention failed: ValueError: x")
INFO = _finding("restore-from-scratch", "info")


@pytest.mark.parametrize(("findings", "readability", "outside", "outcome"), [
    ([], None, (), CLEAN),
    ([], READ, (), CLEAN),
    ([], UNREADABLE, (), NOTHING_READ),
    ([], EMPTY, (CRITICAL,), NOTHING_READ),
    ([], None, (CRITICAL,), OUT_OF_SCOPE),
    ([], None, (INFO,), CLEAN),  # an info finding elsewhere does not withhold the scope's all-clear
    ([FAILED], UNREADABLE, (), FOUND),
])
def test_the_outcome(findings, readability, outside, outcome):
    assert decide_verdict(findings, "b", readability, outside=outside, scope="hosts h9").outcome == outcome


def test_a_failed_detector_is_listed_and_never_the_headline_while_a_diagnosis_exists():
    verdict = decide_verdict([CRITICAL, FAILED], "b")
    assert verdict.top is CRITICAL and verdict.counts == (("critical", 1), ("warning", 0), ("info", 0), ("error", 1))
    assert decide_verdict([FAILED], "b").top is FAILED
    # no detector failed: no error count at all
    assert [s for s, _ in decide_verdict([INFO], "b").counts] == ["critical", "warning", "info"]


def test_text_and_html_agree_on_what_could_not_be_read():
    text, page = format_text([], "b", UNREADABLE), verdict_html([], "b", UNREADABLE)
    assert "this is no all-clear" in text and "no all-clear" in page
    assert "3 of 3 log lines could not be read" in text and "3 of 3 log lines could not be read" in page
    assert "Verdict: nothing could be checked" in page and "no known incident pattern" not in page
    assert "collect the pods' logs" in verdict_html([], "b", EMPTY) and "collect the pods' logs" not in page
    # with findings, both still say so, and both put the same finding first
    text, page = format_text([CRITICAL, FAILED], "b", UNREADABLE), verdict_html([CRITICAL, FAILED], "b", UNREADABLE)
    assert text.startswith("WARNING: 3 of 3 log lines") and "<b>Note:</b> 3 of 3 log lines" in page
    assert text.index(CRITICAL.title) < text.index(FAILED.title)
    assert "Verdict · critical · likely" in page


def test_the_html_escapes_what_findings_say():
    page = verdict_html([CRITICAL], "bundle <1>")
    assert "&lt;EOS&gt;" in page and "<EOS>" not in page and "Incident report: bundle &lt;1&gt;" in page


def test_detect_text_is_rendered_from_the_verdict():
    verdict = decide_verdict([CRITICAL, INFO], "b")
    assert format_text([CRITICAL, INFO], "b") == verdict_text(verdict)
    assert verdict_text(verdict).startswith("2 finding(s) for b: 1 critical, 0 warning, 1 info\n")
    assert format_text([], "b") == "No findings for b.\n"
