"""Bundle settings (``bundle.toml``) and which host each file belongs to."""

from __future__ import annotations

import tomllib
from datetime import date
from pathlib import Path, PurePosixPath
from typing import Iterable
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from toolkit.bundle.model import BundleError, HostSettings
from toolkit.bundle.files import host_from_file_name


def _check_zone(name: str, where: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise BundleError(f"{where}: unknown time zone {name!r}") from exc
    return name


def _host_settings(raw: dict, base: HostSettings, where: str) -> HostSettings:
    tz = _check_zone(str(raw.get("timezone", base.timezone)), where)
    offset = raw.get("clock_offset_ms", base.clock_offset_ms)
    if not isinstance(offset, int):
        raise BundleError(f"{where}: clock_offset_ms must be an integer number of milliseconds")
    day = raw.get("date", base.date)
    if day is not None:
        try:
            date.fromisoformat(str(day))
        except ValueError as exc:
            raise BundleError(f"{where}: date must look like 2026-03-07, got {day!r}") from exc
        day = str(day)
    return HostSettings(timezone=tz, clock_offset_ms=offset, date=day)


def read_bundle_toml(path: Path, default_timezone: str | None = None) -> dict:
    """Parse and validate ``bundle.toml``; returns hosts/defaults/app_id/notes.

    ``default_timezone`` (``--timezone``) is the zone of hosts the file gives none: a ``[hosts.NAME]``
    timezone wins, then ``[defaults] timezone``, then it, then UTC. The file describes its own evidence;
    the command line only fills what it leaves open.
    """
    base = HostSettings(timezone=_check_zone(default_timezone, "--timezone") if default_timezone else "UTC")
    if not path.is_file():
        return {"defaults": base, "hosts": {}, "app_id": None, "notes": None}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path.name} is not valid TOML: {exc}") from exc
    defaults = _host_settings(data.get("defaults", {}), base, "bundle.toml [defaults]")
    hosts = {
        str(name): _host_settings(raw or {}, defaults, f"bundle.toml [hosts.{name}]")
        for name, raw in (data.get("hosts") or {}).items()
    }
    return {"defaults": defaults, "hosts": hosts, "app_id": data.get("app_id"), "notes": data.get("notes")}



def attribute_host(rel: PurePosixPath, known_hosts: Iterable[str], inherited: str | None) -> str:
    """A file's host: a known host folder on its path, the host of the archive holding it, its top
    folder, a pod name in its file name, else ``unknown-host``."""
    known = set(known_hosts)
    for part in rel.parts[:-1]:
        if part in known:
            return part
    if inherited:
        return inherited
    if len(rel.parts) > 1:
        return rel.parts[0]
    guessed = host_from_file_name(rel.name)
    if guessed:
        return guessed
    return "unknown-host"

