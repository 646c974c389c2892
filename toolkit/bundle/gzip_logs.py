"""Gzip logs: read by Spark where intact, recovered on the driver where damaged.

Spark's text reader decompresses a ``.gz`` file itself (Hadoop's codec, chosen by the ``.gz``
suffix, reads concatenated members as one stream), so on a cluster the executors do the work and
the driver never holds the text. Only a damaged file needs the driver: a truncated or corrupt
stream would fail the whole Spark job, and :func:`gunzip_to` keeps the lines decoded before the
damage. Which files are damaged is decided in two steps:

* when the bundle is opened, the first :data:`HEAD_CHECK_BYTES` of every gzip are decompressed
  (layout detection needs them anyway); damage seen there, a whole small file that fails its
  checksum, or a compression ratio no log reaches sends the file to the driver at once;
* a damaged larger file shows when Spark first reads it (the job fails with a read error): only
  then is it found (the file named in the error, else every gzip checked by streaming) and
  recovered, and the job is run again.
"""

from __future__ import annotations

import os
import struct
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from toolkit.bundle.model import Bundle, IngestProblem, Limits, LogFile
from toolkit.bundle.files import flat_name, looks_binary, read_head, spark_readable

GZIP_MAGIC = b"\x1f\x8b"
#: Decompressed bytes read from every gzip when the bundle is opened (and for layout detection).
HEAD_CHECK_BYTES = 1 << 20


@dataclass(frozen=True)
class GzipHead:
    """What decompressing the start of a gzip file showed."""

    head: bytes
    #: the whole stream was read (every member) and its checksums held
    complete: bool
    #: the stream broke inside the part read ("truncated or corrupt gzip" detail), else None
    damage: str | None
    #: the start of the stream, or the size its trailer declares, is expanding beyond the bomb ratio
    bomb_like: bool


CORRUPT = "truncated or corrupt gzip"
BOMB = "compression ratio too high (gzip bomb?)"


class _Inflated(NamedTuple):
    written: int  # bytes of text given to the sink
    problem: str | None  # CORRUPT, BOMB or None
    detail: str | None
    complete: bool  # the end of the last member was reached
    consumed: int  # compressed bytes used


def _inflate(path: Path, limits: Limits, stop_after: int | None = None, sink=None,
             read_size: int = 1 << 16) -> _Inflated:
    """Stream-decompress ``path`` (all members, ``cat a.gz b.gz`` too) until ``stop_after`` output
    bytes, damage, the caps or the end; ``sink`` receives the text, never past the member cap.

    Small reads keep more of a damaged file: the text the failing call would have decoded is lost.
    """
    compressed = max(path.stat().st_size, 1)
    written = consumed = 0
    decomp = zlib.decompressobj(wbits=31)
    with path.open("rb") as fh:
        while chunk := fh.read(read_size):
            data = chunk
            while data:
                before = len(data)
                try:
                    piece = decomp.decompress(data, 1 << 20)
                except zlib.error as exc:
                    return _Inflated(written, CORRUPT, f"{exc}; {written} bytes recovered", False, consumed)
                consumed += before - len(decomp.unconsumed_tail) - (len(decomp.unused_data) if decomp.eof else 0)
                over = len(piece) > limits.max_member_bytes - written
                if over:  # never past the cap, not even by one decompressed chunk
                    piece = piece[:max(limits.max_member_bytes - written, 0)]
                written += len(piece)
                if sink is not None:
                    sink(piece)
                if over or (written > 1 << 26 and written / compressed > limits.max_ratio):
                    return _Inflated(written, BOMB, f"stopped after {written} bytes", False, consumed)
                if stop_after is not None and written >= stop_after:
                    return _Inflated(written, None, None, False, consumed)
                if decomp.unconsumed_tail:
                    data = decomp.unconsumed_tail
                elif decomp.eof and decomp.unused_data:  # next gzip member
                    data = decomp.unused_data
                    decomp = zlib.decompressobj(wbits=31)
                else:
                    data = b""
    if not decomp.eof:
        return _Inflated(written, CORRUPT, f"stream ends early; {written} bytes recovered", False, consumed)
    return _Inflated(written, None, None, True, consumed)


