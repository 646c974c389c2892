"""Parse Kafka Streams ``OffsetCheckpoint`` files (``.checkpoint``, ``.checkpoint_<store>``, ``<store>.position``).

The rules follow ``OffsetCheckpoint#read`` (2.6+), so a file this parser rejects is one Kafka itself would
fail to read: version line ``0``, a count line, then exactly that many ``topic partition offset`` lines
split on whitespace. Offsets must be >= 0 or the ``-4`` sentinel; Kafka drops other negatives with
``Read offset={} from checkpoint file for {}`` (and 1.1-2.5 accepted them silently), so they are kept as
rows with a problem instead of failing the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: ``OffsetCheckpoint.OFFSET_UNKNOWN``: store logged and persistent, offset not known yet (2.6+).
OFFSET_UNKNOWN = -4
SENTINELS = {OFFSET_UNKNOWN: "OFFSET_UNKNOWN"}
_WHITESPACE = re.compile(r"\s+")
_INT = re.compile(r"^[+-]?\d+$")
MAX_CHECKPOINT_BYTES = 1 << 20


@dataclass(frozen=True)
class CheckpointEntry:
    topic: str
    partition: int
    offset: int
    problem: str | None = None  # set for an invalid negative offset

    @property
    def sentinel(self) -> str | None:
        return SENTINELS.get(self.offset)


@dataclass
class ParsedCheckpoint:
    """Entries of a readable file, or ``problem`` (and no entries) when Kafka could not read it either."""

    entries: list[CheckpointEntry] = field(default_factory=list)
    problem: str | None = None


def parse_offset_checkpoint(data: bytes) -> ParsedCheckpoint:
    """Parse the bytes of a checkpoint-format file; never raises."""
    if not data:
        return ParsedCheckpoint(problem="empty file (Kafka: File ended prematurely)")
    if len(data) > MAX_CHECKPOINT_BYTES:
        return ParsedCheckpoint(problem=f"file of {len(data)} bytes is too large to be a checkpoint")
    if b"\0" in data:
        return ParsedCheckpoint(problem="binary content (NUL bytes), not a checkpoint file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return ParsedCheckpoint(problem=f"not UTF-8 text at byte {exc.start}")
    # Java's BufferedReader#readLine splits on \n, \r\n and \r, and a final newline ends the last line.
    lines = text.splitlines()
    if not lines:
        return ParsedCheckpoint(problem="empty file (Kafka: File ended prematurely)")
    version_text = lines[0].strip()
    if not _INT.match(version_text):
        return ParsedCheckpoint(problem=f"version line is not a number: {lines[0][:80]!r}")
    if int(version_text) != 0:
        return ParsedCheckpoint(problem=f"Unknown offset checkpoint version: {int(version_text)}")
    if len(lines) < 2:
        return ParsedCheckpoint(problem="truncated: no entry count line (Kafka: File ended prematurely)")
    count_text = lines[1].strip()
    if not _INT.match(count_text):
        return ParsedCheckpoint(problem=f"entry count line is not a number: {lines[1][:80]!r}")
    expected = int(count_text)

    entries: list[CheckpointEntry] = []
    valid: dict[tuple[str, int], int] = {}
    dropped = 0
    for line in lines[2:]:
        pieces = _WHITESPACE.split(line)
        if len(pieces) != 3 or not _INT.match(pieces[1]) or not _INT.match(pieces[2]):
            return ParsedCheckpoint(problem=f"Malformed line in offset checkpoint file: '{line[:200]}'.")
        topic, partition, offset = pieces[0], int(pieces[1]), int(pieces[2])
        if not -(2**31) <= partition < 2**31 or not -(2**63) <= offset < 2**63:
            return ParsedCheckpoint(problem=f"Malformed line in offset checkpoint file: '{line[:200]}'.")
        if offset >= 0 or offset == OFFSET_UNKNOWN:
            valid[(topic, partition)] = offset
            entries.append(CheckpointEntry(topic, partition, offset))
        else:
            dropped += 1
            entries.append(
                CheckpointEntry(
                    topic,
                    partition,
                    offset,
                    problem=f"invalid negative offset {offset} (Kafka 2.6+ ignores the entry: "
                    f"Read offset={offset} from checkpoint file for {topic}-{partition})",
                )
            )
    # Kafka lowers the expected count for each dropped entry, then compares with the distinct partitions kept.
    if len(valid) != expected - dropped:
        found = len(valid)
        return ParsedCheckpoint(problem=f"Expected {expected - dropped} entries but found only {found}")
    return ParsedCheckpoint(entries=entries)
