"""Known-bug data and version verdicts (no Spark): the data file, the version comparator, and how a verdict reads
for an unknown version, a range, a vendor build, a pre-release or a design note. The verdicts of each detector's own
bugs are tested with the detector (``tests/detectors/``)."""

from __future__ import annotations

import pytest

from support.known_bugs import verdict
from toolkit.knowledge import bugs_for_detector, compare_versions, get_known_bug, load_known_bugs
from toolkit.knowledge.known_bugs import PRODUCTS
from toolkit.knowledge.versions import VersionError, parse_range, parse_version

REQUIRED_IDS = {"KAFKA-20685", "KAFKA-8187", "KAFKA-7672", "NIFI-16003", "KAFKA-10362", "KAFKA-12634",
                "KAFKA-16025", "KAFKA-12679", "KAFKA-6647", "NIFI-16066", "KAFKA-10199", "KAFKA-16017",
                "KIP-892", "KIP-1035", "NIFI-14392"}

DETECTOR_IDS = {"eos-stale-restore-checkpoint", "standby-lock-stale-checkpoint", "restore-skipped-after-reassignment",
                "alos-crash-reprocessing", "kinesis-checkpoint-migration-loss", "lock-contention",
                "restore-from-scratch", "eos-task-corruption-wipe", "unclean-shutdown", "cleaner-races-assignment",
                "rebalance-storm", "eos-checkpoint-stale-during-running", "nifi-component-state-reset"}


# --- the data file -------------------------------------------------------------------------------


def test_required_issues_are_present_once():
    ids = [b.id for b in load_known_bugs()]
    assert REQUIRED_IDS <= set(ids)
    assert len(ids) == len(set(ids))


@pytest.mark.parametrize("bug", load_known_bugs(), ids=lambda b: b.id)
def test_every_entry_is_complete(bug):
    assert bug.product in PRODUCTS
    assert bug.title and bug.url.startswith("https://") and bug.basis
    assert bug.detectors and set(bug.detectors) <= DETECTOR_IDS, bug.detectors
    if bug.kind == "bug":
        assert bug.affected, "a bug entry must say which versions it affects"
        assert bug.keywords
    for version in bug.fixed:
        # a fix version must not itself be inside an affected range
        key = parse_version(version).key
        assert not any(i.contains(key) for i in bug.affected), (bug.id, version)


def test_design_notes_are_not_bugs():
    assert get_known_bug("KIP-892").kind == "design"
    assert get_known_bug("KIP-1035").kind == "design"
    assert get_known_bug("KAFKA-10199").kind == "design"
    assert get_known_bug("NIFI-14392").kind == "design"


def test_bugs_for_detector_lists_bugs_before_design_notes():
    found = bugs_for_detector("eos-stale-restore-checkpoint")
    ids = [b.id for b in found]
    assert ids[0] == "KAFKA-20685"
    kinds = [b.kind for b in found]
    assert kinds == sorted(kinds, key=lambda k: k != "bug")
    assert [b.id for b in bugs_for_detector("kinesis-checkpoint-migration-loss")] == ["NIFI-16003", "NIFI-16066"]
    assert bugs_for_detector("no-such-detector") == []


# --- the comparator ------------------------------------------------------------------------------


@pytest.mark.parametrize("left,right,expected", [
    ("2.0.1", "2.0.1", 0),
    ("3.8", "3.8.0", 0),
    ("2.9.0", "2.10.0", -1),
    ("4.1.2", "4.1.10", -1),
    ("7.9.0-ccs", "7.9.0", 0),
    ("2.10.0-SNAPSHOT", "2.10.0", -1),
    ("3.9.0-rc3", "3.9.0", -1),
    ("3.9.0-rc3", "3.8.1", 1),
    ("v4.1.2", "4.1.2", 0),
])
def test_compare_versions(left, right, expected):
    assert compare_versions(left, right) == expected


def test_bad_versions_and_ranges_are_refused():
    with pytest.raises(VersionError):
        parse_version("banana")
    with pytest.raises(VersionError):
        parse_range(">=4.0,<3.0")


@pytest.mark.parametrize("text", ["1" * 5000 + "!", "4" * 70, "2.8.0+", "3.7.1-.x"])
def test_text_that_only_looks_like_a_version_is_refused(text):
    """A garbled banner (a long run of digits, a separator with nothing after it) is not a version: the
    refusal is a VersionError, and a digit is never moved from the number into a suffix (``2.8.0+`` is not
    2.8 with suffix ``0+``)."""
    with pytest.raises(VersionError):
        parse_version(text)


def test_versions_with_a_suffix_keep_all_their_numbers():
    assert parse_version("2.8.0cp1").numbers == (2, 8, 0) and parse_version("2.8.0cp1").suffix == "cp1"
    assert parse_version("3.7.1.ccs").numbers == (3, 7, 1)
    assert parse_version("1.2.3.4.5").numbers == (1, 2, 3, 4) and parse_version("1.2.3.4.5").suffix == "5"


def test_short_versions_cover_their_line():
    line = parse_range("==3.8")
    assert line.contains(parse_version("3.8.0").key) and line.contains(parse_version("3.8.9").key)
    assert not line.contains(parse_version("3.9.0").key)


# --- verdicts -----------------------------------------------------------------------------------


def test_unknown_version_cannot_tell():
    v = verdict("KAFKA-20685", None)
    assert v.status == "unknown"
    assert v.sentence.startswith("cannot tell: version unknown")
    assert verdict("KAFKA-8187", "not-a-version").status == "unknown"


def test_straddling_range_is_not_presented_as_fact():
    v = verdict("KAFKA-8187", None, ("2.1", "2.3"))
    assert v.status == "unknown"
    assert "straddles" in v.sentence and "cannot tell" in v.sentence
    assert " is affected by" not in v.sentence
    # the same for a bare major.minor that a fix landed inside
    assert verdict("KAFKA-8187", "2.2").status == "unknown"


def test_range_entirely_inside_one_status_is_decided():
    assert verdict("KAFKA-7672", None, ("2.1", "2.1")).status == "affected"
    # the mechanism exists from 2.0.1: a span reaching back to 1.1 straddles that boundary
    assert verdict("KAFKA-7672", None, ("1.1", "2.1")).status == "unknown"
    assert verdict("NIFI-16003", None, ("2.10.0", None)).status == "fixed"
    assert verdict("KAFKA-20685", "3.8").status == "affected"  # every 3.8.x


def test_confluent_builds_map_to_their_apache_line():
    v = verdict("KAFKA-20685", "7.9.0-ccs")
    assert v.status == "affected" and "Apache Kafka 3.9" in v.sentence
    assert verdict("KAFKA-20685", "8.3.0-ccs").status == "not_affected"  # Apache 4.3
    # CP 8.1.x ships Apache 4.1.x, whose fix landed in 4.1.3: the patch level is unknown
    assert verdict("KAFKA-20685", "8.1.2-ccs").status == "unknown"


def test_pre_release_of_a_fix_version_is_not_called_fixed_or_affected():
    assert verdict("NIFI-16003", "2.10.0-SNAPSHOT").status == "unknown"


def test_design_notes_read_as_in_effect():
    v = verdict("KIP-1035", "4.3.0")
    assert v.status == "affected" and "design change" in v.sentence and "in effect" in v.sentence
    assert verdict("KIP-1035", "4.2.0").status == "not_affected"
    assert verdict("KAFKA-10199", "3.8.0").status == "affected"
