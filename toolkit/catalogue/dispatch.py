"""Which templates a message can match, from its first characters: the classifier's dispatch plan.

Most template patterns are anchored at the start of the message body and open with literal text
(``^State transition from``, ``^Processed \\d+ total records``): a body whose first
:data:`KEY_CHARS` characters are not one of those a pattern can start with cannot match it. So the
classifier looks a body's first characters up in one table (:attr:`Dispatch.by_key`) and tries only the
templates found there. The few patterns that may match anywhere, or open with a group of any text
(``^(?P<node>\\S+) is now connected``), are *floating*: each is tried by its literal, and only where it
would win, i.e. before the anchored template that matched (templates are tried in priority order and the
first match wins).

The opening characters are read off the parsed pattern (literals, small character classes and
alternations, capture groups of those); a pattern whose opening cannot be read that way is floating.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from re import _constants as sre_constants  # type: ignore[attr-defined]
from re import _parser as sre_parser  # type: ignore[attr-defined]
from typing import Sequence

from toolkit.catalogue import Template

#: Characters of the body the dispatch table is keyed by.
KEY_CHARS = 4
#: Above this many possible openings a pattern is floating (an alternation of many words is rare).
MAX_OPENINGS = 16


def _openings(items: list, need: int) -> set[str] | None:
    """Texts a match of the parsed sequence ``items`` starts with: each at least ``need`` characters long, or
    shorter where the sequence ends there. None when an item's text is not fixed (a repeat, a class range...)."""
    outs = {""}
    for op, av in items:
        if all(len(o) >= need for o in outs):
            return outs
        if op is sre_constants.LITERAL:
            add = {chr(av)}
        elif op is sre_constants.IN:
            chars = set()
            for kind, value in av:
                if kind is not sre_constants.LITERAL:
                    return None
                chars.add(chr(value))
            add = chars
        elif op is sre_constants.SUBPATTERN:
            _group, add_flags, _del_flags, sub = av
            if add_flags & (re.IGNORECASE | re.VERBOSE):
                return None
            add = _openings(list(sub), need)
        elif op is sre_constants.BRANCH:
            add = set()
            for branch in av[1]:
                found = _openings(list(branch), need)
                if found is None:
                    return None
                add |= found
        else:
            return None
        if add is None:
            return None
        outs = {o if len(o) >= need else o + a for o in outs for a in add}
        if len(outs) > MAX_OPENINGS:
            return None
    return outs


def opening_keys(pattern: str, need: int = KEY_CHARS) -> frozenset[str] | None:
    """The first ``need`` characters every match of ``pattern`` can start with, or None when the pattern is
    not anchored at the start or its opening is not fixed text."""
    try:
        parsed = sre_parser.parse(pattern)
    except re.error:
        return None
    if parsed.state.flags & re.IGNORECASE:
        return None
    items = list(parsed)
    if not items or items[0] != (sre_constants.AT, sre_constants.AT_BEGINNING):
        return None
    found = _openings(items[1:], need)
    if not found or any(len(o) < need for o in found):
        return None
    return frozenset(o[:need] for o in found)


@dataclass(frozen=True)
class Dispatch:
    """The dispatch plan of a list of templates (indices are positions in that list: priority order)."""

    #: opening characters of a body -> the anchored templates that can match it, in priority order
    by_key: dict[str, list[int]]
    #: templates whose match may start anywhere, in priority order
    floating: list[int]
    #: per template: the floating templates tried before it (those of higher priority)
    floating_before: list[list[int]]


def dispatch_plan(templates: Sequence[Template]) -> Dispatch:
    """The :class:`Dispatch` of ``templates`` (in their matching order)."""
    by_key: dict[str, list[int]] = {}
    floating: list[int] = []
    for i, t in enumerate(templates):
        keys = opening_keys(t.pattern)
        if keys is None:
            floating.append(i)
            continue
        for key in sorted(keys):
            by_key.setdefault(key, []).append(i)
    before = [[f for f in floating if f < i] for i in range(len(templates))]
    return Dispatch(by_key, floating, before)
