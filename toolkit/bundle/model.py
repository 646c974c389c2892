"""What a bundle holds once opened: log files, other evidence, problems and per-host settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from zoneinfo import ZoneInfo

#: Files at the bundle root that describe the bundle rather than evidence.
BUNDLE_META_FILES = {"bundle.toml", "README.md", "EXPECTED.json", "README.txt"}


@dataclass(frozen=True)
class Limits:
    """Caps that keep hostile or broken archives from filling the disk."""

    max_members: int = 200_000
    max_total_bytes: int = 64 * 1024**3
    max_member_bytes: int = 16 * 1024**3
    #: uncompressed / compressed size above which an archive member is treated as a bomb
    max_ratio: float = 1000.0
    max_depth: int = 3


@dataclass(frozen=True)
class HostSettings:
    """Per-host settings from ``bundle.toml`` (or defaults)."""

    timezone: str = "UTC"
    clock_offset_ms: int = 0
    date: str | None = None

    def borrowed_date(self, mtime: float) -> tuple[str, str]:
        """The date a time-only layout borrows and where it comes from: ``date`` (``"config"``), else the day
        of ``mtime`` (a file's modification time, epoch seconds) in this zone (``"mtime"``)."""
        if self.date is not None:
            return self.date, "config"
        modified = datetime.fromtimestamp(mtime, tz=timezone.utc).astimezone(ZoneInfo(self.timezone))
        return modified.date().isoformat(), "mtime"


@dataclass(frozen=True)
class IngestProblem:
    """Something in the bundle that could not be read as intended, and why."""

    source: str
    problem: str
    detail: str = ""


@dataclass(frozen=True)
class LogFile:
    """A text log file ready for Spark: plain text, or an intact gzip that Spark decompresses itself."""

    source: str  # path inside the bundle, '/'-separated, archives shown as 'a.tar.gz!/x/y.log'
    local_path: Path
    host: str
    size: int  # bytes on disk of local_path (compressed bytes for a gzip)
    #: local_path is gzip (its name ends in '.gz', so Spark's reader decompresses it)
    gzip: bool = False
    #: a log-platform export rewritten for one host (:mod:`toolkit.bundle.exports`): the table that gives each
    #: line of ``local_path`` the number of its entry in the export, which records take as their ``line_no``
    entries: Path | None = None


@dataclass(frozen=True)
class EvidenceItem:
    """A non-log evidence file or directory (state dir, capture archive, JSON dump)."""

    source: str
    local_path: Path
    host: str
    kind: str


@dataclass
class Bundle:
    """Everything found in a bundle, ready for the layout and state readers."""

    root: Path
    work_dir: Path
    logs: list[LogFile] = field(default_factory=list)
    evidence: list[EvidenceItem] = field(default_factory=list)
    problems: list[IngestProblem] = field(default_factory=list)
    hosts: dict[str, HostSettings] = field(default_factory=dict)
    defaults: HostSettings = field(default_factory=HostSettings)
    app_id: str | None = None
    notes: str | None = None
    #: the caps the bundle was opened with (a damaged gzip found later is recovered under them)
    limits: Limits = field(default_factory=Limits)
    #: folders inside the bundle that the toolkit wrote (outputs, work folders), skipped as not evidence
    skipped_folders: list[str] = field(default_factory=list)
    #: the paths the bundle was opened from, as given (a directory, an archive, or loose files)
    inputs: list[Path] = field(default_factory=list)
    #: log-platform exports found while walking, rewritten per host once every file is known
    #: (:class:`toolkit.bundle.exports.PendingExport`)
    pending_exports: list = field(default_factory=list)
    #: per log file rewritten from an export (its source): the export's path, format id and entries it holds
    exported: dict[str, dict] = field(default_factory=dict)

    def settings_for(self, host: str) -> HostSettings:
        """Host settings, falling back to the bundle defaults."""
        return self.hosts.get(host, self.defaults)

    def line_host_settings(self, log: LogFile) -> list[tuple[str, str, int, str, str]]:
        """For a file whose lines name their host (a ``kubectl --prefix`` or compose prefix): each host with
        its own section, as (host, zone, clock offset, borrowed date, where the date comes from), sorted.

        A line whose prefix names one of these hosts is read with that host's settings; any other line with
        the file's. Empty when ``bundle.toml`` has no host sections.
        """
        if not self.hosts:
            return []
        mtime = log.local_path.stat().st_mtime
        return [(name, s.timezone, int(s.clock_offset_ms), *s.borrowed_date(mtime))
                for name, s in sorted(self.hosts.items())]

    def host_names(self) -> list[str]:
        """All hosts seen in logs or evidence, sorted."""
        return sorted({f.host for f in self.logs} | {e.host for e in self.evidence})


class BundleError(ValueError):
    """The bundle as a whole cannot be opened (missing path, unreadable bundle.toml...)."""
