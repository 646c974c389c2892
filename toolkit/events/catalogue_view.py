"""The template catalogue as a bounded table, with how often each template matched."""

from __future__ import annotations

from typing import Sequence

import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue import Template, load_templates


def template_hits(events: DataFrame) -> DataFrame:
    """Events per ``template_id`` as ``(template_id, hits)`` (input for :func:`catalogue_table`)."""
    return events.groupBy("template_id").agg(F.count(F.lit(1)).alias("hits"))


def catalogue_table(hit_counts: DataFrame | None = None, templates: Sequence[Template] | None = None) -> pd.DataFrame:
    """The catalogue as a bounded pandas table (one row per template), optionally with hit counts.

    ``hit_counts`` is a DataFrame with ``template_id`` and ``hits`` or ``count`` (e.g.
    :func:`template_hits`), or an events DataFrame (it is counted). Its size is bounded by the number of templates.
    """
    templates = list(load_templates() if templates is None else templates)
    table = pd.DataFrame(
        [
            {
                "id": t.id, "product": t.product, "event": t.event, "also": ", ".join(t.also),
                "logger": t.logger, "level": t.level, "versions": t.versions, "literal": t.literal,
                "samples": len(t.samples), "reference": t.reference,
            }
            for t in templates
        ]
    )
    if hit_counts is not None:
        # an events table (it has an `event` column, and a typed `count` field) is counted first
        counts = template_hits(hit_counts) if "event" in hit_counts.columns else hit_counts
        value = "hits" if "hits" in counts.columns else "count"
        known = [t.id for t in templates]
        rows = counts.where(F.col("template_id").isin(*known)).select("template_id", value).collect()
        hits = {r["template_id"]: int(r[value] or 0) for r in rows}
        table["hits"] = table["id"].map(lambda i: hits.get(i, 0)).astype("int64")
    return table
