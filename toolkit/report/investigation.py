"""One analysed bundle inside a notebook: analysis, findings, the scope charts are drawn for."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone as dt_timezone
from pathlib import Path
from typing import Any

from toolkit.progress import Progress, default_progress
from toolkit.report.parameters import ReportParameters

#: Where, inside ``out_dir``, the engine's own logs go (Spark driver log, kernel output).
LOG_DIR = "logs"


@dataclass
class Investigation:
    """One analysed bundle with its findings and the scope (hosts, tasks, window) charts are drawn for."""

    params: ReportParameters
    analysis: Any  # toolkit.pipeline.Analysis
    findings: list
    hosts: list[str] | None
    tasks: list[str] | None
    started: datetime
    seconds: float
    notes: list[str] = field(default_factory=list)
    progress: Progress | None = None

    @property
    def timeline(self):
        return self.analysis.timeline

    @property
    def window(self):
        """The explicit ``time_window`` parameter (frames are cut to it on Spark), or None."""
        return self.params.time_window

    def say(self, message: str) -> None:
        """Report a stage (drawing a section) the same way the analysis reported its stages."""
        if self.progress is not None:
            self.progress(message)


def spark_log_file(out_dir: Path) -> Path:
    """``OUT/logs/spark.log``: Spark's own log for a run writing into ``out_dir``."""
    return Path(out_dir) / LOG_DIR / "spark.log"


def investigate(params: ReportParameters, progress: Progress | None = None) -> Investigation:
    """Start Spark, analyse the bundle (the parse cache makes a re-run cheap) and run the detectors."""
    from toolkit.cache import ParseCache
    from toolkit.detectors import run_detectors
    from toolkit.pipeline import analyse
    from toolkit.spark import get_spark

    say = progress or default_progress()
    started = datetime.now(dt_timezone.utc)
    t0 = time.monotonic()
    say("starting Spark")
    spark = get_spark(master=params.spark_master, remote=params.spark_remote,
                      log_file=spark_log_file(params.out_dir))
    analysis = analyse(spark, params.bundle, params.out_dir, cache=ParseCache(), progress=say)
    say("running the detectors")
    findings = run_detectors(analysis.timeline)
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
    if hosts or params.tasks:
        findings = [f for f in findings if _in_scope(f, hosts, params.tasks)]
    totals = analysis.ingest.totals
    say(f"analysis done: {totals['files']} files, {totals['lines']} lines, {len(findings)} findings "
        f"in {time.monotonic() - t0:.1f} s")
    return Investigation(params=params, analysis=analysis, findings=findings, hosts=hosts, tasks=params.tasks,
                         started=started, seconds=time.monotonic() - t0, notes=notes, progress=say)


def _in_scope(finding, hosts: list[str] | None, tasks: list[str] | None) -> bool:
    if hosts and finding.hosts and not set(finding.hosts) & set(hosts):
        return False
    if tasks and finding.tasks and not set(finding.tasks) & set(tasks):
        return False
    return True


def save_findings(inv: Investigation) -> Path:
    """Write ``out_dir/findings.json`` (the ranked findings plus the bundle and parameters)."""
    from toolkit.detectors import findings_to_json

    path = inv.params.out_dir / "findings.json"
    data = findings_to_json(inv.findings, bundle=str(inv.params.bundle),
                            generated_at=inv.started.isoformat(timespec="seconds"))
    path.write_text(json.dumps(data, indent=2, default=str), encoding="utf-8")
    return path
