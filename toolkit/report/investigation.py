"""One analysed bundle inside a notebook: the pipeline's investigation and the scope charts are drawn for."""

from __future__ import annotations

import functools
import importlib
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from toolkit.progress import Progress, default_progress
from toolkit.report.channel import KernelOutcome, failures_reported
from toolkit.report.parameters import ReportParameters

#: Where, inside ``out_dir``, the engine's own logs go (Spark driver log, kernel output).
LOG_DIR = "logs"


@dataclass
class ReportView:
    """What a report or the Explorer shows of one investigation: its findings within the scope
    (hosts, tasks, window) the parameters ask for. The analysis behind it is ``toolkit.pipeline.run``'s."""

    params: ReportParameters
    analysis: Any  # toolkit.pipeline.Analysis
    findings: list
    hosts: list[str] | None
    tasks: list[str] | None
    started: datetime
    seconds: float
    notes: list[str] = field(default_factory=list)
    progress: Progress | None = None
    findings_path: Path | None = None  # out_dir/findings.json, every finding (not only those in scope)
    #: findings of the bundle that the scope (hosts, tasks) leaves out
    outside: list = field(default_factory=list)

    def scope_text(self) -> str:
        """The scope in words: ``hosts a, b; tasks 0_1`` (empty for the whole bundle)."""
        return "; ".join(part for part in (("hosts " + ", ".join(self.hosts)) if self.hosts else "",
                                           ("tasks " + ", ".join(self.tasks)) if self.tasks else "") if part)

    @property
    def timeline(self):
        return self.analysis.timeline

    @property
    def window(self):
        """The explicit ``time_window`` parameter (frames are cut to it on Spark), or None."""
        return self.params.time_window

    @functools.cached_property
    def frames(self):
        """The report's chart frames (``toolkit.viz.ScopedFrames`` of its scope), each queried once."""
        from toolkit.viz import ScopedFrames

        return ScopedFrames(self.timeline, hosts=self.hosts, tasks=self.tasks, window=self.window)

    def say(self, message: str) -> None:
        """Report a stage (drawing a section) the same way the analysis reported its stages."""
        if self.progress is not None:
            self.progress(message)


def spark_log_file(out_dir: Path) -> Path:
    """``OUT/logs/spark.log``: Spark's own log for a run writing into ``out_dir``."""
    return Path(out_dir) / LOG_DIR / "spark.log"


def investigate(params: ReportParameters, progress: Progress | None = None) -> ReportView:
    """Start Spark and run ``toolkit.pipeline.run`` with the parameters' analysis options (which also
    writes ``out_dir/findings.json``); then narrow the findings to the scope the parameters ask for.

    ``toolkit.viz`` (with Altair, seconds to import) is imported on a thread meanwhile: import it after
    this returns rather than before."""
    from toolkit.jvm import input_bytes
    from toolkit.pipeline import run
    from toolkit.spark import get_spark

    channel = params.channel
    say = progress or (channel.progress() if channel is not None else default_progress())
    t0 = time.monotonic()
    # The charts' module (Altair) takes seconds to import; it loads while Spark starts and works (mostly
    # waiting on the JVM).
    threading.Thread(target=importlib.import_module, args=("toolkit.viz",), name="import-viz", daemon=True).start()
    say("starting Spark")
    bundle = params.bundle if len(params.inputs) == 1 else list(params.inputs)
    with failures_reported(channel):
        spark = get_spark(master=params.spark_master, remote=params.spark_remote,
                          log_file=spark_log_file(params.out_dir), input_bytes=input_bytes(list(params.inputs)),
                          verbose=channel.verbose if channel is not None else None)
        inv = run(spark, bundle, params.out_dir, params.options, progress=say)
    if channel is not None:
        readability = inv.analysis.ingest.readability()
        channel.write(KernelOutcome(status="analysed", ingest_status=readability["status"],
                                    ingest_message=readability["message"]))
    analysis, findings = inv.analysis, inv.findings
    notes: list[str] = []
    hosts = params.hosts
    if params.app_id:
        # app_id narrows the hosts to those whose processes ran that application.
        rows = (analysis.timeline.process_runs.where(f"app_id = '{params.app_id.replace(chr(39), '')}'")
                .select("host").distinct().limit(1000).collect())
        app_hosts = sorted(r["host"] for r in rows)
        if not app_hosts:
            notes.append(f"No process of app_id {params.app_id!r} was found; charts show every host.")
        else:
            hosts = [h for h in (hosts or app_hosts) if h in app_hosts]
    known_hosts = set(analysis.ingest.log_hosts) | {e["host"] for e in analysis.ingest.evidence}
    unknown = [h for h in params.hosts or [] if h not in known_hosts]
    if unknown:
        notes.append(f"No host {', '.join(map(repr, unknown))} in this bundle; its hosts: "
                     f"{', '.join(sorted(known_hosts)) or 'none'}.")
    outside: list = []
    if hosts or params.tasks:
        outside = [f for f in findings if not _in_scope(f, hosts, params.tasks)]
        findings = [f for f in findings if _in_scope(f, hosts, params.tasks)]
    totals = analysis.ingest.totals
    say(f"analysis done: {totals['files']} files, {totals['lines']} lines, {len(findings)} findings "
        f"in {time.monotonic() - t0:.1f} s")
    return ReportView(params=params, analysis=analysis, findings=findings, hosts=hosts, tasks=params.tasks,
                      started=inv.started, seconds=time.monotonic() - t0, notes=notes, progress=say,
                      findings_path=inv.findings_path, outside=outside)


def _in_scope(finding, hosts: list[str] | None, tasks: list[str] | None) -> bool:
    if hosts and finding.hosts and not set(finding.hosts) & set(hosts):
        return False
    if tasks and finding.tasks and not set(finding.tasks) & set(tasks):
        return False
    return True
