"""How a bundle is analysed: one options object shared by every entry point.

``stream-incident parse|timeline|detect|report``, the notebooks and the Explorer all build an
:class:`AnalysisOptions` and hand it to :func:`toolkit.pipeline.run` (or ``analyse``), so the same bundle
with the same options gives the same tables and the same ``findings.json`` whichever door it came in by.
The command-line flags that fill it are declared once here too (:func:`add_analysis_arguments`).
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
    * ``detectors`` — run only these detector ids (default: all).
    """

    log_timezone: str | None = None
    work_dir: Path | None = None
    use_cache: bool = True
    cache_dir: Path | None = None
    redact: bool = True
    detectors: tuple[str, ...] | None = None

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
                "redact": self.redact, "detectors": list(self.detectors) if self.detectors else None}


def options_from(log_timezone: str | None = None, work_dir: str | Path | None = None, use_cache: bool = True,
                 cache_dir: str | Path | None = None, redact: bool = True,
                 detectors: Iterable[str] | str | None = None) -> AnalysisOptions:
    """Options from plain values (notebook parameters): a comma-separated string names detectors too."""
    if isinstance(detectors, str):
        detectors = [d.strip() for d in detectors.split(",") if d.strip()]
    return AnalysisOptions(log_timezone=log_timezone or None, work_dir=Path(work_dir) if work_dir else None,
                           use_cache=bool(use_cache), cache_dir=Path(cache_dir) if cache_dir else None,
                           redact=bool(redact), detectors=tuple(detectors) if detectors else None)


def add_analysis_arguments(parser: argparse.ArgumentParser, *, timezone_flags: tuple[str, ...] = ("--timezone",),
                           detectors: bool = True) -> None:
    """Add the flags behind :class:`AnalysisOptions` to a command's parser.

    ``timezone_flags`` names the log-zone flag: ``report`` keeps ``--timezone`` for its chart axes
    and takes the log zone as ``--log-timezone`` (accepted by every command).
    """
    parser.add_argument(*timezone_flags, "--log-timezone", dest="log_timezone", metavar="ZONE",
                        help="IANA zone of timestamps printed without an offset, for hosts that bundle.toml gives no zone "
                             "(its [hosts.NAME] and [defaults] timezone win; default UTC)")
    parser.add_argument("--work-dir", help="where archives are extracted (default: OUT/work)")
    parser.add_argument("--no-cache", action="store_true", help="parse every file again, ignoring the parse cache")
    parser.add_argument("--cache-dir",
                        help="parse cache location (default: $STREAM_INCIDENT_CACHE or ~/.cache/stream-incident)")
    parser.add_argument("--no-redact", action="store_true",
                        help="keep secret-looking values in records.parquet (local use only; events and config stay redacted)")
    if detectors:
        parser.add_argument("--only", action="append", metavar="DETECTOR",
                            help="run only this detector (repeatable)")


def options_from_args(args: argparse.Namespace) -> AnalysisOptions:
    """The :class:`AnalysisOptions` of parsed command-line arguments (see :func:`add_analysis_arguments`)."""
    return options_from(log_timezone=getattr(args, "log_timezone", None), work_dir=getattr(args, "work_dir", None),
                        use_cache=not getattr(args, "no_cache", False), cache_dir=getattr(args, "cache_dir", None),
                        redact=not getattr(args, "no_redact", False), detectors=getattr(args, "only", None))
