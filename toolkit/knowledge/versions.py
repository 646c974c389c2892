"""A tiny version comparator and range algebra for known-bug verdicts.

Nothing here knows about bugs: it turns version texts (``2.0.1``, ``3.8``, ``4.1.2``,
``7.9.0-ccs``, ``2.10.0-SNAPSHOT``) and range texts (``>=3.8,<4.3``, ``==2.0.1``) into
half-open intervals over a totally ordered key, so that "is this version inside that range"
and "which statuses does this span of versions touch" become plain comparisons.

Why not ``packaging.version``: it is not a declared dependency, and it rejects vendor
suffixes such as Confluent's ``-ccs`` builds, which are exactly what incident logs show.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# A key is a tuple compared lexicographically: four numeric components, then 0 for a
# pre-release (rc, SNAPSHOT, alpha...) or 1 for a release, then a tie-break.  The empty tuple
# sorts below every key; (inf,) above every key.
Key = tuple
LOWEST: Key = ()
HIGHEST: Key = (float("inf"),)

# Possessive digits: the suffix may start with a digit too, and backtracking between the two made a long
# run of digits that is not a version take minutes.
_VERSION_RE = re.compile(r"^\s*v?(?P<nums>\d++(?:\.\d++){0,3}+)(?:[-._+]?(?P<suffix>[0-9A-Za-z][0-9A-Za-z.\-_+]*))?\s*$")
#: No version text is longer (``3.7.1-ccs``, ``2.10.0-SNAPSHOT``, a build's long suffix): longer text is not one.
MAX_VERSION_CHARS = 64
# Suffixes that mean "before the release of the same number".  Any other suffix (ccs, cp1,
# a distro build tag) is a build *of* that release and compares equal to it.
_PRERELEASE_RE = re.compile(r"^(rc|snapshot|alpha|beta|m|milestone|pre|dev|ea)\d*", re.IGNORECASE)
_CONFLUENT_RE = re.compile(r"(^|[-.])(ccs|cp\d*|ce)($|[-.])", re.IGNORECASE)


class VersionError(ValueError):
    """A version or range text that cannot be read."""


@dataclass(frozen=True)
class Version:
    """A parsed version.

    ``numbers`` holds the numeric components as written (``3.8`` keeps two); ``precision``
    is their count, so ``3.8`` can be read as "some 3.8.x" rather than as 3.8.0.
    """

    text: str
    numbers: tuple[int, ...]
    suffix: str = ""

    @property
    def precision(self) -> int:
        """How many numeric components were written (2 for ``3.8``, 3 for ``4.1.2``)."""
        return len(self.numbers)

    @property
    def is_prerelease(self) -> bool:
        """True for ``-rc1``, ``-SNAPSHOT`` and the like: they sort before the release."""
        return bool(self.suffix) and bool(_PRERELEASE_RE.match(self.suffix))

    @property
    def is_confluent_build(self) -> bool:
        """True for Confluent Platform artifacts (``7.9.0-ccs``), whose numbers are CP numbers."""
        return bool(self.suffix) and bool(_CONFLUENT_RE.search(self.suffix))

    @property
    def key(self) -> Key:
        """The comparison key of exactly this version (missing components read as 0)."""
        padded = (self.numbers + (0, 0, 0, 0))[:4]
        return padded + (0 if self.is_prerelease else 1,)

    def __str__(self) -> str:
        return self.text


def parse_version(text: str) -> Version:
    """Parse ``2.0.1``, ``3.8``, ``7.9.0-ccs``, ``2.10.0-SNAPSHOT``, ``v4.1.2``.

    Raises :class:`VersionError` for text without a leading number.
    """
    match = _VERSION_RE.match(text or "") if len(text or "") <= MAX_VERSION_CHARS else None
    if not match:
        raise VersionError(f"not a version: {text!r}")
    numbers = tuple(int(part) for part in match.group("nums").split("."))
    return Version(text=text.strip(), numbers=numbers, suffix=match.group("suffix") or "")


def compare_versions(left: str, right: str) -> int:
    """-1, 0 or 1 as ``left`` sorts before, equal to, or after ``right``.

    ``3.8`` equals ``3.8.0``; ``2.10.0-rc1`` sorts before ``2.10.0``; ``7.9.0-ccs`` equals
    ``7.9.0`` (the suffix names a build, not an earlier version).
    """
    a, b = parse_version(left).key, parse_version(right).key
    return (a > b) - (a < b)


def just_above(key: Key) -> Key:
    """The smallest key greater than ``key`` (no real version lies strictly between them)."""
    return key + (1,)


def line_start_key(numbers: tuple[int, ...]) -> Key:
    """The lowest key of a version line: ``(3, 8)`` -> 3.8.0 (its pre-releases are not "a 3.8")."""
    return (numbers + (0, 0, 0, 0))[:4] + (1,)


def line_end_key(numbers: tuple[int, ...]) -> Key:
    """The first key after a version line: ``(3, 8)`` -> the first 3.9.0 pre-release."""
    bumped = numbers[:-1] + (numbers[-1] + 1,)
    return (bumped + (0, 0, 0, 0))[:4] + (0,)


def span_of(version: Version) -> tuple[Key, Key]:
    """The half-open key interval a written version stands for.

    A fully written version (three or more numbers) stands for itself.  A shorter one stands
    for its whole line: ``3.8`` means "some 3.8.x", which matters when a fix landed in 3.8.2.
    """
    if version.precision >= 3:
        return version.key, just_above(version.key)
    return line_start_key(version.numbers), line_end_key(version.numbers)


@dataclass(frozen=True)
class Interval:
    """A half-open interval ``[low, high)`` of keys, with the text it came from."""

    low: Key
    high: Key
    text: str

    def contains(self, key: Key) -> bool:
        """True when ``key`` lies inside the interval."""
        return self.low <= key < self.high

    def describe(self) -> str:
        """The interval in words: ``3.8.0 to before 4.3``, ``2.0.1``, ``before 2.0``."""
        return _describe_range_text(self.text)


_CONSTRAINT_RE = re.compile(r"^\s*(>=|<=|==|>|<|=)?\s*(\S+)\s*$")


def parse_range(text: str) -> Interval:
    """Parse a comma-joined set of constraints into one interval.

    Accepted constraints: ``>=x``, ``>x``, ``<x``, ``<=x``, ``==x`` (or a bare ``x``).
    A bare or ``==`` version with fewer than three numbers covers its line (``==3.8`` is any
    3.8.x).  Examples: ``>=3.8,<4.3``, ``==2.0.1``, ``<2.0``, ``>=4.3``.
    """
    low, high = LOWEST, HIGHEST
    parts = [p for p in text.split(",") if p.strip()]
    if not parts:
        raise VersionError(f"empty range: {text!r}")
    for part in parts:
        match = _CONSTRAINT_RE.match(part)
        if not match:
            raise VersionError(f"bad constraint {part!r} in range {text!r}")
        op, version = match.group(1) or "==", parse_version(match.group(2))
        if op in ("==", "="):
            start, end = span_of(version)
            low, high = max(low, start), min(high, end)
        elif op == ">=":
            low = max(low, version.key)
        elif op == ">":
            low = max(low, span_of(version)[1])
        elif op == "<":
            high = min(high, version.key)
        elif op == "<=":
            high = min(high, span_of(version)[1])
    if not low < high:
        raise VersionError(f"range {text!r} contains no version")
    return Interval(low=low, high=high, text=text.strip())


def _describe_range_text(text: str) -> str:
    lower = upper = exact = None
    for part in (p.strip() for p in text.split(",") if p.strip()):
        match = _CONSTRAINT_RE.match(part)
        op, version = (match.group(1) or "=="), match.group(2)
        if op in ("==", "="):
            exact = version
        elif op in (">=", ">"):
            lower = version if op == ">=" else f"after {version}"
        else:
            upper = f"before {version}" if op == "<" else f"up to {version}"
    if exact:
        return exact if "." in exact and exact.count(".") >= 2 else f"{exact}.x"
    if lower and upper:
        return f"{lower} to {upper}"
    if lower:
        return f"{lower} and later" if not lower.startswith("after") else lower
    return upper or text


@dataclass(frozen=True)
class Span:
    """The versions a caller believes the product runs: one version, or a span of them."""

    low: Key
    high: Key
    text: str
    exact: bool

    @staticmethod
    def of_version(version: Version, display: str | None = None) -> "Span":
        """A span for one written version (a whole line when only ``major.minor`` is given)."""
        low, high = span_of(version)
        return Span(low=low, high=high, text=display or version.text, exact=version.precision >= 3)

    @staticmethod
    def between(low_text: str | None, high_text: str | None) -> "Span":
        """A span between two written versions, both ends included.

        An end given as ``major.minor`` includes its whole line: ``("2.6", "3.6")`` covers
        2.6.0 through every 3.6.x.  ``None`` leaves that end open.
        """
        low = span_of(parse_version(low_text))[0] if low_text else LOWEST
        high = span_of(parse_version(high_text))[1] if high_text else HIGHEST
        if not low < high:
            raise VersionError(f"empty version span {low_text!r}..{high_text!r}")
        text = f"{low_text or 'any'}–{high_text or 'any later'}"
        return Span(low=low, high=high, text=text, exact=False)


# Confluent Platform numbers its Kafka artifacts with its own release numbers
# (kafka-streams 7.9.0-ccs is Apache Kafka 3.9.x).  The minor line maps one to one;
# patch levels do not, so only the Apache line is derived.
_CP_MAJOR_TO_APACHE: dict[int, tuple[int, int]] = {
    # CP major: (Apache major, offset added to the CP minor)
    4: (1, 0),   # CP 4.0 -> AK 1.0, 4.1 -> 1.1
    5: (2, 0),   # CP 5.0 -> AK 2.0 ... 5.5 -> 2.5
    6: (2, 6),   # CP 6.0 -> AK 2.6, 6.1 -> 2.7, 6.2 -> 2.8
    7: (3, 0),   # CP 7.0 -> AK 3.0 ... 7.9 -> 3.9
    8: (4, 0),   # CP 8.0 -> AK 4.0 ... 8.3 -> 4.3
}


def apache_kafka_line(version: Version) -> tuple[int, int] | None:
    """The Apache Kafka ``(major, minor)`` line a Confluent Platform version ships, if known.

    Applies to versions marked as Confluent builds (``-ccs``/``-cp``/``-ce``) and to bare
    versions whose major number Apache Kafka never used (5 and above).
    """
    if len(version.numbers) < 2:
        return None
    major, minor = version.numbers[0], version.numbers[1]
    if not (version.is_confluent_build or major >= 5):
        return None
    mapping = _CP_MAJOR_TO_APACHE.get(major)
    if mapping is None:
        return None
    apache_major, offset = mapping
    return apache_major, minor + offset
