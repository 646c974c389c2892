"""Writes NiFi write-ahead-log files byte for byte as NiFi's own serialization code does (tests only).

Field order and encodings follow ``apache/nifi`` at ``rel/nifi-1.28.1`` and ``rel/nifi-2.9.0``:

* ``org.apache.nifi.controller.state.StateMapSerDe.serializeRecord`` (1.x and 2.x alike): component id
  (``writeUTF``), update type name (``writeUTF``), then unless ``DELETE``: state version (``writeLong``),
  entry count (``writeInt``) and per entry has-key (``writeBoolean``), key (``writeUTF``), has-value, value.
* ``org.apache.nifi.wali.HashMapSnapshot.writeSnapshot`` (2.x ``checkpoint``): class name, encoding version 1,
  serde class name, serde version, max transaction id (``writeLong``), record count (``writeInt``), the
  serde's header, the records, swap location count and each location (``writeUTF``).
* ``org.apache.nifi.wali.LengthDelimitedJournal.writeHeader`` / ``update`` / ``close``: class name, encoding
  version 1, serde class name, serde version, serde header length (``writeInt``) and bytes; per transaction
  the byte 64, transaction id (8 bytes) and length (4 bytes) then the serialized records; 127 on a clean close.
* ``org.wali.MinimalLockingWriteAheadLog`` (1.x local state): ``checkpoint`` writes class name, version 1,
  serde class, serde version, max transaction id, record count, records, swap count, swaps into ``snapshot``;
  each ``partition-<n>/<n>.journal`` starts with class name, version, serde class, serde version, and holds per
  transaction the id (``writeLong``) and each record followed by 1 (continue) or 2 (commit).

Java's ``DataOutputStream`` is big-endian; ``writeUTF`` is a 2-byte length and modified UTF-8.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Iterable, Sequence

HASHMAP_SNAPSHOT = "org.apache.nifi.wali.HashMapSnapshot"
LENGTH_DELIMITED_JOURNAL = "org.apache.nifi.wali.LengthDelimitedJournal"
MINIMAL_LOCKING = "org.wali.MinimalLockingWriteAheadLog"
STATE_MAP_SERDE = "org.apache.nifi.controller.state.StateMapSerDe"
FLOWFILE_SERDE = "org.apache.nifi.controller.repository.SchemaRepositoryRecordSerde"

#: (component id, update type, state version, {key: value}) - version/entries ignored for DELETE.
StateRecord = tuple[str, str, int, dict]


def java_utf(text: str) -> bytes:
    """``DataOutputStream.writeUTF``: NUL as C0 80, characters beyond the BMP as two 3-byte surrogates."""
    out = bytearray()
    for unit in struct.unpack(f">{len(text.encode('utf-16-be')) // 2}H", text.encode("utf-16-be")):
        if 0x01 <= unit <= 0x7F:
            out.append(unit)
        elif unit <= 0x7FF:
            out += bytes((0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)))
        else:
            out += bytes((0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)))
    return struct.pack(">H", len(out)) + bytes(out)


def state_record(record: StateRecord) -> bytes:
    component_id, update_type, version, entries = record
    out = java_utf(component_id) + java_utf(update_type)
    if update_type == "DELETE":
        return out
    out += struct.pack(">qi", version, len(entries))
    for key, value in entries.items():
        out += struct.pack(">?", key is not None) + (java_utf(key) if key is not None else b"")
        out += struct.pack(">?", value is not None) + (java_utf(value) if value is not None else b"")
    return out


def _header(wal_class: str, serde: str, serde_version: int) -> bytes:
    return java_utf(wal_class) + struct.pack(">i", 1) + java_utf(serde) + struct.pack(">i", serde_version)


def hashmap_snapshot(records: Sequence[bytes], max_transaction_id: int, *, serde: str = STATE_MAP_SERDE,
                     serde_version: int = 0, serde_header: bytes = b"", swaps: Iterable[str] = ()) -> bytes:
    """2.x ``checkpoint`` file; ``records`` are already serialized by the serde."""
    swaps = list(swaps)
    return (_header(HASHMAP_SNAPSHOT, serde, serde_version) + struct.pack(">qi", max_transaction_id, len(records))
            + serde_header + b"".join(records) + struct.pack(">i", len(swaps)) + b"".join(java_utf(s) for s in swaps))


def length_delimited_journal(transactions: Sequence[tuple[int, bytes]], *, closed: bool = True,
                             serde: str = STATE_MAP_SERDE, serde_version: int = 0, serde_header: bytes = b"") -> bytes:
    """2.x ``journals/<first id>.journal``; each transaction is (id, serialized records)."""
    out = _header(LENGTH_DELIMITED_JOURNAL, serde, serde_version) + struct.pack(">i", len(serde_header)) + serde_header
    for transaction_id, body in transactions:
        out += bytes([64]) + struct.pack(">qi", transaction_id, len(body)) + body
    return out + (bytes([127]) if closed else b"")


def minimal_locking_snapshot(records: Sequence[StateRecord], max_transaction_id: int) -> bytes:
    """1.x local state ``snapshot``."""
    return (_header(MINIMAL_LOCKING, STATE_MAP_SERDE, 0) + struct.pack(">qi", max_transaction_id, len(records))
            + b"".join(state_record(r) for r in records) + struct.pack(">i", 0))


def minimal_locking_journal(transactions: Sequence[tuple[int, Sequence[StateRecord]]]) -> bytes:
    """1.x ``partition-<n>/<n>.journal``."""
    out = _header(MINIMAL_LOCKING, STATE_MAP_SERDE, 0)
    for transaction_id, records in transactions:
        out += struct.pack(">q", transaction_id)
        for index, record in enumerate(records):
            out += state_record(record) + bytes([2 if index == len(records) - 1 else 1])
    return out


def write(path: Path, data: bytes, mtime: float | None = None) -> Path:
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path
