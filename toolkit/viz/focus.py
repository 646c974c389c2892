"""The incident window: where the charts open.

The findings' times and evidence lines, and the process crashes and stops near them, grouped into one
time range or a few (a broken time axis) when long quiet stretches separate them. Pandas only.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import pandas as pd


#: Context kept on each side of the incident, as a share of its span, and at least this much.
FOCUS_MARGIN = 0.12
FOCUS_MIN_MARGIN = pd.Timedelta(seconds=20)


def _ts(value) -> pd.Timestamp | None:
    if value is None:
        return None
    ts = pd.to_datetime(value, errors="coerce")
    if pd.isna(ts):
        return None
    if ts.tzinfo is not None:
        ts = ts.tz_convert("UTC").tz_localize(None)
    return ts


def _pad(times: Sequence[pd.Timestamp]) -> tuple[pd.Timestamp, pd.Timestamp] | None:
    times = sorted(t for t in times if t is not None)
    if not times:
        return None
    start, end = times[0], times[-1]
    margin = max((end - start) * FOCUS_MARGIN, FOCUS_MIN_MARGIN)
    return start - margin, end + margin


#: Quiet stretches longer than this (and than a share of the whole span) break the time axis.
FOCUS_BREAK = pd.Timedelta(minutes=3)
FOCUS_BREAK_SHARE = 0.15
#: At most this many panels side by side.
MAX_FOCUS_RANGES = 3


def _evidence_times(finding) -> list[pd.Timestamp]:
    get = finding.get if isinstance(finding, dict) else (lambda k: getattr(finding, k, None))
    times = [_ts(get("ts"))]
    for e in get("evidence") or []:
        times.append(_ts(e.get("ts") if isinstance(e, dict) else getattr(e, "ts", None)))
    return [t for t in times if t is not None]


def _clusters(times: Sequence[pd.Timestamp]) -> list[tuple[pd.Timestamp, pd.Timestamp]]:
    """Group moments separated by long quiet stretches; each group padded with context."""
    times = sorted(set(times))
    if not times:
        return []
    span = times[-1] - times[0]
    cut = max(FOCUS_BREAK, span * FOCUS_BREAK_SHARE)
    groups = [[times[0]]]
    for t in times[1:]:
        if t - groups[-1][-1] > cut:
            groups.append([t])
        else:
            groups[-1].append(t)
    while len(groups) > MAX_FOCUS_RANGES:
        # Merge the two neighbours with the shortest quiet stretch between them.
        i = min(range(len(groups) - 1), key=lambda k: groups[k + 1][0] - groups[k][-1])
        groups[i:i + 2] = [groups[i] + groups[i + 1]]
    return [r for r in (_pad(g) for g in groups) if r]


def finding_window(finding) -> list[tuple[pd.Timestamp, pd.Timestamp]] | None:
    """The time ranges of one finding: its time and its evidence lines, with context on both sides
    (several ranges when long quiet stretches separate them)."""
    return _clusters(_evidence_times(finding)) or None


def incident_window(findings: Iterable, runs: pd.DataFrame | None = None,
                    ) -> list[tuple[pd.Timestamp, pd.Timestamp]] | None:
    """Where the charts open: the findings (their times and evidence) and the process crashes and
    stops near them, with context on both sides, as one range or a few (a broken axis) when long
    quiet stretches separate them. Naive UTC times; None when there is nothing to focus on (the
    charts then show the whole log)."""
    times: list[pd.Timestamp] = []
    for f in findings or []:
        times += _evidence_times(f)
    if runs is not None and not runs.empty and "end" in runs:
        ended = runs[runs["end"].notna() & runs.get("end_kind", pd.Series("", index=runs.index))
                     .isin(["crash", "error", "clean"])]
        ends = [t for t in (_ts(v) for v in ended["end"]) if t is not None]
        if times:
            # Crashes and stops inside (or next to) the findings' span belong to the incident.
            low, high = min(times), max(times)
            near = (high - low) * 0.25 + pd.Timedelta(minutes=5)
            times += [t for t in ends if low - near <= t <= high + near]
        else:
            times += [t for kind, t in zip(ended["end_kind"], ended["end"]) if kind in ("crash", "error")
                      for t in [_ts(t)] if t is not None]
    return _clusters(times) or None
