"""Charts: Spark-side frame helpers on a tiny hand-made timeline, chart functions on small frames."""

from __future__ import annotations

from datetime import datetime

import pandas as pd
import pytest

from toolkit import viz

T = datetime.fromisoformat


@pytest.fixture(scope="module")
def tiny_timeline(spark):
    """A timeline shaped like the EOS stale-checkpoint story: restore + checkpoint, crash, restart."""
    from toolkit.timeline import Timeline
    from toolkit.timeline.schemas import TABLES

    def table(name, rows=()):
        schema = TABLES[name]
        return spark.createDataFrame([tuple(r.get(f.name) for f in schema.fields) for r in rows], schema)

    events = spark.createDataFrame(
        [("orders-agg-0/app.log", 10, "Writing checkpoint: {order-totals-changelog-0=1203321}", "orders-agg-0",
          T("2026-03-07 09:00:06.875"), "CHECKPOINT_WRITTEN", "0_0"),
         ("orders-agg-0/app.log", 40, "stream-thread [main] Shutdown complete", "orders-agg-0",
          T("2026-03-07 10:06:07"), None, None),
         ("orders-agg-0/app.log", 50, "State store order-totals initialized from checkpoint with offset 1203321",
          "orders-agg-0", T("2026-03-07 10:08:31"), "CHECKPOINT_READ", "0_0")],
        "source string, line_no long, message string, host string, ts timestamp, event string, task_id string")
    src = "orders-agg-0/app.log"
    tl = Timeline(
        events=events, config=events.limit(0), state=None,
        process_runs=table("process_runs", [
            {"host": "orders-agg-0", "run_id": "r1", "run_no": 1, "product": "kafka-streams", "start": T("2026-03-07 09:00:00"),
             "end": T("2026-03-07 10:06:07"), "end_kind": "crash", "end_source": src, "end_line_no": 40, "source": src, "line_no": 1},
            {"host": "orders-agg-0", "run_id": "r2", "run_no": 2, "product": "kafka-streams", "start": T("2026-03-07 10:08:29"),
             "source": src, "line_no": 45}]),
        generations=table("generations", [{"group_id": "orders-agg", "generation": 7, "host": "orders-agg-0",
                                           "joined": T("2026-03-07 09:00:01"), "synced": T("2026-03-07 09:00:02")}]),
        thread_states=table("thread_states", [
            {"host": "orders-agg-0", "kind": "thread", "thread": "StreamThread-1", "state": "RUNNING",
             "start": T("2026-03-07 09:00:07"), "end": T("2026-03-07 10:06:07"), "source": src, "line_no": 11}]),
        client_states=table("client_states"),
        task_lifecycles=table("task_lifecycles", [
            {"host": "orders-agg-0", "task_id": "0_0", "role": "active", "phase": "running",
             "start": T("2026-03-07 09:00:07"), "end": T("2026-03-07 10:06:07"), "source": src, "line_no": 12}]),
        locks=table("locks"),
        checkpoints=table("checkpoints", [
            {"host": "orders-agg-0", "task_id": "0_0", "topic": "order-totals-changelog", "partition": 0,
             "ts": T("2026-03-07 09:00:06.875"), "kind": "written", "offset": 1203321, "source": src, "line_no": 10},
            {"host": "orders-agg-0", "task_id": "0_0", "topic": "order-totals-changelog", "partition": 0,
             "ts": T("2026-03-07 10:08:31"), "kind": "read", "offset": 1203321, "source": src, "line_no": 50}]),
        restorations=table("restorations", [
            {"host": "orders-agg-0", "task_id": "0_0", "topic": "order-totals-changelog", "partition": 0,
             "start": T("2026-03-07 10:08:31"), "end": T("2026-03-07 10:08:45"), "start_offset": 1203321,
             "end_offset": 1285054, "completed": True, "from_scratch": False, "source": src, "line_no": 51}]),
        wipes=table("wipes"), dir_cleanups=table("dir_cleanups"), nifi_processor_events=table("nifi_processor_events"),
        migration_steps=table("migration_steps"), clock_skew=table("clock_skew"),
    )
    return tl


