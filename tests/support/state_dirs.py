"""Kafka Streams state directories as 2.1, 2.8, 3.8 and 4.3 leave them on disk (``.checkpoint`` files,
process metadata, RocksDB folders), with exact mtimes, and one full of malformed files."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

# 2026-04-08T09:00:00Z plus sub-second parts, so tests prove microsecond mtimes survive.
T0_NS = 1_775_638_800_000_000_000
PROCESS_ID = "5e2c1a7e-3d4b-4c55-9a0e-7f3b2c1d0e9f"
OPTIONS_43 = b"""[Version]
  rocksdb_version=9.7.3
[DBOptions]
  create_if_missing=true
[CFOptions "default"]
  comparator=leveldb.BytewiseComparator
[CFOptions "keyValueWithTimestamp"]
  comparator=leveldb.BytewiseComparator
[CFOptions "offsets"]
  comparator=leveldb.BytewiseComparator
"""
OPTIONS_OLD = b'[Version]\n  rocksdb_version=7.9.2\n[CFOptions "default"]\n[CFOptions "keyValueWithTimestamp"]\n'


def at(seconds: float, micros: int = 0) -> int:
    """T0 plus ``seconds`` and ``micros``, in nanoseconds (plus 789 ns that Spark's microseconds drop)."""
    return T0_NS + int(seconds * 1_000_000_000) + micros * 1000 + 789


def utc(ns: int) -> datetime:
    from toolkit.state.timeutil import from_ns

    return from_ns(ns)


def rocksdb_files(prefix: str, t: int, options: bytes = OPTIONS_OLD, sst_bytes: int = 4096) -> dict:
    return {
        f"{prefix}/": at(t),
        f"{prefix}/CURRENT": (b"MANIFEST-000005\n", at(t)),
        f"{prefix}/IDENTITY": (b"3c1f0a4e-rocks\n", at(t)),
        f"{prefix}/LOCK": (b"", at(t)),
        f"{prefix}/LOG": (b"rocksdb info log\n" * 10, at(t + 1)),
        f"{prefix}/MANIFEST-000005": (b"\x01" * 300, at(t + 1)),
        f"{prefix}/OPTIONS-000007": (options, at(t)),
        f"{prefix}/000004.sst": (b"\x02" * sst_bytes, at(t + 2, 250)),
        f"{prefix}/000006.log": (b"\x03" * 100, at(t + 3, 500)),
    }


def build_tree(root: Path, spec: dict) -> Path:
    """Create files (``rel: (bytes, mtime_ns)``) and folders (``rel/: mtime_ns``), then set every mtime.

    Folder mtimes are set last, deepest first, because creating a child touches its parent.
    """
    root.mkdir(parents=True, exist_ok=True)
    for rel, value in spec.items():
        if rel.endswith("/"):
            (root / rel).mkdir(parents=True, exist_ok=True)
        else:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(value[0])
    for rel, value in spec.items():
        if not rel.endswith("/"):
            os.utime(root / rel, ns=(value[1], value[1]))
    for rel in sorted((r for r in spec if r.endswith("/")), key=lambda r: -r.count("/")):
        os.utime(root / rel, ns=(spec[rel], spec[rel]))
    os.utime(root, ns=(at(0), at(0)))
    return root


def state_dir_21(root: Path) -> Path:
    """Kafka Streams 2.1: per-task .lock, global store, a window store with segments, no process file."""
    spec = {
        "orders-app/": at(5),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.lock": (b"", at(10)),
        "orders-app/0_0/.checkpoint": (b"0\n1\norders-app-counts-changelog 0 10452\n", at(61, 123456)),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        "orders-app/0_0/rocksdb/": at(20),
        "orders-app/0_1/": at(70),
        "orders-app/0_1/.lock": (b"", at(10)),
        "orders-app/0_1/.checkpoint": (
            b"0\n2\norders-app-counts-changelog 1 88\norders-app-windowed-changelog 1 7\n",
            at(71, 654321),
        ),
        "orders-app/0_1/windowed/": at(30),
        **rocksdb_files("orders-app/0_1/windowed/windowed.1775606400000", 30),
        "orders-app/global/": at(40),
        "orders-app/global/.lock": (b"", at(11)),
        "orders-app/global/.checkpoint": (b"0\n1\nproducts 0 512\n", at(41)),
        **rocksdb_files("orders-app/global/rocksdb/products-store", 42),
        "orders-app/global/rocksdb/": at(42),
    }
    return build_tree(root, spec)


def state_dir_28(root: Path) -> Path:
    """2.8: app-level .lock and process metadata appear while per-task .lock files still exist; -4 sentinel."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.lock": (b"", at(10)),
        "orders-app/0_0/.checkpoint": (
            b"0\n2\norders-app-counts-changelog 0 10452\norders-app-totals-changelog 0 -4\n",
            at(61, 100),
        ),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        **rocksdb_files("orders-app/0_0/rocksdb/totals", 21, sst_bytes=0),
    }
    return build_tree(root, spec)


def state_dir_38(root: Path) -> Path:
    """3.8: no task .lock files, IQv2 .position files, a named topology, an EOS task with no checkpoint."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.checkpoint": (b"0\n1\norders-app-counts-changelog 0 20001\n", at(61, 999999)),
        "orders-app/0_0/counts.position": (b"0\n1\norders 0 45000\n", at(62)),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20),
        "orders-app/1_2/": at(80),
        "orders-app/1_2/rocksdb/": at(20),
        **rocksdb_files("orders-app/1_2/rocksdb/joined", 20),
        "orders-app/__fraud__/": at(6),
        "orders-app/__fraud__/0_1/": at(90),
        "orders-app/__fraud__/0_1/.checkpoint": (b"0\n1\norders-app-scores-changelog 1 5\n", at(91)),
    }
    return build_tree(root, spec)


