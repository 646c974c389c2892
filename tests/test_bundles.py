"""The hand-built incident bundles (``tests/bundles/*/EXPECTED.json``): what must fire, what must not, and
where each process run ends, how, and on which version.

Every bundle is analysed once per test session (``analysis_of``) and its detectors run once.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from support import BUNDLES
from toolkit.detectors import ERROR
from toolkit.knowledge.versions import compare_versions, parse_version

NAMES = sorted(p.name for p in BUNDLES.iterdir() if (p / "EXPECTED.json").is_file()) if BUNDLES.is_dir() else []

#: Known open gaps: (test, bundle) -> what is still wrong. Strict: a gap that closes fails the run until it
#: is removed from here, so this list always says exactly what is left.
OPEN_GAPS: dict[tuple[str, str], str] = {}


def cases(test: str) -> list:
    """The bundle names for one test, each open gap marked as an expected (strict) failure."""
    return [pytest.param(name, marks=pytest.mark.xfail(reason=OPEN_GAPS[(test, name)], strict=True))
            if (test, name) in OPEN_GAPS else name for name in NAMES]
RAISED = ("critical", "warning")
EXTRA_ALLOWED = 3
END_TOLERANCE = timedelta(seconds=5)


def expected_of(name: str) -> dict:
    return json.loads((BUNDLES / name / "EXPECTED.json").read_text(encoding="utf-8"))


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


@pytest.fixture(scope="session")
def bundle(detected):
    """``bundle(name) -> (analysis, findings)`` of a bundle in tests/bundles (``detected`` in conftest.py)."""
    return lambda name: detected(f"bundles/{name}")


def _raised(findings):
    return [f for f in findings if f.severity in RAISED]


def _describe(findings) -> list[tuple]:
    return [(f.detector, f.severity, f.hosts, f.tasks, f.title) for f in findings]


def _covering(findings, want: dict) -> list:
    """Raised findings of the wanted detector that name one of the wanted hosts."""
    return [f for f in _raised(findings) if f.detector == want["detector"]
            and (not want.get("hosts") or set(f.hosts) & set(want["hosts"]))]


@pytest.mark.parametrize("name", NAMES)
def test_no_detector_fails(bundle, name):
    _, findings = bundle(name)
    assert [f.title for f in findings if f.severity == ERROR] == []


@pytest.mark.parametrize("name", cases("expected"))
def test_expected_findings_fire_on_their_hosts_and_tasks(bundle, name):
    _, findings = bundle(name)
    for want in expected_of(name).get("findings", []):
        covering = _covering(findings, want)
        assert covering, (want, _describe(_raised(findings)))
        assert set(want.get("hosts") or []) <= {h for f in covering for h in f.hosts}, (want, _describe(covering))
        assert set(want.get("tasks") or []) <= {t for f in covering for t in f.tasks}, (want, _describe(covering))


@pytest.mark.parametrize("name", cases("must_not"))
def test_nothing_on_the_must_not_list_fires(bundle, name):
    _, findings = bundle(name)
    banned = set(expected_of(name).get("must_not", []))
    assert [x for x in _describe(_raised(findings)) if x[0] in banned] == []


@pytest.mark.parametrize("name", cases("extra"))
def test_no_more_than_a_few_unexpected_warnings(bundle, name):
    expected = expected_of(name)
    _, findings = bundle(name)
    raised = _raised(findings)
    if expected["kind"] == "healthy":
        assert _describe(raised) == []
        return
    wanted = expected.get("findings", [])
    extra = [f for f in raised if not any(f in _covering(findings, w) for w in wanted)]
    assert len(extra) <= EXTRA_ALLOWED, _describe(extra)


def _minor(text: str) -> tuple[int, int]:
    numbers = parse_version(text).numbers
    return numbers[0], (numbers[1] if len(numbers) > 1 else 0)


def version_fits(true: str, version: str | None, version_range: str | None, printed: bool = True) -> bool:
    """The run's version equals the true one, or its range (no wider than one minor line) holds it. When no
    line of the run names its version (``printed`` false), a closed range that holds it is all the log allows."""
    if version:
        return compare_versions(version, true) == 0
    if not version_range or not version_range[:1].isdigit():
        return False
    low, _, high = version_range.partition("-")
    high = high or low
    if not printed:
        return high[:1].isdigit() and _minor(low) <= _minor(true) <= _minor(high)
    return _minor(low) == _minor(high) == _minor(true)


@pytest.mark.parametrize("name", cases("runs"))
def test_runs_end_where_and_how_the_bundle_says(bundle, name):
    analysis, _ = bundle(name)
    runs = [r.asDict() for r in analysis.timeline.process_runs.collect()]
    for want in expected_of(name).get("runs", []):
        end = utc(want["end"])
        same = [r for r in runs if r["host"] == want["host"] and r["end"] is not None
                and abs(r["end"] - end) <= END_TOLERANCE]
        shown = [(r["run_no"], str(r["start"]), str(r["end"]), r["end_kind"], r["version"], r["version_range"])
                 for r in runs if r["host"] == want["host"]]
        assert same, (want, shown)
        assert any(r["end_kind"] == want["end_kind"] for r in same), (want, shown)
        assert any(r["end_kind"] == want["end_kind"]
                   and version_fits(want["version"], r["version"], r["version_range"], want.get("version_printed", True))
                   for r in same), (want, shown)
