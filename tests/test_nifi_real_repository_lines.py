"""The catalogue classifies the repository checkpoint and restore lines of real nifi-app.log files.

Reads every log of ``tests/real_logs/nifi-and-wrappers`` (NiFi 1.x and 2.x, behind docker and other wrappers),
picks the lines of the FlowFile repository, the write-ahead logs and the content repository's archive cleanup, and
checks each one classifies to the event its text announces.
"""

from __future__ import annotations

import re
from pathlib import Path

from toolkit.events import classify
from toolkit.schemas import RECORD_SCHEMA

CORPUS = Path(__file__).parent / "real_logs" / "nifi-and-wrappers"
NIFI_LINE = re.compile(r"(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) (TRACE|DEBUG|INFO|WARN|ERROR) \[([^\]]*)\] (\S+) (.*)$")
#: text in the message -> the event it announces (first match wins)
EXPECTED = (
    ("Initiating checkpoint of FlowFile Repository", "FLOWFILE_REPO_CHECKPOINT_STARTED"),
    ("Successfully checkpointed FlowFile Repository with", "FLOWFILE_REPO_CHECKPOINTED"),
    ("Checkpointed Write-Ahead Log with", "WAL_CHECKPOINTED"),
    ("MinimalLockingWriteAheadLog@", None),  # decided below: checkpointed or finished recovering
    ("Successfully restored", "FLOWFILE_REPO_RESTORED"),
    ("Now checkpointing to ensure that Write-Ahead Log is in a consistent state", "WAL_RECOVERED"),
    ("swap files from Snapshot at", "WAL_SNAPSHOT_RECOVERED"),
    ("updates from journal", "WAL_JOURNAL_RECOVERED"),
    ("Recovering records from journal", "WAL_JOURNAL_RECOVERY_STARTED"),
    ("Recovering records from Write-Ahead Log at", "WAL_RECOVERY_STARTED"),
    ("Swap Files from Snapshot, ending with Transaction ID", "WAL_SNAPSHOT_RESTORED"),
    ("Initialized FlowFile Repository", "FLOWFILE_REPO_INITIALIZED"),
    ("will now allow writing to this container", "REPOSITORY_BACKPRESSURE_RELEASED"),
)


def _expected_event(message: str) -> str | None:
    for text, event in EXPECTED:
        if text in message:
            if event is None:
                if " checkpointed with " in message:
                    return "WAL_CHECKPOINTED"
                if "finished recovering records" in message:
                    return "WAL_RECOVERED"
                return None
            return event
    return None


def _corpus_lines() -> list[tuple[str, int, str, str, str, str, str]]:
    lines = []
    for path in sorted(CORPUS.glob("*.log")):
        for number, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            match = NIFI_LINE.search(raw)
            # a NiFi line re-logged inside another (bootstrap stdout) is the outer record's message: not ours here
            if match and _expected_event(match.group(5)) and not NIFI_LINE.search(match.group(5)):
                ts, level, thread, logger, message = match.groups()
                lines.append((path.name, number, level, thread, logger, message, _expected_event(message)))
    return lines


def test_real_repository_lines_classify_to_their_events(spark):
    lines = _corpus_lines()
    files = {name for name, *_ in lines}
    assert len(lines) >= 100 and len(files) >= 5
    assert any("nifi1" in f for f in files) and any("nifi2" in f for f in files)
    rows = [(name, number, "h1", None, None, level, thread, logger, message, None, "nifi", "missing", 1)
            for name, number, level, thread, logger, message, _ in lines]
    classified = classify(spark.createDataFrame(rows, RECORD_SCHEMA)).select("source", "line_no", "event").collect()
    got = {(r["source"], r["line_no"]): r["event"] for r in classified}
    wrong = [(name, number, message[:90], want, got.get((name, number)))
             for name, number, _level, _thread, _logger, message, want in lines if got.get((name, number)) != want]
    assert wrong == []
    assert {want for *_, want in lines} >= {"FLOWFILE_REPO_CHECKPOINTED", "FLOWFILE_REPO_RESTORED", "WAL_CHECKPOINTED",
                                            "WAL_RECOVERED", "WAL_JOURNAL_RECOVERED", "WAL_SNAPSHOT_RESTORED"}
