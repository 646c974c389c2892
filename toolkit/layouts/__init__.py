"""Raw log lines -> records, on Spark: the layout catalogue, detection per file, and the two-pass parse.

* :mod:`~toolkit.layouts.catalogue`: layouts and wrappers as data (``catalogue/layouts.toml``);
* :mod:`~toolkit.layouts.detection`: each file's layout, wrappers and clean-up, from its first lines (driver);
* :mod:`~toolkit.layouts.fields`: one line's fields as Spark column expressions, per read plan;
* :mod:`~toolkit.layouts.timestamps`: stamp text -> UTC timestamps;
* :mod:`~toolkit.layouts.reading`: reading the files, one union of read plans; damaged gzips;
* :mod:`~toolkit.layouts.records`: the two passes, continuation folding, midnight rollover -> records.
"""

from toolkit.layouts.catalogue import (
    FIELD_SEP, FIELDS, Catalogue, Layout, Wrapper, carries_line_hosts, generic_fields, load_layouts,
)
from toolkit.layouts.detection import Detection, detect_file, detect_lines
from toolkit.layouts.records import LINE_COUNT_SCHEMA, ParsedLogs, parse_logs

__all__ = ["FIELDS", "FIELD_SEP", "LINE_COUNT_SCHEMA", "Catalogue", "Detection", "Layout", "ParsedLogs",
           "Wrapper", "carries_line_hosts", "detect_file", "detect_lines", "generic_fields", "load_layouts",
           "parse_logs"]
