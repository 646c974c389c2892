"""Message shapes no template classifies (:func:`unknown_shapes`): what the catalogue is missing."""

from __future__ import annotations

from typing import Sequence

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from toolkit.catalogue import Template, load_templates
from toolkit.events.classifier import _UUID, _split_by_gate, _tag_templates
from toolkit.redact import redact_text_col
from toolkit.spark import where_computed


def message_shape(message: Column) -> Column:
    """First line of a message with ids, numbers and hex masked (for grouping unknown lines)."""
    first = F.substring(F.substring_index(message, "\n", 1), 1, 300)
    masked = F.regexp_replace(first, _UUID, "<uuid>")
    masked = F.regexp_replace(masked, r"\b0x[0-9a-fA-F]+\b", "<hex>")
    masked = F.regexp_replace(masked, r"\b(?=[0-9a-fA-F]*[0-9])(?=[0-9a-fA-F]*[a-fA-F])[0-9a-fA-F]{8,}\b", "<hex>")
    masked = F.regexp_replace(masked, r"\d+(?:[.,:_]\d+)*", "<n>")
    return masked


def unknown_shapes(records: DataFrame, limit: int = 50, templates: Sequence[Template] | None = None) -> DataFrame:
    """The most frequent message shapes no template classifies, per logger.

    Columns: ``logger``, ``shape`` (first line, ids/numbers/hex masked), ``count``, ``example_source``,
    ``example_line_no``, ``example`` (the first line of the example, redacted). At most ``limit`` rows.
    """
    templates = list(load_templates() if templates is None else templates)
    candidates, hopeless = _split_by_gate(records, templates)
    return shapes_of(where_computed(_tag_templates(candidates, templates), F.col("_tidx").isNull()), hopeless, limit)


SHAPE_COLUMNS = ("logger", "message", "source", "line_no")


def shapes_of(untagged: DataFrame, hopeless: DataFrame, limit: int = 50) -> DataFrame:
    """:func:`unknown_shapes` of records the gate let through that no template matched (``untagged``) and
    records the gate set aside (``hopeless``): both with at least :data:`SHAPE_COLUMNS`."""
    unknown = untagged.select(*SHAPE_COLUMNS).unionByName(
        hopeless.where(F.col("message").isNotNull()).select(*SHAPE_COLUMNS))
    first = F.substring_index(F.col("message"), "\n", 1)
    # Two steps, so the masking regexes run once per distinct line pattern, not once per line: group by
    # the first line with every digit turned into 0 (masking that text gives the same shape as masking
    # the original), then mask each group key and merge equal shapes. A character class, not `translate`:
    # Spark's translate looks every character up in a map of strings, about twice as slow here.
    digits_zeroed = F.regexp_replace(F.substring(first, 1, 300), "[1-9]", "0")
    example = F.min(F.struct("source", "line_no", first.alias("first"))).alias("_ex")
    grouped = (
        unknown.groupBy("logger", digits_zeroed.alias("_key")).agg(F.count(F.lit(1)).alias("_n"), example)
        .withColumn("shape", message_shape(F.col("_key")))
        .groupBy("logger", "shape")
        .agg(F.sum("_n").alias("count"), F.min("_ex").alias("_ex"))
    )
    return (
        grouped.select(
            "logger", "shape", "count",
            F.col("_ex.source").alias("example_source"),
            F.col("_ex.line_no").alias("example_line_no"),
            redact_text_col(F.col("_ex.first")).alias("example"),
        )
        .orderBy(F.col("count").desc(), F.col("logger").asc_nulls_last(), "shape")
        .limit(limit)
    )
