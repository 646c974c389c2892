"""Changelog checkpoints of state captures, with the moment each capture was taken.

Collected results are bounded and go through :mod:`toolkit.utc` (naive ``datetime`` values in UTC).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from toolkit.detectors.helpers.frames import all_rows, shared
from toolkit.state.schemas import CHANGELOG_CHECKPOINT_FILES


def captured_checkpoints(tl: Any) -> DataFrame:
    """Readable changelog checkpoint entries of state captures (a task's ``.checkpoint``, 4.3's
    ``.checkpoint_<store>``; not ``<store>.position`` files, whose offsets are input positions), with an
    effective ``capture_time``.

    A plain copy or ``tar`` of ``state.dir`` has no capture time (``capture_time`` null); the newest
    file mtime of the same capture is then a lower bound of when it was taken.
    """
    newest = tl.state.state_files.groupBy("host", "source").agg(F.max("mtime").alias("_newest"))
    files = tl.state.checkpoints.where(F.col("problem").isNull() & F.col("offset").isNotNull()
                                       & (F.col("file_kind").isin(*CHANGELOG_CHECKPOINT_FILES)
                                          | F.col("file_kind").isNull()))
    return files.join(newest, ["host", "source"], "left").withColumn(
        "capture_time", F.coalesce(F.col("capture_time"), F.col("_newest"))).drop("_newest")


def captured_checkpoint_rows(tl: Any) -> list:
    """The rows of :func:`captured_checkpoints`, read once per detector run and shared."""
    files = captured_checkpoints(tl)
    return shared(tl, "captured_checkpoints", lambda: all_rows(files, "captured checkpoint files"))
