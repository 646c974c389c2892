"""How a bundle is analysed: one options object shared by every entry point.

``stream-incident parse|timeline|detect|report``, the notebooks and the Explorer all build an
:class:`AnalysisOptions` and hand it to :func:`toolkit.pipeline.run` (or ``analyse``), so the same bundle
with the same options gives the same tables and the same ``findings.json`` whichever door it came in by.
The command-line flags that fill it are declared once here too (:func:`add_analysis_arguments`), with the
other argument groups every analysis command shares (bundle, Spark, output: :func:`add_command_arguments`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable


@dataclass(frozen=True)
class AnalysisOptions:
    """Everything that changes what the pipeline computes (not where charts are drawn or how fast).

    * ``log_timezone`` — IANA zone for hosts ``bundle.toml`` gives no zone (neither its ``[hosts.NAME]`` nor its
      ``[defaults]`` timezone, which both win); default UTC;
    * ``work_dir`` — where archives are extracted (default ``OUT/work``);
    * ``use_cache`` / ``cache_dir`` — the parse cache (default on, ``$STREAM_INCIDENT_CACHE`` or
      ``~/.cache/stream-incident``);
    * ``redact`` — mask secret-looking values in ``records.parquet`` (events and config always are);
    * ``detectors`` — run only these detector ids (default: all);
    * ``catalogue`` — a user catalogue folder whose ``*.toml`` files add templates and layouts to the shipped ones
      (:mod:`toolkit.catalogue.user`; :func:`options_from` defaults it to ``$STREAM_INCIDENT_CATALOGUE``).
    """

    log_timezone: str | None = None
    work_dir: Path | None = None
    use_cache: bool = True
    cache_dir: Path | None = None
    redact: bool = True
    detectors: tuple[str, ...] | None = None
    catalogue: Path | None = None

    def __post_init__(self) -> None:
        # Normalised here so two entry points given the same values build equal objects.
        if self.work_dir is not None:
            object.__setattr__(self, "work_dir", Path(self.work_dir).expanduser().resolve())
        if self.cache_dir is not None:
            object.__setattr__(self, "cache_dir", Path(self.cache_dir).expanduser().resolve())
        if self.detectors is not None:
            object.__setattr__(self, "detectors", tuple(dict.fromkeys(self.detectors)) or None)
        if self.log_timezone == "":
            object.__setattr__(self, "log_timezone", None)
        if self.catalogue is not None:
            object.__setattr__(self, "catalogue", Path(self.catalogue).expanduser().resolve())

    def user_catalogue(self) -> Any:
        """The checked :class:`toolkit.catalogue.user.UserCatalogue` of ``catalogue``, or None without one.

        Raises :class:`toolkit.catalogue.CatalogueError` naming every problem of its files."""
        if self.catalogue is None:
            return None
        from toolkit.catalogue.user import load_user_catalogue

        return load_user_catalogue(self.catalogue)

    def parse_cache(self) -> Any:
        """The :class:`toolkit.cache.ParseCache` these options ask for, or None with the cache off."""
        if not self.use_cache:
            return None
        from toolkit.cache import ParseCache

        return ParseCache(self.cache_dir)

    def export_cache_dir(self) -> Path | None:
        """Where rewritten log-platform exports are kept (inside the parse cache), or None with the cache off."""
        if not self.use_cache:
            return None
        from toolkit.bundle.export_cache import CACHE_FOLDER
        from toolkit.shipped import default_cache_dir

        return (self.cache_dir or default_cache_dir()) / CACHE_FOLDER

    def as_parameters(self) -> dict[str, Any]:
        """The options as notebook parameters (plain JSON values; see ``notebooks/incident_report.ipynb``)."""
        return {"log_timezone": self.log_timezone, "work_dir": str(self.work_dir) if self.work_dir else None,
                "use_cache": self.use_cache, "cache_dir": str(self.cache_dir) if self.cache_dir else None,
                "redact": self.redact, "detectors": list(self.detectors) if self.detectors else None,
                "catalogue": str(self.catalogue) if self.catalogue else None}


def options_from(log_timezone: str | None = None, work_dir: str | Path | None = None, use_cache: bool = True,
                 cache_dir: str | Path | None = None, redact: bool = True,
                 detectors: Iterable[str] | str | None = None,
                 catalogue: str | Path | None = None) -> AnalysisOptions:
    """Options from plain values (notebook parameters): a comma-separated string names detectors too; without
    ``catalogue``, the user catalogue is ``$STREAM_INCIDENT_CATALOGUE`` when that is set."""
    if isinstance(detectors, str):
        detectors = [d.strip() for d in detectors.split(",") if d.strip()]
    if not catalogue:
        from toolkit.catalogue.user import default_folder

        catalogue = default_folder()
    return AnalysisOptions(log_timezone=log_timezone or None, work_dir=Path(work_dir) if work_dir else None,
                           use_cache=bool(use_cache), cache_dir=Path(cache_dir) if cache_dir else None,
                           redact=bool(redact), detectors=tuple(detectors) if detectors else None,
                           catalogue=Path(catalogue) if catalogue else None)


#: The argument groups every analysis command (``parse``, ``timeline``, ``catalogue``, ``detect``, ``report``)
#: shows in its ``--help``, each filled by one function below so that a flag means the same on every command.
BUNDLE_GROUP, ANALYSIS_GROUP, SPARK_GROUP, OUTPUT_GROUP = "bundle", "analysis", "Spark", "output"

BUNDLE_HELP = "bundle directory, archive, or loose log files (one or more)"


def _group(parser: argparse.ArgumentParser, title: str) -> argparse._ArgumentGroup:
    """The parser's argument group called ``title``, made on first use (a command may add to it in several calls)."""
    for group in parser._action_groups:
        if group.title == title:
            return group
    return parser.add_argument_group(title)


