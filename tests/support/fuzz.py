"""Seeded mutations of the shipped sample logs, all written into ONE bundle (one folder per case).

A Spark session costs seconds and a parse a few more, so the fuzz suite builds every case into a
single bundle and parses it once: ``case-017/app.log``, ``case-018/app.log.gz``, ... Each
:class:`Case` says which problems the toolkit must report for it (``must``: source inside the
bundle -> regular expression the problem's reason must match). Mutations that leave no trace a
reader could detect (a file cut at a line end, shuffled lines) must still parse with every line
accounted for.

The samples are copied, never modified: everything is written under the directory given.
"""

from __future__ import annotations

import gzip
import io
import os
import random
import re
import stat
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from support import SAMPLES

#: The single 20 MB line (one case only: it costs disk and a few seconds of regex time).
HUGE_LINE_BYTES = 20 * 1024 * 1024


@dataclass
class Case:
    """One mutated input: where it lives, what was done, and what the toolkit must report."""

    name: str  # folder inside the bundle, e.g. "case-017"
    mutation: str
    detail: str = ""
    #: source inside the bundle -> regex the problem reason must match (search, case-insensitive)
    must: dict[str, str] = field(default_factory=dict)
    #: sources whose gunzipped text must be a prefix of these bytes (recovery keeps what came before the damage)
    prefix_of: dict[str, bytes] = field(default_factory=dict)


def physical_lines(data: bytes) -> int:
    """Lines as Spark's text reader counts them: ``\\n``, ``\\r\\n`` and a lone ``\\r`` each end a line.

    (Hadoop's LineReader, checked in ``test_fuzz.test_python_line_count_agrees_with_spark``.)
    """
    norm = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    return norm.count(b"\n") + (0 if norm.endswith(b"\n") or not norm else 1)


def sample_logs() -> list[Path]:
    """The shipped log files (not JSON captures, not archives)."""
    return sorted(p for p in SAMPLES.rglob("*.log") if p.is_file())


def _lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


def _window(rng: random.Random, logs: list[Path], lo: int = 10, hi: int = 60) -> bytes:
    """A line-aligned slice of a random sample (small, so 300 cases parse in seconds)."""
    lines = _lines(logs[rng.randrange(len(logs))].read_bytes())
    n = rng.randint(lo, hi)
    start = rng.randrange(max(1, len(lines) - n))
    return b"".join(lines[start:start + n])


def _at_least(data: bytes, size: int) -> bytes:
    while len(data) < size:
        data += data
    return data


