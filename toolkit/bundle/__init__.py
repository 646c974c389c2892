"""Incident bundles: find the evidence files, extract archives safely, attribute hosts.

A bundle is a directory, a ``.tar``/``.tar.gz``/``.tgz``/``.zip`` archive, or loose files.
Logs may be plain, ``.gz`` or rotated (``app.log.1``, ``app.log.2026-01-05``); an intact ``.gz`` is
read by Spark as it is, a damaged one is recovered on the driver (:mod:`toolkit.bundle.gzip_logs`).
Archives (nested too) are extracted into a work directory with no path traversal, no links, no
device files and caps on size, ratio and count; every refusal becomes an :class:`IngestProblem`
and the run goes on.

Optional ``bundle.toml`` at the bundle root::

    app_id = "orders-agg"
    [defaults]
    timezone = "UTC"              # zone of timestamps printed without an offset
    [hosts.orders-agg-0]
    timezone = "Europe/Berlin"
    clock_offset_ms = 0           # this host's clock minus true time; subtracted from its timestamps
    date = "2026-03-07"           # for layouts that print a time without a date

A key the toolkit does not read and a ``[hosts.NAME]`` section that matches no host (names match
exactly, case included) are problem rows, not errors (:mod:`~toolkit.bundle.settings`).

The package, by job: :mod:`~toolkit.bundle.model` (what an opened bundle holds),
:mod:`~toolkit.bundle.settings` (``bundle.toml``, host attribution), :mod:`~toolkit.bundle.files`
(rotated names, Spark-safe names, binary content), :mod:`~toolkit.bundle.archives` (the member
policy and safe extraction), :mod:`~toolkit.bundle.gzip_logs` (gzip logs) and
:mod:`~toolkit.bundle.discovery` (the walk).
"""

from toolkit.bundle.archives import ARCHIVE_SUFFIXES
from toolkit.bundle.discovery import OUTPUT_MARKER, WORK_MARKER, mark_output_dir, open_bundle
from toolkit.bundle.files import host_from_file_name, looks_like_log_name
from toolkit.bundle.gzip_logs import gunzip_to
from toolkit.bundle.model import (BUNDLE_META_FILES, Bundle, BundleError, EvidenceItem, HostSettings,
                                  IngestProblem, Limits, LogFile)
from toolkit.bundle.settings import read_bundle_toml

__all__ = [
    "ARCHIVE_SUFFIXES", "BUNDLE_META_FILES", "Bundle", "BundleError", "EvidenceItem", "HostSettings",
    "IngestProblem", "Limits", "LogFile", "OUTPUT_MARKER", "WORK_MARKER", "gunzip_to", "host_from_file_name",
    "looks_like_log_name", "mark_output_dir", "open_bundle", "read_bundle_toml",
]
