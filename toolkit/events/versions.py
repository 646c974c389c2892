"""Which releases print each catalogue template: the per-template version facts runs are dated by.

The catalogue records, per template, the versions that print it (``versions = "2.6-4.3"``). This
module turns those texts into a small table keyed by ``template_id``; joined with run-tagged events, it
tells which release lines each run's lines were printed by.
"""

from __future__ import annotations

import functools
from typing import Sequence

from pyspark.sql import DataFrame, SparkSession

from toolkit import utc
from toolkit.catalogue import Template, load_templates

#: Newest minor release each product's catalogue was checked against: a template range ending
#: there means "still printed by the newest version we know", not "removed after it".
NEWEST_CHECKED = {"kafka": (4, 3), "nifi": (2, 11)}

#: Minor release lines of each product the catalogue covers (a run's version is one of these lines).
KNOWN_LINES = {
    "kafka": [(1, 1), *[(2, m) for m in range(9)], *[(3, m) for m in range(10)], *[(4, m) for m in range(4)]],
    "nifi": [*[(1, m) for m in range(29)], *[(2, m) for m in range(12)]],
}

#: Version key of an open upper end (still printed by the newest release checked).
OPEN_KEY = 99 * 100 + 99

#: Columns of :func:`template_versions`.
TEMPLATE_VERSIONS_SCHEMA = "template_id string, family string, v_lo int, v_hi int"


def version_key(text: str, upper: bool) -> int:
    """``major * 100 + minor`` of a version text; ``4.x`` (or ``4``) is ``4.0`` as a lower end, ``4.99`` as an upper."""
    major, _, minor = text.strip().partition(".")
    if minor in ("", "x"):
        return int(major) * 100 + (99 if upper else 0)
    return int(major) * 100 + int(minor.split(".")[0])


def _version_rows(templates: Sequence[Template]) -> list[tuple[str, str, int, int]]:
    rows = []
    for t in templates:
        family = "nifi" if t.product == "nifi" else "kafka"
        lo_text, _, hi_text = t.versions.partition("-")
        hi_text = hi_text or lo_text
        try:
            lo, hi = version_key(lo_text, False), version_key(hi_text, True)
        except ValueError:
            continue
        newest = NEWEST_CHECKED[family]
        if hi == newest[0] * 100 + newest[1]:
            hi = OPEN_KEY
        rows.append((t.id, family, lo, hi))
    return rows


@functools.cache
def _shipped_version_rows() -> tuple[tuple[str, str, int, int], ...]:
    """The shipped catalogue's rows, worked out once per process (the catalogue is immutable package data)."""
    return tuple(_version_rows(load_templates(user=False)))


def template_version_rows(templates: Sequence[Template] | None = None) -> list[tuple[str, str, int, int]]:
    """(template_id, family, lowest, highest version key) of each template whose version text can be read
    (default: the shipped catalogue); the rows of :func:`template_versions`."""
    return list(_shipped_version_rows()) if templates is None else _version_rows(templates)


def template_versions(spark: SparkSession, templates: Sequence[Template] | None = None) -> DataFrame:
    """template_id, family (``kafka`` / ``nifi``), lowest and highest version key of each catalogue template.

    A range ending at the newest release checked (:data:`NEWEST_CHECKED`) is open (:data:`OPEN_KEY`);
    templates whose version text cannot be read are left out. A table to join in notebooks and your own
    queries; the timeline itself looks the same rows up through :func:`template_version_map`.
    """
    return utc.create_frame(spark, template_version_rows(templates), TEMPLATE_VERSIONS_SCHEMA)


@functools.cache
def template_version_map() -> str:
    """SQL text: a map from template id to ``family/lo/hi`` for the shipped catalogue (the rows of
    :func:`template_versions`, looked up without a join).

    Two string literals split into the keys and the values (the optimizer folds them once): a literal
    map of several hundred entries costs the analyzer noticeable time in every plan that holds it.
    Not ``str_to_map``: Spark 4 splits its text with a collation-aware helper whose first use builds a
    table of every Unicode code point (gigabytes of short-lived objects in a cold command).
    """
    rows = _shipped_version_rows()
    if any(ch in tid for tid, *_ in rows for ch in ",=/'\\"):
        raise ValueError("template ids must not contain , = / ' or \\")
    keys = ",".join(tid for tid, *_ in rows)
    values = ",".join(f"{family}/{lo}/{hi}" for _tid, family, lo, hi in rows)
    return f"map_from_arrays(split('{keys}', ','), split('{values}', ','))"
