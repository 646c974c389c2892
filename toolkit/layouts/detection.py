"""Which layout, wrappers and text clean-up a file needs, decided on the driver from its first lines.

Lines are read one by one on Spark anyway; the choice decides which layout's field split is tried first,
which wrapper prefixes are stripped, and which clean-up (colour codes, wiki paste markup) the file's lines
go through: a file whose first lines carry no colour code is read without looking for one on every line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from toolkit.bundle.gzip_logs import read_text_head
from toolkit.layouts.catalogue import (
    ANSI_ESCAPE, PASTE_MARKUP, UNCAUGHT_HEAD, Catalogue, Layout, _compile, load_layouts,
)

#: Clean-up steps a file's lines may need (:attr:`Detection.cleaning`): colour codes, paste markup, and the
#: parse's own field separator (U+0001, which no logger prints) replaced by a space.
ANSI, PASTE, SEP = "ansi", "paste", "sep"
#: How much of a file detection reads (decompressed when the file is gzip).
HEAD_BYTES = 512 * 1024

_ANSI_RE = re.compile(ANSI_ESCAPE)
_PASTE_RE = re.compile(PASTE_MARKUP)


@dataclass(frozen=True)
class Detection:
    """The layout chosen for one file, with the share of sampled lines it recognised."""

    layout: str | None
    wrappers: tuple[str, ...] = ()
    start_share: float = 0.0
    sampled: int = 0
    #: clean-up the file's lines need: :data:`ANSI` (colour codes), :data:`PASTE` (JIRA/Markdown paste markup
    #: and escapes), seen in the lines detection read
    cleaning: frozenset[str] = frozenset()

    @property
    def key(self) -> tuple[str | None, tuple[str, ...]]:
        return (self.layout, self.wrappers)


def cleaning_of(lines: list[str]) -> frozenset[str]:
    """The clean-up steps ``lines`` show a need for (see :class:`Detection`)."""
    marks = set()
    if any("\x1b" in ln or "\\u001b" in ln for ln in lines):  # raw, or escaped inside a JSON line
        marks.add(ANSI)
    if any(_PASTE_RE.search(ln) or "\\_" in ln or "\\*" in ln for ln in lines):
        marks.add(PASTE)
    if any("\u0001" in ln for ln in lines):
        marks.add(SEP)
    return frozenset(marks)


def _strip_chain(line: str, chain: tuple[str, ...], cat: Catalogue) -> str | None:
    for wid in chain:
        stripped = cat.wrappers[wid].strip(line)
        if stripped is None:
            return None
        line = stripped
    return line


def _json_line_ok(line: str, layout: Layout) -> bool:
    import json

    if not line.startswith("{"):
        return False
    try:
        obj = json.loads(line)
    except ValueError:
        return False
    return isinstance(obj, dict) and any(k in obj for k in layout.json_keys.get("message", ()))


def _starts(line: str, layout: Layout) -> bool:
    if layout.json:
        return _json_line_ok(line, layout)
    if layout.generic:
        head = line.lstrip()
        return bool(layout.regex.match(head) or head.startswith(UNCAUGHT_HEAD)
                    or _compile(layout.bare_pattern).match(head))
    return bool(layout.regex.match(line if layout.message_only else line.lstrip()))


def detect_lines(lines: list[str], cat: Catalogue | None = None, cleaning: frozenset[str] | None = None) -> Detection:
    """Choose the layout and wrapper chain that recognise the most record starts in ``lines``.

    Named layouts that start at least ``min_start_share`` of the lines come first, then the generic
    layout at that share, then whichever layout found any record start at all (a few records among
    stack traces). Lines are read one by one anyway; the choice only decides which layout's field
    split is tried first. ``cleaning``: the file's clean-up steps when already known (else from ``lines``).
    """
    cat = cat or load_layouts()
    kept = [ln for ln in lines if ln.strip()]
    cleaning = cleaning_of(kept) if cleaning is None else cleaning
    sample = [_PASTE_RE.sub("", _ANSI_RE.sub("", ln)) for ln in kept][: cat.sample_lines]
    if not sample:
        return Detection(None, (), 0.0, 0, cleaning)
    # (named layouts at the required share, the generic layout at it, anything that read a record start)
    best: list[Detection | None] = [None, None, None]
    for chain in cat.chains:
        stripped = [_strip_chain(ln, chain, cat) for ln in sample] if chain else sample
        if chain and ANSI in cleaning:  # colour codes a JSON wrapper held escaped are there once it is decoded
            stripped = [_ANSI_RE.sub("", s) if s is not None and "\x1b" in s else s for s in stripped]
        matched = [s for s in stripped if s is not None]
        if chain and len(matched) < cat.min_wrapper_share * len(sample):
            continue
        for layout in cat.layouts:
            hits = sum(1 for s in matched if _starts(s, layout))
            if not hits:
                continue
            found = Detection(layout.id, chain, hits / len(sample), len(sample), cleaning)
            # A few record starts among stack traces still name the file's layout (lines are read one by one).
            rank = 2 if found.start_share < cat.min_start_share else int(layout.generic)
            current = best[rank]
            if current is None or hits > current.start_share * current.sampled + 1e-9:
                best[rank] = found
    return next((d for d in best if d is not None), Detection(None, (), 0.0, len(sample), cleaning))


def detect_file(path: Path, cat: Catalogue | None = None) -> Detection:
    """Detect the layout of a file from its first lines (reads at most :data:`HEAD_BYTES` of text,
    decompressed when the file is gzip)."""
    cat = cat or load_layouts()
    head = read_text_head(path, HEAD_BYTES)
    lines = head.decode("utf-8", errors="replace").splitlines()
    if len(head) == HEAD_BYTES and lines:
        lines = lines[:-1]  # the last one may be cut
    # Clean-up is decided on everything read; the layout on the first lines, as many as detection samples.
    return detect_lines(lines[: cat.sample_lines * 2], cat, cleaning_of(lines))
