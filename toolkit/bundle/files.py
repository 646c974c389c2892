"""What a file looks like: rotated log names, pod names inside them, names Spark can read safely, binary content."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

_ROTATION = re.compile(r"(\.(\d+|\d{4}-\d{2}-\d{2}([_.-]\d{2})?(\.\d+)?))+$")
_LOG_EXT = re.compile(r"\.(log|txt|out|json|jsonl|ndjson)$", re.I)
_POD_LIKE = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$", re.I)


def host_from_file_name(name: str) -> str | None:
    """Guess a pod/host name from a file name like ``orders-agg-1.log.2`` or ``kafka-0_app.log``.

    Returns None for generic names (``app.log``, ``server.log``, ``nifi-app.log``).
    """
    stem = name
    for suffix in (".gz",):
        if stem.endswith(suffix):
            stem = stem[: -len(suffix)]
    stem = _ROTATION.sub("", stem)
    stem = _LOG_EXT.sub("", stem)
    stem = _ROTATION.sub("", stem)
    stem = re.sub(r"[-_.]\d{4}-\d{2}-\d{2}(?:[-_T]\d{2}(?:[-_:]?\d{2})*)?$", "", stem)  # dated exports
    generic = {"app", "server", "application", "stdout", "stderr", "console", "nifi-app", "nifi-bootstrap",
               "nifi-user", "nifi-request", "kafka-streams", "streams", "log", "output", "current"}
    if not stem or stem.lower() in generic or not _POD_LIKE.match(stem):
        return None
    # A pod or host name normally carries an ordinal or hash: orders-agg-1, web-7f9c6d-x2k4q.
    return stem if re.search(r"\d", stem) and "-" in stem else None


def looks_like_log_name(name: str) -> bool:
    """True for names like ``app.log``, ``app.log.1.gz`` or ``server.out.2026-01-05``."""
    return bool(_LOG_EXT.search(_ROTATION.sub("", name.removesuffix(".gz"))))


def flat_name(source: str) -> str:
    """A unique single-component name for a bundle path, for files kept in the work directory."""
    digest = hashlib.sha1(source.encode()).hexdigest()[:8]
    tail = re.sub(r"[^A-Za-z0-9._-]+", "_", source.split("/")[-1])[-80:]
    return f"{digest}-{tail}"


# Hadoop picks a decompressor from the file name: a plain 'app.log.gz' or 'x.log.bz2' would fail
# the whole Spark job, while gzip content must end in '.gz' to be decompressed. Spark reads
# []{}*?\ in a path as a glob and a ':' in a file name breaks Hadoop's Path; a stale '.NAME.crc'
# beside a file makes Hadoop's local file system fail the read with a checksum error. Such files
# are read through a neutral name.
_HADOOP_CODEC_SUFFIX = re.compile(r"\.(gz|bz2|deflate|lz4|snappy|zst|zstd|br|lzo|xz)$", re.I)
_SPARK_UNSAFE_PATH = re.compile(r"[\[\]{}*?\\:\x00-\x1f\x7f]")


def spark_readable(work_dir: Path, path: Path, source: str, gzip: bool = False) -> Path:
    """The path Spark should read for this log: the file itself, or a hard link/copy with a safe name.

    ``gzip``: the file is gzip and must be read through a name ending in exactly ``.gz`` (Hadoop
    chooses its codec by suffix); any other file must not end in a codec suffix.
    """
    name_ok = path.name.endswith(".gz") if gzip else not _HADOOP_CODEC_SUFFIX.search(path.name)
    if name_ok and not (_SPARK_UNSAFE_PATH.search(str(path.resolve()))
                        or path.with_name(f".{path.name}.crc").exists()):
        return path
    neutral = _HADOOP_CODEC_SUFFIX.sub(r"_\1", flat_name(source))
    target = work_dir / "renamed" / (f"{neutral}.gz" if gzip else neutral)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.unlink(missing_ok=True)
    try:
        os.link(path, target)
    except OSError:  # another file system, or links not allowed
        shutil.copy2(path, target)
    return target


def read_head(path: Path, n: int = 8192) -> bytes:
    """The first ``n`` bytes of a file as stored."""
    with path.open("rb") as fh:
        return fh.read(n)


def looks_binary(head: bytes) -> bool:
    """True for bytes that are not log text: a NUL, or mostly control characters."""
    if not head:
        return False
    if b"\x00" in head:
        return True
    # Mostly non-text bytes (control characters other than tab/CR/LF/ESC).
    controls = sum(1 for b in head if b < 32 and b not in (9, 10, 13, 27))
    return controls > len(head) * 0.10
