"""Report and notebook parameters: checked once, normalised, one sentence when unusable."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd

from toolkit.options import AnalysisOptions, options_from
from toolkit.report.channel import ChannelError, KernelChannel, failures_reported
from toolkit.report.errors import ParameterError

#: ``svg``: static inline SVG only; ``html``: interactive Vega with its JavaScript inline and an SVG
#: fallback (the offline HTML report); ``interactive``: a live widget in JupyterLab (offline, no CDN).
CHART_MODES = ("svg", "html", "interactive")

#: ``incident``: charts open on the findings and crashes with context on both sides; ``all``: the whole log.
VIEWS = ("incident", "all")


@dataclass(frozen=True)
class ReportParameters:
    """Validated report parameters (paths absolute, times UTC, lists normalised).

    ``bundle`` is the bundle's (first) path; ``bundles`` every path when several are read as one bundle.
    ``timezone`` is the zone of the chart axes (``report --chart-timezone``); the logs' zone is
    ``options.log_timezone``."""

    bundle: Path
    out_dir: Path
    time_window: tuple[datetime | None, datetime | None] | None = None
    hosts: list[str] | None = None
    tasks: list[str] | None = None
    app_id: str | None = None
    spark_master: str | None = None
    spark_remote: str | None = None
    timezone: str = "UTC"
    charts: str = "svg"
    view: str = "incident"
    options: AnalysisOptions = AnalysisOptions()
    bundles: tuple[Path, ...] = ()
    #: set when ``stream-incident report`` runs the notebook: where its stage lines and outcome go
    channel: KernelChannel | None = None

    @property
    def inputs(self) -> tuple[Path, ...]:
        """Every path of the bundle (one, unless several were given)."""
        return self.bundles or (self.bundle,)

    @property
    def bundle_name(self) -> str:
        """The bundle's name in titles and the verdict: its folder or file name(s)."""
        return ", ".join(path.name for path in self.inputs)

    def bundle_parameter(self) -> str | list[str]:
        """The bundle as the notebook's ``bundle`` parameter: one path, or a list of them."""
        return str(self.bundle) if len(self.inputs) == 1 else [str(path) for path in self.inputs]

    def as_table(self) -> pd.DataFrame:
        """The parameters as a two-column table for the report."""
        window = ("all" if not self.time_window else
                  f"{_fmt(self.time_window[0]) or '…'} → {_fmt(self.time_window[1]) or '…'}")
        rows = [("bundle", ", ".join(str(path) for path in self.inputs)), ("out_dir", str(self.out_dir)), ("time_window (UTC)", window),
                ("hosts", ", ".join(self.hosts) if self.hosts else "all"),
                ("tasks", ", ".join(self.tasks) if self.tasks else "all"),
                ("app_id", self.app_id or "any"),
                ("spark", self.spark_remote or self.spark_master or os.environ.get("SPARK_REMOTE")
                 or os.environ.get("SPARK_MASTER") or "local[*] (embedded)"),
                ("chart time zone", self.timezone), ("charts", self.charts),
                ("chart time range", "the incident (zoom out for the rest)" if self.view == "incident" and not self.time_window
                 else "time_window" if self.time_window else "the whole log"),
                ("log time zone (hosts bundle.toml gives no zone, in [hosts.NAME] or [defaults])", self.options.log_timezone or "UTC"),
                ("parse cache", "on" if self.options.use_cache else "off"),
                ("redaction of records", "on" if self.options.redact else "off"),
                ("detectors", ", ".join(self.options.detectors) if self.options.detectors else "all"),
                ("user catalogue", str(self.options.catalogue) if self.options.catalogue else "none")]
        return pd.DataFrame(rows, columns=["parameter", "value"])


def _fmt(value: datetime | None) -> str | None:
    return value.strftime("%Y-%m-%d %H:%M:%S") if value else None


def _names(value: Any, what: str) -> list[str] | None:
    if value is None or value == "" or value == []:
        return None
    if isinstance(value, str):
        value = [v.strip() for v in value.split(",")]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ParameterError(f"{what} must be a list of non-empty names (or a comma-separated string), not {value!r}.")
    return [v.strip() for v in value]


def _time(value: Any, which: str) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        ts = pd.Timestamp(value)
    except (ValueError, TypeError):
        raise ParameterError(f"time_window {which} {value!r} is not an ISO 8601 time such as 2026-03-07T09:00:00Z.") from None
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return ts.to_pydatetime()


def validate_parameters(
    bundle: Any,
    out_dir: Any,
    time_window: Any = None,
    hosts: Any = None,
    tasks: Any = None,
    app_id: Any = None,
    spark_master: Any = None,
    spark_remote: Any = None,
    timezone: Any = "UTC",
    charts: Any = "svg",
    view: Any = "incident",
    *,
    log_timezone: Any = None,
    work_dir: Any = None,
    use_cache: Any = True,
    cache_dir: Any = None,
    redact: Any = True,
    detectors: Any = None,
    catalogue: Any = None,
    command_channel: Any = None,
) -> ReportParameters:
    """Check the report parameters and return them normalised; raise :class:`ParameterError` otherwise.

    ``log_timezone`` … ``catalogue`` are the analysis options (:class:`toolkit.options.AnalysisOptions`),
    the same for every entry point; the others only choose what the report shows. ``command_channel`` is set
    by ``stream-incident report`` only (:class:`toolkit.report.channel.KernelChannel`): an unusable parameter is
    then also written as the run's outcome."""
    try:
        channel = KernelChannel.from_parameter(command_channel)
    except ChannelError as exc:
        raise ParameterError(str(exc)) from None
    with failures_reported(channel):
        params = _validated(bundle, out_dir, time_window, hosts, tasks, app_id, spark_master, spark_remote, timezone,
                            charts, view, log_timezone=log_timezone, work_dir=work_dir, use_cache=use_cache,
                            cache_dir=cache_dir, redact=redact, detectors=detectors, catalogue=catalogue)
    return replace(params, channel=channel)


