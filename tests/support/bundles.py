"""The hand-built bundles of ``tests/bundles`` (see its README.md): their EXPECTED.json, which detector's test
module checks each one, and the checks of what must fire and what must stay quiet.

An incident bundle belongs to the first detector its EXPECTED.json expects; a bundle written to stay quiet
(a healthy twin, or an incident whose point is a look-alike) belongs to the detector named in ``TWIN_OF``.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from support import BUNDLES
from support.findings import RAISED

#: Every hand-built bundle.
NAMES = sorted(p.name for p in BUNDLES.iterdir() if (p / "EXPECTED.json").is_file()) if BUNDLES.is_dir() else []
#: The NiFi bundles, whose findings must also cite a log line or a state fact.
NIFI_NAMES = [name for name in NAMES if name.startswith("nifi-")]

#: Known open gaps: (test, bundle) -> what is still wrong. Strict: a gap that closes fails the run until it
#: is removed from here, so this list always says exactly what is left.
OPEN_GAPS: dict[tuple[str, str], str] = {}

#: The bundles written so that a detector stays quiet: bundle -> the detector it is the twin of.
TWIN_OF: dict[str, str] = {
    "eos-standby-host-oom-3.8.0-kafka-log4j": "eos-stale-restore-checkpoint",
    "healthy-alos-weekend-restart-offset-out-of-range-3.7.1-kafka-log4j": "eos-task-corruption-wipe",
    "healthy-eos-clean-restart-3.7.1-kubectl": "eos-stale-restore-checkpoint",
    "healthy-eos-scaleout-capture-3.7.1-springboot3": "eos-checkpoint-stale-during-running",
    "healthy-eos-thread-moves-2.0.1-log4j-info": "restore-skipped-after-reassignment",
    "healthy-first-deploy-alos-3.7.1-cri-node-logs": "alos-crash-reprocessing",
    "healthy-kip1071-alos-pod-restart-4.1.1-log4j2": "alos-crash-reprocessing",
    "healthy-kip1071-scale-out-in-4.1.1-log4j2": "rebalance-storm",
    "healthy-nifi-feed-decommission-2.10.0": "nifi-component-state-reset",
    "healthy-nifi-kinesis-2.10.0-reboot-dns-retry": "kinesis-checkpoint-migration-loss",
    "healthy-rebalance-storm-3.4.1-logback-ttll": "rebalance-storm",
    "healthy-rolling-restart-3.1.2-springboot2": "unclean-shutdown",
    "healthy-rolling-restart-4.1.1-streams-protocol-log4j2": "restore-from-scratch",
    "healthy-rolling-restart-lock-retries-8.1.0-ccs-docker": "lock-contention",
    "healthy-routine-cleanup-2.5.1-log4j2": "cleaner-races-assignment",
    "healthy-scaleout-probing-storm-3.7.1-log4j2": "rebalance-storm",
    "healthy-standby-moved-cleanup-3.6.2-logstash-json": "cleaner-races-assignment",
    "nifi-checkpoints-stopped-healthy": "nifi-checkpoints-stopped",
    "nifi-component-state-reset-healthy": "nifi-component-state-reset",
    "nifi-flowfile-repo-live-capture-2.9.0-healthy": "nifi-flowfile-repo-not-restored",
    "nifi-flowfile-repo-not-restored-healthy": "nifi-flowfile-repo-not-restored",
    "nifi-kinesis-2.10.0-node-restart-steady-debug": "kinesis-checkpoint-migration-loss",
    "nifi-kinesis-2.11.0-healthy-copy-retry": "kinesis-checkpoint-migration-loss",
    "nifi-kinesis-2.9.0-healthy-migration-restart": "kinesis-checkpoint-migration-loss",
    "nifi-upgrade-removed-components-1.28.1-2.9.0-healthy": "nifi-component-state-reset",
}

#: Raised findings an incident bundle may have beyond the expected ones.
EXTRA_ALLOWED = 3


def expected_of(name: str) -> dict:
    return json.loads((BUNDLES / name / "EXPECTED.json").read_text(encoding="utf-8"))


def detector_of(name: str) -> str | None:
    """The detector whose test module checks bundle ``name``: its twin's, else the first one it expects."""
    if name in TWIN_OF:
        return TWIN_OF[name]
    findings = expected_of(name).get("findings", [])
    return findings[0]["detector"] if findings else None


def cases_for(detector_id: str, test: str | None = None, names: list[str] = NAMES) -> list:
    """The bundles of ``detector_id`` among ``names``, each open gap of ``test`` marked as an expected (strict)
    failure."""
    return [pytest.param(name, marks=pytest.mark.xfail(reason=OPEN_GAPS[(test, name)], strict=True))
            if (test, name) in OPEN_GAPS else name for name in names if detector_of(name) == detector_id]