def _utf8_invalid(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return True
    return False


BAD_UTF8 = (b"\xff\xfe", b"\xc3(", b"\xc0\xaf", b"\x80", b"\xed\xa0\x80", b"\xf8\x88\x80\x80\x80",
            "Gr\u00f6\u00dfe f\u00fcr M\u00fcller".encode("latin-1"))
ODD_NAMES = ("app:1.log", "app[1].log", "app{a,b}.log", "app*.log", "app?.log", "my app.log", "app%41.log",
             "app+1.log", "\u00e4pp-\u65e5\u5fd7.log", "app.log.gz", "app.log.bz2", "app.log.snappy",
             "app.log.zst", "app.log.lz4", "app.log.deflate", "app\\x.log", "app\tx.log", "x.log.2026-01-05T10:00")


# --------------------------------------------------------------------------- mutations
# Each takes (rng, logs, case dir, case) and writes files; it fills case.must / case.prefix_of.


def m_clean(rng, logs, d, case):
    (d / "app.log").write_bytes(_window(rng, logs))


def m_truncate_mid_line(rng, logs, d, case):
    data = _window(rng, logs)
    cuts = [i for i in range(1, len(data)) if data[i - 1:i] != b"\n"]
    cut = rng.choice(cuts)
    case.detail = f"cut at byte {cut} of {len(data)}"
    (d / "app.log").write_bytes(data[:cut])


def m_truncate_mid_utf8(rng, logs, d, case):
    data = _window(rng, logs) + "ERROR Gr\u00f6\u00dfe \u20ac".encode()
    (d / "app.log").write_bytes(data[:-1])  # the euro sign loses its last byte
    case.must[f"{case.name}/app.log"] = "UTF-8"


def m_byte_flips(rng, logs, d, case):
    data = bytearray(_window(rng, logs))
    flips = rng.randint(1, 20)
    for _ in range(flips):
        data[rng.randrange(len(data))] = rng.randrange(256)
    data = bytes(data)
    case.detail = f"{flips} bytes"
    (d / "app.log").write_bytes(data)
    src = f"{case.name}/app.log"
    if b"\x00" in data:
        case.must[src] = "binary|NUL"
    elif _utf8_invalid(data):
        case.must[src] = "binary|UTF-8"


def m_invalid_utf8(rng, logs, d, case):
    lines = _lines(_window(rng, logs))
    for _ in range(rng.randint(1, 4)):
        i = rng.randrange(len(lines))
        pos = rng.randrange(max(1, len(lines[i]) - 1))
        lines[i] = lines[i][:pos] + rng.choice(BAD_UTF8) + lines[i][pos:]
    (d / "app.log").write_bytes(b"".join(lines))
    case.must[f"{case.name}/app.log"] = "UTF-8"


def m_nul_in_head(rng, logs, d, case):
    data = _window(rng, logs)
    pos = rng.randrange(min(len(data), 4096))
    (d / "app.log").write_bytes(data[:pos] + b"\x00" * rng.randint(1, 64) + data[pos:])
    case.must[f"{case.name}/app.log"] = "binary"


def m_nul_after_head(rng, logs, d, case):
    data = _at_least(_window(rng, logs), 12_000)
    pos = rng.randrange(9000, len(data))
    (d / "app.log").write_bytes(data[:pos] + b"\x00" + data[pos:])
    case.must[f"{case.name}/app.log"] = "NUL"


def m_crlf(rng, logs, d, case):
    (d / "app.log").write_bytes(_window(rng, logs).replace(b"\n", b"\r\n"))


def m_cr_only(rng, logs, d, case):
    (d / "app.log").write_bytes(_window(rng, logs).replace(b"\n", b"\r"))


def m_mixed_eol(rng, logs, d, case):
    lines = _window(rng, logs).split(b"\n")
    out = lines[0]
    for line in lines[1:]:
        out += rng.choice((b"\n", b"\r\n", b"\r", b"\n\r\n")) + line
    (d / "app.log").write_bytes(out)


def m_bom(rng, logs, d, case):
    (d / "app.log").write_bytes(b"\xef\xbb\xbf" + _window(rng, logs))


def m_mixed_layouts(rng, logs, d, case):
    a, b = _lines(_window(rng, logs)), _lines(_window(rng, logs))
    out = []
    while a or b:
        src = a if (a and (not b or rng.random() < 0.5)) else b
        k = rng.randint(1, 5)
        out.extend(src[:k])
        del src[:k]
    (d / "app.log").write_bytes(b"".join(out))


def m_empty(rng, logs, d, case):
    (d / "app.log").write_bytes(b"")
    case.must[f"{case.name}/app.log"] = "empty file"


def m_blank_lines(rng, logs, d, case):
    (d / "app.log").write_bytes(b"".join(rng.choice((b"\n", b"  \n", b"\t\n", b"\r\n")) for _ in range(rng.randint(1, 50))))
    case.must[f"{case.name}/app.log"] = "unknown layout"


def m_shuffled(rng, logs, d, case):
    lines = _lines(_window(rng, logs))
    rng.shuffle(lines)
    if lines and not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    (d / "app.log").write_bytes(b"".join(lines))


def m_duplicated_lines(rng, logs, d, case):
    lines = _lines(_window(rng, logs))
    out = []
    for line in lines:
        out.extend([line] * (rng.randint(2, 4) if rng.random() < 0.3 else 1))
    (d / "app.log").write_bytes(b"".join(out))


def m_duplicated_file(rng, logs, d, case):
    data = _window(rng, logs)
    (d / "app.log").write_bytes(data)
    (d / "app.log.1").write_bytes(data)
    (d / "copy").mkdir()
    (d / "copy" / "app.log").write_bytes(data)


def m_gzip_clean(rng, logs, d, case):
    (d / "app.log.gz").write_bytes(gzip.compress(_window(rng, logs), mtime=0))


def m_gzip_truncated(rng, logs, d, case):
    data = _at_least(_window(rng, logs), 20_000)
    gz = gzip.compress(data, mtime=0)
    cut = rng.randrange(12, len(gz) - 9)
    (d / "app.log.gz").write_bytes(gz[:cut])
    case.detail = f"cut at byte {cut} of {len(gz)}"
    case.must[f"{case.name}/app.log.gz"] = "gzip"
    case.prefix_of[f"{case.name}/app.log.gz"] = data


def m_gzip_flipped(rng, logs, d, case):
    data = _window(rng, logs)
    gz = bytearray(gzip.compress(data, mtime=0))
    pos = rng.randrange(10, len(gz))  # past the header: MTIME/OS bytes are not checked by anyone
    gz[pos] ^= 1 << rng.randrange(8)
    (d / "app.log.gz").write_bytes(bytes(gz))
    case.detail = f"bit flip at byte {pos} of {len(gz)}"
    case.must[f"{case.name}/app.log.gz"] = "gzip|binary"


def m_gzip_concatenated(rng, logs, d, case):
    a, b = _window(rng, logs), _window(rng, logs)
    if not a.endswith(b"\n"):
        a += b"\n"
    (d / "app.log.gz").write_bytes(gzip.compress(a, mtime=0) + gzip.compress(b, mtime=0))
    case.prefix_of[f"{case.name}/app.log.gz"] = a + b


def m_gzip_empty(rng, logs, d, case):
    (d / "app.log.gz").write_bytes(gzip.compress(b"", mtime=0))
    case.must[f"{case.name}/app.log.gz"] = "empty"


def m_gzip_binary(rng, logs, d, case):
    (d / "app.log.gz").write_bytes(gzip.compress(rng.randbytes(4096), mtime=0))
    case.must[f"{case.name}/app.log.gz"] = "binary"


def m_binary_garbage(rng, logs, d, case):
    (d / "app.log").write_bytes(rng.randbytes(rng.randint(64, 8192)))
    case.must[f"{case.name}/app.log"] = "binary"


def m_odd_name(rng, logs, d, case):
    name = ODD_NAMES[int(case.name.split("-")[1]) % len(ODD_NAMES)]
    case.detail = repr(name)
    (d / name).write_bytes(_window(rng, logs))


def m_dir_named_log(rng, logs, d, case):
    (d / "x.log").mkdir()
    if rng.random() < 0.5:
        (d / "x.log" / "inner.log").write_bytes(_window(rng, logs))
    case.must[f"{case.name}/x.log"] = "directory named like a log file"


def m_fifo(rng, logs, d, case):
    os.mkfifo(d / "app.log")  # opening it for reading would block forever
    case.must[f"{case.name}/app.log"] = "not a regular file"


def m_socket(rng, logs, d, case):
    # A socket cannot be opened as a file even by root: the one truly unreadable file we can make.
    os.mknod(d / "app.log", stat.S_IFSOCK | 0o600)
    case.must[f"{case.name}/app.log"] = "not a regular file"


def m_chmod_000(rng, logs, d, case):
    (d / "app.log").write_bytes(_window(rng, logs))
    os.chmod(d / "app.log", 0)
    if os.geteuid() != 0:  # root reads it anyway: then it must simply parse and be accounted for
        case.must[f"{case.name}/app.log"] = "unreadable"


def m_symlink_out(rng, logs, d, case):
    os.symlink("/etc/hostname", d / "app.log")
    case.must[f"{case.name}/app.log"] = "symbolic link"


def m_stack_first(rng, logs, d, case):
    data = _window(rng, logs)
    frames = b"".join(b"\tat org.apache.kafka.streams.processor.internals.StreamTask.process(StreamTask.java:%d)\n" % i
                      for i in range(rng.randint(1, 6)))
    (d / "app.log").write_bytes(frames + data)


def m_long_line(rng, logs, d, case):
    data = _lines(_window(rng, logs))
    i = rng.randrange(len(data))
    data[i] = data[i].rstrip(b"\r\n") + b"x" * rng.randint(100_000, 300_000) + b"\n"
    (d / "app.log").write_bytes(b"".join(data))


def m_no_final_newline(rng, logs, d, case):
    (d / "app.log").write_bytes(_window(rng, logs).rstrip(b"\n"))


def m_control_chars(rng, logs, d, case):
    lines = _lines(_window(rng, logs))
    for _ in range(rng.randint(1, 5)):
        i = rng.randrange(len(lines))
        lines[i] = rng.choice((b"\x1b[31m", b"\x01", b"\x0b", b"\x0c", b"\x1b[0m")) + lines[i]
    (d / "app.log").write_bytes(b"".join(lines))


def m_truncated_tar(rng, logs, d, case):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tf:
        for i in range(3):
            data = _window(rng, logs)
            info = tarfile.TarInfo(f"var/log/app-{i}.log")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    raw = gzip.compress(buf.getvalue(), mtime=0)  # no wall clock in the bytes: the same seed gives the same file
    cut = rng.randrange(len(raw) // 3, len(raw) - 8)
    (d / "logs.tar.gz").write_bytes(raw[:cut])
    case.must[f"{case.name}/logs.tar.gz"] = "archive"


def m_stale_crc(rng, logs, d, case):
    """A Hadoop checksum file left beside the log (a bundle copied from HDFS tooling): valid header, wrong sums."""
    data = _window(rng, logs)
    (d / "app.log").write_bytes(data)
    (d / ".app.log.crc").write_bytes(b"crc\x00" + (512).to_bytes(4, "big") + b"\xde\xad\xbe\xef" * (len(data) // 512 + 1))
    case.must[f"{case.name}/.app.log.crc"] = "binary"


MUTATIONS = {f.__name__[2:]: f for f in (
    m_clean, m_truncate_mid_line, m_truncate_mid_utf8, m_byte_flips, m_invalid_utf8, m_nul_in_head,
    m_nul_after_head, m_crlf, m_cr_only, m_mixed_eol, m_bom, m_mixed_layouts, m_empty, m_blank_lines,
    m_shuffled, m_duplicated_lines, m_duplicated_file, m_gzip_clean, m_gzip_truncated, m_gzip_flipped,
    m_gzip_concatenated, m_gzip_empty, m_gzip_binary, m_binary_garbage, m_odd_name, m_dir_named_log,
    m_fifo, m_socket, m_chmod_000, m_symlink_out, m_stack_first, m_long_line, m_no_final_newline,
    m_control_chars, m_truncated_tar, m_stale_crc,
)}


def m_huge_line(rng, logs, d, case):
    head = b"[2026-03-07 14:02:11,408] INFO stream-thread [orders-agg-0-StreamThread-1] "
    filler = bytes(rng.choice(b"abcdefghij klmnop") for _ in range(4096))
    body = (filler * (HUGE_LINE_BYTES // len(filler) + 1))[:HUGE_LINE_BYTES - len(head) - 1]
    (d / "app.log").write_bytes(head + body + b"\n")
    case.detail = f"{HUGE_LINE_BYTES} bytes on one line"


def build_fuzz_bundle(root: Path, seed: int, n_cases: int, huge_line: bool = True) -> list[Case]:
    """Write ``n_cases`` mutated cases under ``root`` (one folder each); every mutation is used in turn."""
    rng = random.Random(seed)
    logs = sample_logs()
    kinds = list(MUTATIONS)
    cases = []
    for i in range(n_cases):
        kind = kinds[i % len(kinds)]
        case = Case(f"case-{i:03d}", kind)
        d = root / case.name
        d.mkdir(parents=True)
        MUTATIONS[kind](random.Random(rng.getrandbits(64)), logs, d, case)
        cases.append(case)
    if huge_line:
        case = Case(f"case-{n_cases:03d}", "huge_line")
        (root / case.name).mkdir()
        m_huge_line(random.Random(rng.getrandbits(64)), logs, root / case.name, case)
        cases.append(case)
    return cases


def matches(reason: str, pattern: str) -> bool:
    return re.search(pattern, reason, re.I) is not None