def test_task_frame_orders_checkpoint_crash_restart_with_evidence(tiny_timeline):
    frame = viz.task_event_frame(tiny_timeline, tasks=["0_0"])
    ordered = frame.sort_values("start")
    kinds = [c for c in ordered["category"] if c in ("checkpoint", "crash", "process")]
    # process start (run 1), checkpoint write, crash, process start (run 2), checkpoint read
    assert kinds == ["process", "checkpoint", "crash", "process", "checkpoint"]
    written = frame[frame["label"].str.contains("written")].iloc[0]
    assert written["evidence"].startswith("orders-agg-0/app.log:10  Writing checkpoint")
    assert set(frame["lane"]) == {"0_0 @ orders-agg-0"}


def test_frames_are_bounded_and_charts_render_to_svg(tiny_timeline):
    offsets = viz.offset_frame(tiny_timeline, limit=3)
    assert len(offsets) <= 3
    charts = viz.timeline_charts(tiny_timeline, tz="Europe/Berlin")
    assert {"threads", "tasks", "offsets", "rebalances"} <= set(charts)
    svg = viz.to_svg(charts["tasks"])
    assert svg.startswith("<svg") and "0_0 @ orders-agg-0" in svg
    # wall-clock in the chosen zone: 09:00 UTC is 10:00 in Berlin
    assert "10:" in viz.to_svg(charts["threads"])


def _layers(spec: dict) -> list[dict]:
    """Every unit layer of a (layered, concatenated or faceted) Vega-Lite spec."""
    out = []
    if "mark" in spec:
        out.append(spec)
    for key in ("layer", "vconcat", "hconcat", "concat"):
        for child in spec.get(key, []):
            out += _layers(child)
    if "spec" in spec:
        out += _layers(spec["spec"])
    return out


def _mark(layer: dict) -> str:
    return layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"]


def test_offset_chart_shows_checkpoint_restore_and_replayed_range_per_task():
    frame = pd.DataFrame({
        "host": ["h"] * 3, "task_id": ["0_0"] * 3, "changelog": ["c-0"] * 3,
        "ts": pd.to_datetime(["2026-03-07 09:00:06", "2026-03-07 10:08:31", "2026-03-07 10:08:45"]),
        "offset": [1203321, 1203321, 1285054], "kind": ["checkpoint written", "restore start", "restore end"],
        "restore_id": [None, "r", "r"], "evidence": ["h/app.log:10  a", "h/app.log:20  b", "h/app.log:30  c"]})
    chart = viz.offset_chart(frame)
    spec = chart.to_dict()
    data = {name: rows for name, rows in spec["datasets"].items()}
    gaps = [rows for rows in data.values() if rows and "why" in rows[0]]
    assert gaps and gaps[0][0]["low"] == 1203321 and gaps[0][0]["high"] == 1285054
    assert gaps[0][0]["why"].startswith("replayed on top of the store checkpointed at 2026-03-07 09:00:06")
    svg = viz.to_svg(chart)
    assert "0_0 @ h · c-0" in svg and "restore 10:08:31" in svg and "checkpoint" in svg


def test_every_mark_names_its_evidence(tiny_timeline):
    """Each mark's tooltip has an evidence field (file:line and the line) or a named evidence title."""
    charts = viz.timeline_charts(tiny_timeline)
    for name, chart in charts.items():
        for layer in _layers(chart.to_dict()):
            if _mark(layer) not in ("point", "bar", "rect", "rule", "tick", "text"):
                continue
            tips = layer.get("encoding", {}).get("tooltip")
            if "text" == _mark(layer) and not tips:
                assert layer["encoding"]["text"]  # axis-like labels (generation numbers) carry their own text
                continue
            tips = tips if isinstance(tips, list) else [tips]
            assert any("evidence" in (t.get("field", "") + str(t.get("title", ""))) for t in tips), (name, layer)