def cases(test: str) -> list:
    """Every bundle for one test, each open gap marked as an expected (strict) failure."""
    return [pytest.param(name, marks=pytest.mark.xfail(reason=OPEN_GAPS[(test, name)], strict=True))
            if (test, name) in OPEN_GAPS else name for name in NAMES]


def _raised(findings) -> list:
    return [f for f in findings if f.severity in RAISED]


def describe(findings) -> list[tuple]:
    return [(f.detector, f.severity, f.hosts, f.tasks, f.title) for f in findings]


def _covering(findings, want: dict) -> list:
    """Raised findings of the wanted detector that name one of the wanted hosts."""
    return [f for f in _raised(findings) if f.detector == want["detector"]
            and (not want.get("hosts") or set(f.hosts) & set(want["hosts"]))]


def check_expected_findings(findings, name: str) -> None:
    """Each finding EXPECTED.json lists fires on its hosts and names its tasks."""
    for want in expected_of(name).get("findings", []):
        covering = _covering(findings, want)
        assert covering, (want, describe(_raised(findings)))
        assert set(want.get("hosts") or []) <= {h for f in covering for h in f.hosts}, (want, describe(covering))
        assert set(want.get("tasks") or []) <= {t for f in covering for t in f.tasks}, (want, describe(covering))


def check_must_not(findings, name: str) -> None:
    """No detector on the bundle's ``must_not`` list raises a finding."""
    banned = set(expected_of(name).get("must_not", []))
    assert [x for x in describe(_raised(findings)) if x[0] in banned] == []


def check_few_extra(findings, name: str) -> None:
    """A healthy bundle raises nothing; an incident no more than ``EXTRA_ALLOWED`` unexpected findings."""
    expected = expected_of(name)
    raised = _raised(findings)
    if expected["kind"] == "healthy":
        assert describe(raised) == []
        return
    wanted = expected.get("findings", [])
    extra = [f for f in raised if not any(f in _covering(findings, w) for w in wanted)]
    assert len(extra) <= EXTRA_ALLOWED, describe(extra)


def check_findings_with_evidence(findings, name: str) -> None:
    """As EXPECTED.json says, each expected finding on all its hosts, with a log line or a state fact cited."""
    expected = expected_of(name)
    raised = [f for f in findings if f.severity in RAISED]
    if expected["kind"] == "healthy":
        assert raised == [], [(f.detector, f.title) for f in raised]
    for want in expected["findings"]:
        hits = [f for f in raised if f.detector == want["detector"] and set(want["hosts"]) <= set(f.hosts)]
        assert hits, (want, [(f.detector, f.title) for f in findings])
        assert all(f.evidence for f in hits)
        assert any(e.kind == "log" and e.line_no for f in hits for e in f.evidence) or any(
            e.kind == "state" for f in hits for e in f.evidence)
    for detector in expected["must_not"]:
        assert not [f for f in raised if f.detector == detector], detector


def bundle_tests(detector_id: str) -> tuple[Callable, Callable, Callable]:
    """The checks of ``detector_id``'s hand-built bundles and healthy twins, as test functions its test module
    binds to their names: the expected findings fire on their hosts and tasks, nothing on a must-not list fires,
    and no more than a few unexpected warnings."""

    @pytest.mark.parametrize("name", cases_for(detector_id, "expected"))
    def test_expected_findings_fire_on_their_hosts_and_tasks(bundle, name):
        _, findings = bundle(name)
        check_expected_findings(findings, name)

    @pytest.mark.parametrize("name", cases_for(detector_id, "must_not"))
    def test_nothing_on_the_must_not_list_fires(bundle, name):
        _, findings = bundle(name)
        check_must_not(findings, name)

    @pytest.mark.parametrize("name", cases_for(detector_id, "extra"))
    def test_no_more_than_a_few_unexpected_warnings(bundle, name):
        _, findings = bundle(name)
        check_few_extra(findings, name)

    return (test_expected_findings_fire_on_their_hosts_and_tasks, test_nothing_on_the_must_not_list_fires,
            test_no_more_than_a_few_unexpected_warnings)


def nifi_evidence_test(detector_id: str) -> Callable:
    """The check of ``detector_id``'s NiFi bundles that every finding is the expected one and cites a log line or a
    state fact, as a test function its test module binds to its name."""

    @pytest.mark.parametrize("name", cases_for(detector_id, names=NIFI_NAMES))
    def test_findings_match_expected(bundle, name):
        _, findings = bundle(name)
        check_findings_with_evidence(findings, name)

    return test_findings_match_expected
