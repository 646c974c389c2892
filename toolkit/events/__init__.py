"""Records -> canonical events, using the template catalogue (``toolkit/catalogue/*.toml``).

Everything here is native Spark (column expressions, window functions, higher-order functions):
no Python UDFs, no RDDs, nothing collected per record, so it runs unchanged on Spark Connect.

- :mod:`~toolkit.events.classifier`: :func:`classify`, template dispatch and typed field extraction;
- :mod:`~toolkit.events.runs`: process runs (:func:`tag_runs`, :func:`is_nifi_bootstrap`);
- :mod:`~toolkit.events.bounds`: each run's first and last line among all records (:func:`run_bounds`);
- :mod:`~toolkit.events.derive`: the tables derived from all records, sharing their work (:func:`derive_tables`);
- :mod:`~toolkit.events.config`: configuration dumps (:func:`extract_config`);
- :mod:`~toolkit.events.shapes`: lines no template classifies (:func:`unknown_shapes`);
- :mod:`~toolkit.events.catalogue_view`: the catalogue as a table with hit counts (:func:`catalogue_table`).
"""

from __future__ import annotations

from toolkit.events.catalogue_view import catalogue_table, template_hits
from toolkit.events.classifier import EVENT_COLUMNS, EVENT_FIELDS, RECORD_KEEP, classify
from toolkit.events.config import extract_config
from toolkit.events.bounds import run_bounds
from toolkit.events.runs import NIFI_BOOTSTRAP_LOGGER, is_nifi_bootstrap, tag_runs
from toolkit.events.shapes import message_shape, unknown_shapes

__all__ = [
    "EVENT_COLUMNS",
    "EVENT_FIELDS",
    "NIFI_BOOTSTRAP_LOGGER",
    "RECORD_KEEP",
    "catalogue_table",
    "classify",
    "extract_config",
    "is_nifi_bootstrap",
    "message_shape",
    "run_bounds",
    "tag_runs",
    "template_hits",
    "unknown_shapes",
]