def test_incident_window_breaks_the_axis_between_distant_moments():
    from toolkit.detectors.base import Evidence, Finding

    finding = Finding(detector="eos-stale-restore-checkpoint", severity="critical", confidence="confirmed",
                      title="t", explanation="e", ts=T("2026-03-07 09:00:06"),
                      evidence=[Evidence("h/app.log", 10, "w", ts=T("2026-03-07 09:00:06.875")),
                                Evidence("h/app.log", 50, "r", ts=T("2026-03-07 10:08:31"))])
    runs = pd.DataFrame({"end": pd.to_datetime(["2026-03-07 10:06:07", "2026-03-07 11:30:00"]),
                         "end_kind": ["crash", "unknown"]})
    ranges = viz.incident_window([finding], runs)
    assert len(ranges) == 2
    (a0, a1), (b0, b1) = ranges
    assert a0 < T("2026-03-07 09:00:06") < T("2026-03-07 09:00:06.875") < a1 < b0
    assert b0 < T("2026-03-07 10:06:07") < T("2026-03-07 10:08:31") < b1 < T("2026-03-07 10:20:00")
    # The open-ended run ("unknown" end at the end of the log) does not stretch the incident.
    assert viz.incident_window([], runs) == [viz.focus._pad([T("2026-03-07 10:06:07")])]
    assert viz.incident_window([], None) is None


def test_broken_axis_panels_render_and_label_each_range(tiny_timeline):
    frame = viz.task_event_frame(tiny_timeline, tasks=["0_0"])
    focus = [(T("2026-03-07 08:59:50"), T("2026-03-07 09:00:20")), (T("2026-03-07 10:05:50"), T("2026-03-07 10:09:00"))]
    chart = viz.task_lane_chart(frame, focus=focus)
    spec = chart.to_dict()
    assert len(spec["hconcat"]) == 2
    svg = viz.to_svg(chart)
    assert "checkpoint written" in svg and "process end: crash" in svg


def test_migration_chart_survives_a_step_without_table_name():
    steps = pd.DataFrame({
        "table": ["t", None, None], "base_table": ["t", None, None],
        "ts": pd.to_datetime(["2026-04-08 13:12:43", "2026-04-08 13:12:49", "2026-04-08 13:13:20"]),
        "step": ["TABLE_ACTIVE", "DELETE_TABLE", None], "origin": ["log", "cloudtrail", "log"],
        "host": ["nifi-0", None, "nifi-0"], "error_code": [None, None, None], "detail": ["", None, ""],
        "evidence": ["nifi-0/nifi-app.log:5  x", "", "nifi-0/nifi-app.log:9  y"]})
    svg = viz.to_svg(viz.migration_chart(steps))
    assert viz.NO_TABLE in svg
    assert set(viz.migration_summary(steps)["base_table"]) == {"t", viz.NO_TABLE}


def test_large_frames_are_aggregated_not_refused():
    n = 12_000
    frame = pd.DataFrame({"lane": ["a @ h"] * n, "category": ["checkpoint"] * n, "label": ["x"] * n,
                          "role": [None] * n, "start": pd.date_range("2026-01-01", periods=n, freq="s"),
                          "end": [pd.NaT] * n, "evidence": ["e"] * n, "host": ["h"] * n, "task_id": ["a"] * n})
    chart = viz.task_lane_chart(frame)
    data_rows = max(len(v) for v in chart.to_dict()["datasets"].values())
    assert data_rows <= viz.MAX_CHART_ROWS


