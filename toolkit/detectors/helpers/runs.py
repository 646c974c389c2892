"""Process runs as detectors read them: every run once per detector run, its versions, its processing
guarantee, whether its state updater ran.

Collected results are bounded and go through :mod:`toolkit.utc` (naive ``datetime`` values in UTC).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from pyspark.sql import functions as F

from toolkit.detectors.helpers.frames import all_rows, shared


#: Guarantee values that mean exactly-once (``exactly_once`` is the pre-2.6 / deprecated spelling).
EOS_PREFIX = "exactly_once"

#: A process run under exactly-once, as a Spark SQL condition on ``process_runs``.
EOS_RUN_SQL = f"startswith(lower(guarantee), '{EOS_PREFIX}')"

#: A process run of Kafka Streams or a Kafka client (a run's product may come from a client line first).
NOT_NIFI_SQL = "(product IS NULL OR product <> 'nifi')"


def is_eos_guarantee(guarantee: str | None) -> bool:
    """A collected ``processing.guarantee`` is one of the exactly-once values (:data:`EOS_RUN_SQL` in Spark SQL)."""
    return (guarantee or "").lower().startswith(EOS_PREFIX)


#: Process runs read onto the driver at most (one row per process start on a host).
MAX_RUNS = 10_000


def run_rows(tl: Any) -> list:
    """Every process run (all columns of ``process_runs``), read once per detector run and shared."""
    runs = tl.process_runs
    return shared(tl, "process_runs", lambda: all_rows(runs, "process runs", MAX_RUNS))


def run_versions(tl: Any, hosts: Iterable[str] | None = None) -> list[str]:
    """Distinct product versions of the process runs (of ``hosts`` when given), sorted (20 at most): the versions
    runs printed first, then the template ranges (``2.0-2.1``) of runs without a banner, so that the first item is a
    printed version whenever a run printed one.
    """
    wanted = set(hosts or [])
    runs = [r for r in run_rows(tl) if not wanted or r.host in wanted]
    printed = sorted({r.version for r in runs if r.version is not None})
    ranges = sorted({r.version_range for r in runs if r.version is None and r.version_range is not None})
    return [*printed, *ranges][:20]


#: Events only the state updater prints (or that name its thread).
STATE_UPDATER_EVENTS = ("STATE_UPDATER_START", "RESTORE_QUEUED")

#: Internal config that switches the state updater on (3.4-3.7, default off) or off (3.8-4.2, default on).
STATE_UPDATER_KEY = "__state.updater.enabled__"


def state_updater_of_runs(tl: Any, run_ids: Sequence[str]) -> dict[str, bool | None]:
    """Run id -> whether the state updater ran in it: ``True``/``False`` when the logs or config say, else ``None``.

    On: a ``__state.updater.enabled__ = true`` setting, a line of the updater thread (``state-updater [``
    prefix, a ``-StateUpdater-`` thread) or an event only it prints. Off: the setting false, or the
    ``Restoration took`` summary a StreamThread prints only when it restores itself.
    """
    from toolkit.sqltext import sql_in, sql_list

    runs = sql_in("run_id", run_ids)
    on = (f"prefix_kind = 'state-updater' OR coalesce(thread, '') LIKE '%-StateUpdater-%' "
          f"OR event IN ({sql_list(STATE_UPDATER_EVENTS)})")
    off = "event = 'RESTORE_ALL_DONE' AND message LIKE '%Restoration took%'"
    logged = {r.run_id: r for r in all_rows(tl.events.where(runs).groupBy("run_id").agg(
        F.expr(f"max(CAST(({on}) AS INT))").alias("on"), F.expr(f"max(CAST(({off}) AS INT))").alias("off")),
        "runs")}
    settings: dict[str, str | None] = {}
    for r in all_rows(tl.config.where(f"key = '{STATE_UPDATER_KEY}' AND {runs}").selectExpr(
            "run_id", "lower(trim(value)) AS value"), "state-updater settings"):
        settings.setdefault(r.run_id, r.value)
    verdicts: dict[str, bool | None] = {}
    for run_id in sorted(set(logged) | set(settings)):
        setting, lines = settings.get(run_id), logged.get(run_id)
        verdicts[run_id] = (True if setting == "true" else False if setting == "false"
                            else True if lines is not None and lines.on == 1
                            else False if lines is not None and lines.off == 1 else None)
    return verdicts