def add_bundle_arguments(parser: argparse.ArgumentParser, *, positional: bool = True) -> None:
    """Add the bundle paths: one or more, as the positional ``BUNDLE`` (or, for ``catalogue``, whose bundle is
    optional, as ``--bundle``), dest ``bundle`` (a list of paths) either way."""
    group = _group(parser, BUNDLE_GROUP)
    if positional:
        group.add_argument("bundle", nargs="+", metavar="BUNDLE", help=BUNDLE_HELP)
    else:
        group.add_argument("--bundle", nargs="+", metavar="BUNDLE", help=BUNDLE_HELP)


def add_analysis_arguments(parser: argparse.ArgumentParser, *, detectors: bool = True) -> None:
    """Add the flags behind :class:`AnalysisOptions` to a command's parser (group ``analysis``).

    ``--timezone`` and ``--log-timezone`` are one flag on every command: the zone of the logs (``report`` names
    the zone of its chart axes ``--chart-timezone``)."""
    group = _group(parser, ANALYSIS_GROUP)
    group.add_argument("--timezone", "--log-timezone", dest="log_timezone", metavar="ZONE",
                       help="IANA zone of timestamps printed without an offset, for hosts that bundle.toml gives no zone "
                            "(its [hosts.NAME] and [defaults] timezone win; default UTC)")
    group.add_argument("--work-dir", help="where archives are extracted (default: OUT/work)")
    group.add_argument("--no-cache", action="store_true", help="parse every file again, ignoring the parse cache")
    group.add_argument("--cache-dir",
                       help="parse cache location (default: $STREAM_INCIDENT_CACHE or ~/.cache/stream-incident)")
    group.add_argument("--no-redact", action="store_true",
                       help="keep secret-looking values in records.parquet (local use only; events and config stay redacted)")
    group.add_argument("--catalogue", metavar="DIR",
                       help="user catalogue folder: its *.toml files add templates and layouts to the shipped ones "
                            "(default: $STREAM_INCIDENT_CATALOGUE; check a file with 'catalogue --check FILE')")
    if detectors:
        group.add_argument("--only", action="append", metavar="DETECTOR",
                           help="run only this detector (repeatable)")


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """Add which Spark runs the command (``--master`` or ``--remote``) and ``--verbose`` (group ``Spark``)."""
    group = _group(parser, SPARK_GROUP)
    target = group.add_mutually_exclusive_group()
    target.add_argument("--master", help="Spark master URL (default: $SPARK_MASTER or local[*])")
    target.add_argument("--remote", help="Spark Connect URL, e.g. sc://host:15002 (default: $SPARK_REMOTE)")
    group.add_argument("--verbose", action="store_true",
                       help="also show Spark's own log on the console (default: only in OUT/logs/, "
                            "without --out in $STREAM_INCIDENT_LOG_FILE)")


def add_output_arguments(parser: argparse.ArgumentParser, *, out_help: str, out_required: bool) -> None:
    """Add ``--out`` (what it holds, and whether it is required, is the command's own) and ``--quiet`` (group
    ``output``)."""
    group = _group(parser, OUTPUT_GROUP)
    group.add_argument("--out", metavar="OUT", required=out_required, default=None, help=out_help)
    group.add_argument("--quiet", action="store_true", help="no progress lines on stderr")


def add_command_arguments(parser: argparse.ArgumentParser, *, out_help: str, out_required: bool,
                          detectors: bool, bundle_positional: bool = True) -> None:
    """Every group an analysis command shares, in the order its ``--help`` lists them."""
    add_bundle_arguments(parser, positional=bundle_positional)
    add_output_arguments(parser, out_help=out_help, out_required=out_required)
    add_analysis_arguments(parser, detectors=detectors)
    add_spark_arguments(parser)


def options_from_args(args: argparse.Namespace) -> AnalysisOptions:
    """The :class:`AnalysisOptions` of parsed command-line arguments (see :func:`add_analysis_arguments`).

    A user catalogue (``--catalogue`` or ``$STREAM_INCIDENT_CATALOGUE``) is checked here, before Spark starts:
    one with problems raises :class:`toolkit.catalogue.CatalogueError` (exit code 2)."""
    options = options_from(log_timezone=getattr(args, "log_timezone", None), work_dir=getattr(args, "work_dir", None),
                           use_cache=not getattr(args, "no_cache", False), cache_dir=getattr(args, "cache_dir", None),
                           redact=not getattr(args, "no_redact", False), detectors=getattr(args, "only", None),
                           catalogue=getattr(args, "catalogue", None))
    options.user_catalogue()
    return options