def test_migration_summary_gap_and_outcome():
    steps = pd.DataFrame({
        "table": ["t", "t", "t", "u", "u"], "base_table": ["t", "t", "t", "u", "u"],
        "ts": pd.to_datetime(["2026-04-08 13:12:43", "2026-04-08 13:12:49", "2026-04-08 13:13:20",
                              "2026-04-08 13:12:50", "2026-04-08 13:12:51"]),
        "step": ["DELETE_TABLE", "TABLE_ACTIVE", "CHECKPOINT_WRITE", "TABLE_ACTIVE", "COPY_ITEMS"],
        "origin": ["cloudtrail", "log", "log", "log", "log"], "host": ["nifi-0"] * 5,
        "error_code": [None, None, None, None, None], "detail": [""] * 5, "evidence": [""] * 5})
    summary = viz.migration_summary(steps).set_index("base_table")
    assert summary.loc["t", "gap_s"] == 31.0 and summary.loc["u", "outcome"] == "migrated"
    assert viz.to_svg(viz.migration_chart(steps)).startswith("<svg")


def test_ingest_chart_shows_unparsed_share():
    frame = pd.DataFrame({"host": ["a", "a", "b"], "bucket": pd.to_datetime(["2026-01-01 00:00"] * 3),
                          "level": ["INFO", "unparsed", "WARN"], "lines": [90, 10, 5], "bucket_seconds": 60})
    assert "unparsed share" in viz.to_svg(viz.ingest_chart(frame))


def test_explorer_redraws_without_a_widget_frontend(tiny_timeline, tmp_path):
    from types import SimpleNamespace

    from toolkit import report
    from toolkit.ingest import FileSummary, IngestReport

    params = report.validate_parameters(str(tmp_path), tmp_path)
    # One kubectl --prefix file in no host folder: the Explorer offers the host its lines name.
    prefixed = FileSummary("pods.log", host="unknown-host", layout="log4j", wrappers=["kubectl-prefix"],
                           hosts=["orders-agg-0"])
    analysis = SimpleNamespace(timeline=tiny_timeline,
                               ingest=IngestReport(bundle=str(tmp_path), files=[prefixed], problems=[], evidence=[]))
    inv = report.ReportView(params=params, analysis=analysis, findings=[], hosts=None, tasks=None,
                               started=datetime.now(), seconds=0.0)
    explorer = report.Explorer(inv)
    assert explorer.tasks == ["0_0"] and explorer.hosts == ["orders-agg-0"]
    chart = explorer.charts(hosts=["orders-agg-0"], tasks=["0_0"], window=("2026-03-07 09:30", None))
    assert viz.to_svg(chart).startswith("<svg")
    table = explorer.evidence(hosts=["orders-agg-0"])
    assert list(table.columns[:2]) == ["where", "ts"]
    assert explorer.widget() is not None


def test_charts_without_their_controls_reference_no_control(tiny_timeline):
    """Charts built for another layout (the Explorer's, with widgets) declare and use no select box."""
    import json

    frame = viz.task_event_frame(tiny_timeline)
    two_hosts = pd.concat([frame, frame.assign(host="orders-agg-1", lane="0_0 @ orders-agg-1")], ignore_index=True)
    quiet = json.dumps(viz.task_lane_chart(two_hosts, interactive=False).to_dict())
    assert viz.HOST_FILTER not in quiet
    live = json.dumps(viz.task_lane_chart(two_hosts).to_dict())
    assert live.count(viz.HOST_FILTER) >= 2  # declared once, used by the layers
    assert viz.to_svg(viz.task_lane_chart(two_hosts, interactive=False)).startswith("<svg")


def _rows(frame: pd.DataFrame) -> list[tuple]:
    """Rows as comparable text, columns by name; a number is a number whatever its dtype (a column
    with a gap in a wider frame is float where a narrower frame's is int)."""
    def text(v) -> str:
        if v is None or (not isinstance(v, str) and pd.isna(v)):
            return "<null>"
        return str(float(v)) if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)
    frame = frame[sorted(frame.columns)]
    return sorted(tuple(text(v) for v in row) for row in frame.itertuples(index=False))