def _validated(bundle: Any, out_dir: Any, time_window: Any, hosts: Any, tasks: Any, app_id: Any, spark_master: Any,
               spark_remote: Any, timezone: Any, charts: Any, view: Any, *, log_timezone: Any, work_dir: Any,
               use_cache: Any, cache_dir: Any, redact: Any, detectors: Any, catalogue: Any) -> ReportParameters:
    """:func:`validate_parameters` without the channel."""
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    # One path, or several read as one bundle (``report A B --out OUT``, a list in the notebook).
    paths = list(bundle) if isinstance(bundle, (list, tuple)) and bundle else [bundle]
    if not all(path and isinstance(path, (str, os.PathLike)) for path in paths):
        raise ParameterError("bundle must be the path of a bundle directory, archive or log file.")
    bundle_paths = [Path(path).expanduser().resolve() for path in paths]
    for path, bundle_path in zip(paths, bundle_paths):
        if not bundle_path.exists():
            raise ParameterError(f"bundle {str(path)!r} does not exist (looked at {bundle_path}).")
    if not out_dir or not isinstance(out_dir, (str, os.PathLike)):
        raise ParameterError("out_dir must be the path of a directory for the report and its tables.")
    out_path = Path(out_dir).expanduser().resolve()
    if out_path.exists() and not out_path.is_dir():
        raise ParameterError(f"out_dir {str(out_dir)!r} exists and is not a directory.")
    window = None
    if time_window not in (None, "", [], ()):
        if isinstance(time_window, str) or not isinstance(time_window, (list, tuple)) or len(time_window) != 2:
            raise ParameterError(f"time_window must be [start, end] (either may be None), not {time_window!r}.")
        window = (_time(time_window[0], "start"), _time(time_window[1], "end"))
        if window[0] and window[1] and window[0] >= window[1]:
            raise ParameterError(f"time_window start {window[0]} is not before its end {window[1]}.")
        if window == (None, None):
            window = None
    if app_id is not None and (not isinstance(app_id, str) or not app_id.strip()):
        raise ParameterError(f"app_id must be an application id string or None, not {app_id!r}.")
    if spark_master and spark_remote:
        raise ParameterError("give spark_master or spark_remote, not both.")
    if spark_master is not None and not isinstance(spark_master, str):
        raise ParameterError(f"spark_master must be a URL such as local[*] or spark://host:7077, not {spark_master!r}.")
    if spark_remote is not None and (not isinstance(spark_remote, str) or not spark_remote.startswith("sc://")):
        raise ParameterError(f"spark_remote must be a Spark Connect URL starting with sc://, not {spark_remote!r}.")
    try:
        ZoneInfo(str(timezone))
    except (ZoneInfoNotFoundError, ValueError):
        raise ParameterError(f"timezone {timezone!r} is not an IANA zone name such as UTC or Europe/Berlin.") from None
    if log_timezone not in (None, ""):
        try:
            ZoneInfo(str(log_timezone))
        except (ZoneInfoNotFoundError, ValueError):
            raise ParameterError(f"log_timezone {log_timezone!r} is not an IANA zone name such as UTC or "
                                 "Europe/Berlin.") from None
    for name, value in (("use_cache", use_cache), ("redact", redact)):
        if not isinstance(value, bool):
            raise ParameterError(f"{name} must be True or False, not {value!r}.")
    for name, value in (("work_dir", work_dir), ("cache_dir", cache_dir), ("catalogue", catalogue)):
        if value not in (None, "") and not isinstance(value, (str, os.PathLike)):
            raise ParameterError(f"{name} must be a directory path or None, not {value!r}.")
    options = options_from(log_timezone=log_timezone, work_dir=work_dir, use_cache=use_cache, cache_dir=cache_dir,
                           redact=redact, detectors=_names(detectors, "detectors"), catalogue=catalogue or None)
    try:
        options.user_catalogue()  # a user catalogue with problems stops here, before Spark starts
    except ValueError as exc:  # toolkit.catalogue.CatalogueError
        raise ParameterError(str(exc)) from None
    if options.detectors:
        from toolkit.detectors import registered_detectors

        unknown = sorted(set(options.detectors) - set(registered_detectors()))
        if unknown:
            raise ParameterError(f"detectors names unknown detector(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(sorted(registered_detectors()))}.")
    if charts not in CHART_MODES:
        raise ParameterError(f"charts must be one of {', '.join(CHART_MODES)}, not {charts!r}.")
    if view not in VIEWS:
        raise ParameterError(f"view must be one of {', '.join(VIEWS)}, not {view!r}.")
    return ReportParameters(bundle=bundle_paths[0], bundles=tuple(bundle_paths) if len(bundle_paths) > 1 else (),
                            out_dir=out_path, time_window=window,
                            hosts=_names(hosts, "hosts"), tasks=_names(tasks, "tasks"),
                            app_id=app_id.strip() if app_id else None, spark_master=spark_master or None,
                            spark_remote=spark_remote or None, timezone=str(timezone), charts=charts,
                            view=view, options=options)
