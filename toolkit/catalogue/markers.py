"""Process-run markers (``catalogue/runs.toml``) as the regular expressions the run numbering applies.

:mod:`toolkit.events.runs` and :mod:`toolkit.events.bounds` number each host's lines by process run from a
strong start marker (printed once per start), a weak one (counted only on hosts without a strong one) and a
Kafka Streams client's stop lines; the classifier's gate keeps every record that starts with a marker's head.
"""

from __future__ import annotations

import functools
import re
import tomllib
from dataclasses import dataclass
from importlib import resources

STRENGTHS = ("strong", "weak")


@dataclass(frozen=True)
class RunMarkers:
    """The run markers of ``runs.toml``, combined as the run numbering reads them."""

    #: one regex for every strong start marker (on the message)
    strong: str
    #: one regex for every weak start marker (on the message without its ``stream-client [..]`` prefix)
    weak: str
    #: (regex, kind) of each strong marker, in file order: which kind a strong marker is
    kinds: tuple[tuple[str, str], ...]
    #: one regex for a client's stop lines (on the message without its client prefix)
    stop: str
    #: literals a marker's message starts with, in file order without repeats
    heads: tuple[str, ...]


def _either(patterns: list[str]) -> str:
    """One anchored regex matching where any of ``patterns`` (each anchored with ``^``) matches."""
    for p in patterns:
        if not p.startswith("^"):
            raise ValueError(f"runs.toml: a marker pattern must start with ^: {p!r}")
        re.compile(p)
    if len(patterns) == 1:
        return patterns[0]
    return "^(?:" + "|".join(p[1:] for p in patterns) + ")"


@functools.cache
def run_markers() -> RunMarkers:
    """The shipped run markers (``catalogue/runs.toml``), read once per process."""
    data = tomllib.loads(resources.files("toolkit.catalogue").joinpath("runs.toml").read_text(encoding="utf-8"))
    starts = data["start"]
    bad = [s.get("kind") for s in starts if s.get("strength") not in STRENGTHS]
    if bad:
        raise ValueError(f"runs.toml: strength must be one of {STRENGTHS} (kinds {bad})")
    strong = [s for s in starts if s["strength"] == "strong"]
    weak = [s for s in starts if s["strength"] == "weak"]
    heads = tuple(dict.fromkeys(h for s in starts for h in s["head"]))
    return RunMarkers(strong=_either([s["pattern"] for s in strong]), weak=_either([s["pattern"] for s in weak]),
                      kinds=tuple((s["pattern"], s["kind"]) for s in strong),
                      stop=_either([s["pattern"] for s in data.get("stop", [])]), heads=heads)


__all__ = ["RunMarkers", "STRENGTHS", "run_markers"]