def state_dir_43(root: Path) -> Path:
    """4.3 (KIP-1035): offsets in RocksDB's 'offsets' column family, .checkpoint_<store> for custom stores."""
    spec = {
        "orders-app/": at(5),
        "orders-app/.lock": (b"", at(1)),
        "orders-app/kafka-streams-process-metadata": (b'{"processId":"%s"}' % PROCESS_ID.encode(), at(2)),
        "orders-app/0_0/": at(60),
        "orders-app/0_0/.checkpoint_custom-store": (
            b"0\n1\norders-app-custom-store-changelog 0 77\n",
            at(63, 42),
        ),
        "orders-app/0_0/rocksdb/": at(20),
        **rocksdb_files("orders-app/0_0/rocksdb/counts", 20, options=OPTIONS_43),
    }
    return build_tree(root, spec)


MALFORMED = {
    "unknown_version": (b"1\n1\nt 0 5\n", "Unknown offset checkpoint version: 1"),
    "wrong_count": (b"0\n3\nt 0 5\nt 1 6\n", "Expected 3 entries but found only 2"),
    "too_many_lines": (b"0\n1\nt 0 5\nt 1 6\n", "Expected 1 entries but found only 2"),
    "bad_line": (b"0\n1\nt 0\n", "Malformed line in offset checkpoint file: 't 0'."),
    "bad_number": (b"0\n1\nt zero 5\n", "Malformed line"),
    "truncated_entry": (b"0\n2\nt 0 5\nt 1", "Malformed line in offset checkpoint file: 't 1'."),
    "truncated_after_version": (b"0\n", "truncated"),
    "binary": (b"\x00\x00\x00\x00\x7fELF\x00\x01", "binary"),
    "not_utf8": (b"0\n1\nt\xff 0 5\n", "not UTF-8"),
    "empty": (b"", "empty file"),
    "count_not_number": (b"0\nabc\n", "entry count line is not a number"),
}


def bad_state_dir(root: Path) -> Path:
    spec = {"bad-app/": at(5), "bad-app/.lock": (b"", at(1)),
            "bad-app/kafka-streams-process-metadata": (b"{not json", at(2))}
    for number, case in enumerate(sorted(MALFORMED)):
        spec[f"bad-app/0_{number}/"] = at(50)
        spec[f"bad-app/0_{number}/.checkpoint"] = (MALFORMED[case][0], at(51))
    spec["bad-app/1_0/"] = at(50)
    spec["bad-app/1_0/.checkpoint"] = (b"0\n2\nbad-app-s-changelog 0 -7\nbad-app-s-changelog 1 33\n", at(52))
    spec["bad-app/2_0/"] = at(50)
    spec["bad-app/2_0/.checkpoint"] = (b"0\n1\nbad-app-s-changelog 0 12\n", at(53))
    return build_tree(root, spec)
