"""Events + state facts -> timeline tables, on Spark (window functions and joins, no driver loops).

``build_timeline(events, state)`` returns a :class:`Timeline`: one DataFrame per table of
:mod:`toolkit.timeline.schemas` plus the inputs it was built from (``events``, ``config`` and the
state tables), so detectors, charts and people query one object.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

# `as _build`: the name `build` stays the submodule toolkit.timeline.build
from toolkit.timeline.build import build as _build
from toolkit.timeline.model import StateFacts, Timeline

__all__ = ["StateFacts", "Timeline", "build_timeline"]


def build_timeline(events: DataFrame, state: StateFacts, config: DataFrame | None = None,
                   run_bounds: DataFrame | None = None, *, materialize_shared: bool = False,
                   held: list[DataFrame] | None = None) -> Timeline:
    """Derive every timeline table from classified events and state facts (``run_bounds``: the first
    and last line of each process run among all records, see :func:`toolkit.events.run_bounds`).

    ``materialize_shared``: compute the tables several others are built on (run spans, task lifecycles)
    once, now, instead of inside each query that uses them (see :func:`toolkit.timeline.build.build`); ``held``:
    the same, kept with ``persist`` in ``held`` for the caller to release (:func:`toolkit.spark.release`) once
    the tables are written."""
    return _build(events, state, config, run_bounds, materialize_shared=materialize_shared, held=held)
