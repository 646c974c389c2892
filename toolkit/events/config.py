"""``<Class>Config values:`` dumps -> one row per configuration key (:func:`extract_config`)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.redact import redact_config_value_col

_CONFIG_HEADER = r"^(\w+Config) values: ?(?:\n|$)"
_CONFIG_LINE = r"^\t?\s*([A-Za-z0-9_.\-]+) = ?(.*)$"


def extract_config(records: DataFrame) -> DataFrame:
    """Parse ``<Class>Config values:`` dumps into rows, with secrets redacted.

    Output: ``host, source, line_no`` (of the dump), ``ts``, ``config_class`` (``StreamsConfig``,
    ``ConsumerConfig``, ``ProducerConfig``, ``AdminClientConfig``, ...), ``key``, ``value``. The
    ``\\t<key> = <value>`` lines are continuation lines inside ``message``.
    """
    # The literal first: the anchored regex would be tried at every position of every other message.
    header = F.col("message").contains(" values:") & F.col("message").rlike(_CONFIG_HEADER)
    dumps = records.where(header).select(
        "host", "source", "line_no", "ts",
        F.regexp_extract(F.col("message"), _CONFIG_HEADER, 1).alias("config_class"),
        F.posexplode(F.split(F.col("message"), "\n")).alias("_pos", "_line"),
    )
    lines = dumps.where((F.col("_pos") > 0) & F.col("_line").rlike(_CONFIG_LINE))
    key = F.regexp_extract(F.col("_line"), _CONFIG_LINE, 1)
    value = F.regexp_extract(F.col("_line"), _CONFIG_LINE, 2)
    return lines.select(
        "host", "source", "line_no", "ts", "config_class",
        key.alias("key"),
        redact_config_value_col(key, F.rtrim(value)).alias("value"),
    )
