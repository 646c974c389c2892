"""Python regex -> Java regex, for patterns written once and run both by ``re`` and by Spark.

The catalogue and the layouts write patterns in Python syntax (tested with ``re``); Spark's
``rlike`` / ``regexp_extract`` / ``regexp_replace`` run them on the JVM. Only the Python-only
group syntax differs between the two engines for the patterns the toolkit uses.

This module imports nothing from the package, so every stage may use it.
"""

from __future__ import annotations

import re
from functools import cache

__all__ = ["to_java_regex"]


@cache  # the same few hundred patterns are converted for every analysis
def to_java_regex(pattern: str) -> str:
    """Convert a Python regex to Java syntax with the same group numbers.

    ``(?P<name>...)`` becomes a plain group ``(...)``: the toolkit reads groups by number, which
    both engines assign in the same order, and Java group names allow neither underscores nor
    duplicates once underscores are dropped. A named back-reference ``(?P=name)`` becomes a
    numbered one. Escaped characters and character classes are copied unchanged, so a literal
    ``\\(?P<`` or a ``[(?P<]`` class is never rewritten.
    """
    group_numbers = re.compile(pattern).groupindex if "(?P=" in pattern else {}
    out: list[str] = []
    i, n = 0, len(pattern)
    in_class = False
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            out.append(pattern[i:i + 2])
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
            out.append(ch)
            i += 1
            continue
        if ch == "[":
            # a ']' right after '[' or '[^' is a literal member, not the end of the class
            end = i + 1 + (pattern.startswith("^", i + 1))
            if pattern.startswith("]", end):
                end += 1
            out.append(pattern[i:end])
            in_class = True
            i = end
            continue
        if pattern.startswith("(?P<", i):
            i = pattern.index(">", i) + 1
            out.append("(")
            continue
        if pattern.startswith("(?P=", i):
            close = pattern.index(")", i)
            # (?:..) keeps a following digit from joining the group number
            out.append(f"(?:\\{group_numbers[pattern[i + 4:close]]})")
            i = close + 1
            continue
        out.append(ch)
        i += 1
    return "".join(out)