def test_a_report_cuts_each_findings_frames_from_its_scope_as_the_query_would(analysis_of, monkeypatch):
    tl = analysis_of("kafka-standby-lock-cleaner").timeline
    calls: list[str] = []
    for name in ("task_event_frame", "offset_frame", "process_run_frame"):
        query = getattr(viz.frames, name)
        counted = lambda *a, _q=query, _n=name, **k: calls.append(_n) or _q(*a, **k)  # noqa: E731
        for module in (viz.frames, viz):  # where ScopedFrames looks them up, and the test's own calls
            monkeypatch.setattr(module, name, counted)
    frames = viz.ScopedFrames(tl)
    whole = frames.task_events()
    lanes = sorted({(t, h) for t, h in zip(whole["task_id"], whole["host"])})
    hosts = sorted({h for _, h in lanes})
    assert len(lanes) >= 2 and len(hosts) >= 2
    task, host = lanes[0]
    cut = frames.task_events([task], [host])
    assert len(cut) > 0 and set(cut["lane"]) == {f"{task} @ {host}"}
    assert _rows(cut) == _rows(viz.task_event_frame(tl, tasks=[task], hosts=[host]))
    assert _rows(frames.offsets([task])) == _rows(viz.offset_frame(tl, tasks=[task]))
    assert _rows(frames.process_runs([host])) == _rows(viz.process_run_frame(tl, hosts=[host]))
    frames.process_runs()
    # one query per frame for the scope; the three above were the test's own
    assert sorted(calls) == sorted(["task_event_frame", "offset_frame", "process_run_frame"] * 2)

    # a scope frame cut off at its row limit is not cut from: the narrower frame is queried
    monkeypatch.setattr(viz.frames, "DEFAULT_LIMIT", 2)
    calls.clear()
    small = viz.ScopedFrames(tl)
    assert len(small.task_events()) == 2
    assert len(small.task_events([task], [host])) == min(2, len(cut))
    assert calls == ["task_event_frame", "task_event_frame"]

    # tasks outside a narrowed scope are queried too, never cut from it
    scoped = viz.ScopedFrames(tl, tasks=[task])
    other = next(t for t, _ in lanes if t != task)
    assert _rows(scoped.task_events([other])) == _rows(viz.task_event_frame(tl, tasks=[other], limit=2))


def test_a_report_queries_the_process_runs_and_the_nifi_state_changes_once(analysis_of, monkeypatch):
    """The report's focus, its threads chart and its NiFi sections share one process-run frame, and the NiFi
    state chart and table one state-change frame."""
    from toolkit import viz_nifi

    tl = analysis_of("bundles/nifi-component-state-reset").timeline
    calls: list[str] = []
    for module, name in ((viz.frames, "process_run_frame"), (viz_nifi, "process_run_frame"),
                         (viz_nifi, "state_change_frame"), (viz_nifi, "checkpoint_frame")):
        query = getattr(module, name)
        monkeypatch.setattr(module, name, lambda *a, _q=query, _n=name, **k: calls.append(_n) or _q(*a, **k))
    frames = viz.ScopedFrames(tl)
    runs = frames.process_runs()  # the charts' time range (the incident) is found from these
    assert (runs["product"] == "nifi").any()
    viz.timeline_chart_builders(tl, frames=frames)["threads"]()
    shown: list = []
    viz_nifi.show_nifi_sections(tl, display=shown.append, runs=frames.process_runs())
    headings = [item.data for item in shown if hasattr(item, "data") and str(item.data).startswith("<h3>")]
    assert headings == [f"<h3>{viz_nifi.TITLES[name]}</h3>" for name in ("nifi_repositories", "nifi_state")]
    states = [item for item in shown if isinstance(item, pd.DataFrame)]
    assert len(states) == 1 and "cleared" in set(states[0]["kind"])
    assert sorted(calls) == ["checkpoint_frame", "process_run_frame", "state_change_frame"]
