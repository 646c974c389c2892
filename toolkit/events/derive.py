"""Records -> the tables derived from all of them, sharing the work they have in common.

``events`` (classified, run-tagged), ``config`` (configuration dumps), ``unknown_shapes`` (what no template
knows) and ``run_bounds`` (each process run's first and last line of any kind) all read every record.
The template gate runs once, and the records it lets through are matched against the templates once
(that dispatch is the costly part of classification): the matched ones become events, the others join
the set-aside records as unknown shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from pyspark import StorageLevel
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue import Template, load_templates
from toolkit.events import runs as exact
from toolkit.events.bounds import run_bounds
from toolkit.events.classifier import _extract, _split_by_gate, _tag_templates, prefix_facts_of
from toolkit.events.config import extract_config
from toolkit.events.runs import tag_runs_by_key
from toolkit.events.shapes import shapes_of
from toolkit.spark import release, where_computed

#: The tables derived from all records that every analysis needs, in the order they are written.
DERIVED_TABLES: tuple[str, ...] = ("events", "config", "run_bounds")
#: Asked for by ``parse`` and ``timeline`` only (it is a catalogue-coverage aid, no detector reads it).
SHAPES_TABLE = "unknown_shapes"


@dataclass
class DerivedTables:
    """The tables derived from all records, and how to free what they share once they are written."""

    tables: dict[str, DataFrame]
    release: Callable[[], object]


def derive_tables(records: DataFrame, templates: Sequence[Template] | None = None, *,
                  shapes: bool = True, exact_bounds: bool = False) -> DerivedTables:
    """:data:`DERIVED_TABLES` of ``records`` (``toolkit.schemas.RECORD_SCHEMA``), plus :data:`SHAPES_TABLE`
    when ``shapes``; lazy, but for the run bounds' two intermediate tables (computed here on a large input).

    The classified events are kept on local disk until ``release`` is called (after the tables are written): their
    run numbering reads them twice (:func:`toolkit.events.runs.tag_runs_by_key`). With shapes, so are the records
    matched against the templates, so the dispatch runs once for events and unknown shapes alike; ``release`` also
    frees the run bounds' intermediate tables (see :func:`toolkit.events.bounds.run_bounds`).
    ``exact_bounds``: take the run bounds from numbering every record (:func:`toolkit.events.runs.run_bounds`,
    the same table). On a small input that sort costs nothing, while the windowed pass of
    :func:`toolkit.events.bounds.run_bounds` runs about ten Spark jobs, each with its fixed cost.
    """
    templates = list(load_templates() if templates is None else templates)
    # Records no template can match (records.parquet's other partition) are read by the run bounds only.
    candidates, hopeless = _split_by_gate(records, templates)
    tagged = _tag_templates(candidates, templates)
    held: list[DataFrame] = []
    if shapes:
        tagged = tagged.persist(StorageLevel.DISK_ONLY)
        held.append(tagged)
    # Kept on local disk until released: the run numbering reads the events twice (see tag_runs_by_key).
    untagged = _extract(where_computed(tagged, F.col("_tidx").isNotNull()), templates,
                        prefix_facts_of(candidates)).persist(StorageLevel.DISK_ONLY)
    held.append(untagged)
    tables = {
        "events": tag_runs_by_key(untagged),
        # Every dump is a candidate (toolkit.catalogue.gate): the other records are never read for it.
        "config": extract_config(candidates),
        "run_bounds": exact.run_bounds(records) if exact_bounds else run_bounds(records, held),
    }
    if shapes:
        tables[SHAPES_TABLE] = shapes_of(where_computed(tagged, F.col("_tidx").isNull()), hopeless)
    return DerivedTables(tables=tables, release=lambda: release(held))