def read_gzip_head(path: Path, limits: Limits, n: int | None = None) -> GzipHead:
    """Decompress at most ``n`` (default :data:`HEAD_CHECK_BYTES`) bytes from the start of a gzip
    file and judge what was seen."""
    n = HEAD_CHECK_BYTES if n is None else n
    parts: list[bytes] = []
    written, _, damage, complete, consumed = _inflate(path, limits, n, parts.append)
    head = b"".join(parts)[:n]
    size = path.stat().st_size
    bomb_like = written >= n and written / max(consumed, 1) > limits.max_ratio
    if not complete and size >= 18:
        # A gzip member ends with the size of its text modulo 2**32: a cheap hint for a single member.
        with path.open("rb") as fh:
            fh.seek(size - 4)
            declared = struct.unpack("<I", fh.read(4))[0]
        bomb_like = bomb_like or declared / size > limits.max_ratio
    return GzipHead(head, complete and damage is None, damage, bomb_like)


def read_text_head(path: Path, n: int) -> bytes:
    """The first ``n`` bytes of a log's text: decompressed when the file is gzip (damage ends it)."""
    head = read_head(path, n)
    if not head.startswith(GZIP_MAGIC):
        return head
    return read_gzip_head(path, Limits(), n).head


def gzip_is_intact(path: Path, limits: Limits) -> bool:
    """Decompress the whole file without keeping the text: True when every member ends with a valid
    checksum and nothing exceeds the caps."""
    inflated = _inflate(path, limits, read_size=1 << 20)
    return inflated.problem is None and inflated.complete


def gunzip_to(src: Path, target: Path, limits: Limits, source: str, problems: list[IngestProblem]) -> bool:
    """Decompress a gzip log, keeping what can be read from a truncated or damaged file.

    Returns False when nothing usable came out. Decompression is streamed chunk by chunk so the
    lines decoded before the damage are kept (a dying pod often leaves exactly that); concatenated
    gzip members (``cat a.gz b.gz``) are all read.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    with target.open("wb") as out:
        written, problem, detail, _, _ = _inflate(src, limits, sink=out.write, read_size=1 << 14)
    if problem:
        problems.append(IngestProblem(source, problem, detail))
    elif written == 0:  # a valid gzip of nothing: say so rather than drop the file silently
        problems.append(IngestProblem(source, "empty file", "empty after gunzip"))
    st = src.stat()
    os.utime(target, (st.st_mtime, st.st_mtime))
    return written > 0



def recover_gzip(bundle: Bundle, log: LogFile) -> LogFile | None:
    """Decompress a damaged (or bomb-like) gzip on the driver, keeping what can be read.

    The problem (truncated, corrupt, bomb) joins ``bundle.problems``; returns the plain-text log to
    read instead, or None when nothing usable came out (or the text is binary).
    """
    src = log.local_path
    target = bundle.work_dir / "gunzipped" / flat_name(log.source).removesuffix(".gz")
    if not gunzip_to(src, target, bundle.limits, log.source, bundle.problems):
        return None
    if looks_binary(read_head(target)):
        bundle.problems.append(IngestProblem(log.source, "binary content, not read as a log", "after gunzip"))
        return None
    return LogFile(log.source, spark_readable(bundle.work_dir, target, log.source), log.host, target.stat().st_size)


def damaged_gzips(logs: list[LogFile], limits: Limits) -> list[LogFile]:
    """The gzip logs among ``logs`` that do not decompress cleanly, checked in parallel threads
    (zlib releases the interpreter lock)."""
    candidates = [f for f in logs if f.gzip]
    with ThreadPoolExecutor(max_workers=max(1, min(len(candidates), os.cpu_count() or 1))) as pool:
        intact = list(pool.map(lambda f: gzip_is_intact(f.local_path, limits), candidates))
    return [f for f, ok in zip(candidates, intact) if not ok]
