"""Deterministic state captures: a ``state.tar.gz`` of the ``state.dir`` subtree with the story's mtimes.

Git does not keep mtimes, an archive does. Members are sorted, owned by a fixed uid/gid/uname/gname, and
the gzip header carries mtime 0 and no file name, so the same story gives the same bytes every time.
"""

from __future__ import annotations

import gzip
import io
import tarfile
from pathlib import Path

#: One archive member: (path inside the archive, mtime in epoch ms, content bytes or None for a directory).
Entry = tuple[str, int, bytes | None]


def write_tar_gz(path: Path, entries: list[Entry]) -> None:
    members: dict[str, Entry] = {}
    for name, mtime_ms, data in entries:
        members[name.rstrip("/")] = (name.rstrip("/"), mtime_ms, data)
        parts = name.rstrip("/").split("/")
        for k in range(1, len(parts)):  # implicit parent directories get their child's mtime unless given
            parent = "/".join(parts[:k])
            members.setdefault(parent, (parent, mtime_ms, None))
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(members):
            _, mtime_ms, data = members[name]
            info = tarfile.TarInfo(name)
            # Millisecond mtimes: PAX stores a float mtime in an extended header.
            info.mtime = mtime_ms / 1000 if mtime_ms % 1000 else mtime_ms // 1000
            info.uid = info.gid = 1000
            info.uname = info.gname = "appuser"
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                tar.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
    with open(path, "wb") as fh, gzip.GzipFile(filename="", mode="wb", fileobj=fh, mtime=0) as gz:
        gz.write(raw.getvalue())


def checkpoint_bytes(offsets: dict[tuple[str, int], int]) -> bytes:
    """`.checkpoint` (OffsetCheckpoint): version 0, entry count, then `<topic> <partition> <offset>` lines."""
    lines = ["0", str(len(offsets))] + [f"{t} {p} {o}" for (t, p), o in offsets.items()]
    return ("\n".join(lines) + "\n").encode()
