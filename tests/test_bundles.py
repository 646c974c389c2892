"""The hand-built bundles (``tests/bundles/*/EXPECTED.json``) as a set: no detector fails on any of them, each
process run ends where, how and on the version the bundle says, and each belongs to the test module of one
detector (``tests/detectors/``), which checks what must fire and what must stay quiet.

Every bundle is analysed once per test session (the ``bundle`` fixture) and its detectors run once.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from support.bundles import NAMES, NIFI_NAMES, TWIN_OF, cases, detector_of, expected_of
from toolkit.detectors import ERROR, registered_detectors
from toolkit.knowledge.versions import compare_versions, parse_version

END_TOLERANCE = timedelta(seconds=5)


def utc(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(tzinfo=None)


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


@pytest.mark.parametrize("name", NAMES)
def test_no_detector_fails(bundle, name):
    _, findings = bundle(name)
    assert [f.title for f in findings if f.severity == ERROR] == []


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


def test_there_is_an_incident_and_a_twin_per_detector():
    kinds = {name: expected_of(name)["kind"] for name in NIFI_NAMES}
    for detector in ("nifi-component-state-reset", "nifi-flowfile-repo-not-restored", "nifi-checkpoints-stopped"):
        assert kinds[detector] == "incident" and kinds[f"{detector}-healthy"] == "healthy"


@pytest.mark.parametrize("name", NIFI_NAMES)
def test_runs_match_expected(bundle, name):
    analysis, _ = bundle(name)
    runs = analysis.timeline.process_runs.orderBy("host", "run_no").collect()
    got = [(r.host, _iso(r.start), _iso(r.end), r.end_kind) for r in runs]
    want = [(r["host"], r["start"], r["end"], r["end_kind"]) for r in expected_of(name)["runs"]]
    assert got == want
    # 1.x prints no version in nifi-app.log ('Launching NiFi...'): the run's version is unknown, never a wrong one
    for run, expected in zip(runs, expected_of(name)["runs"]):
        assert run.version in (None, expected["version"])


def _iso(value) -> str | None:
    if value is None:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="milliseconds") + "Z"


def test_every_bundle_belongs_to_one_detector_it_names():
    """An incident belongs to the first detector it expects; a twin to a detector on its must_not list."""
    detectors = set(registered_detectors())
    for name in NAMES:
        expected = expected_of(name)
        assert detector_of(name) in detectors, name
        if name in TWIN_OF:
            assert TWIN_OF[name] in expected["must_not"], name
        else:
            assert expected["kind"] == "incident" and expected["findings"], name
    assert set(TWIN_OF) <= set(NAMES)
