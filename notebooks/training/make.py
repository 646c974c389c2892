"""Generate the training notebooks, one per incident class, from one template.

Each notebook: the story (the sample bundle's README up to its answer), guided questions whose
answers are checked by code against the reconstructed timeline (``assert``), then the detector's
verdict and the written answer. Notebooks are written without outputs.

    python notebooks/training/make.py          # rewrite all five
    python notebooks/training/make.py --check  # exit 1 if a notebook differs from what would be generated
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
SAMPLES = REPO / "sample_logs"


@dataclass(frozen=True)
class Question:
    """A guided question: what to ask, a hint where to look, and code that finds and checks the answer."""

    ask: str
    hint: str
    code: str


@dataclass(frozen=True)
class Course:
    """One incident class: its sample bundle, detector id and guided questions."""

    bundle: str
    detector: str
    title: str
    questions: tuple[Question, ...]


COURSES: tuple[Course, ...] = (
    Course(
        bundle="kafka-eos-stale-checkpoint",
        detector="eos-stale-restore-checkpoint",
        title="Exactly-once, a crash, and a checkpoint that should not exist",
        questions=(
            Question(
                "How did the crashed host stop the first time: clean shutdown or crash?",
                "`tl.process_runs` has one row per JVM run with `end_kind` (clean, crash, error, unknown).",
                '''runs = tl.process_runs.where(F.col("host") == expected["crashed_host"]).orderBy("start").toPandas()
display(runs[["host", "run_no", "start", "end", "end_kind", "guarantee"]])
assert runs["end_kind"].iloc[0] == "crash", "the first run should end in a crash (no 'Shutdown complete')"
assert len(runs) >= 2, "Kubernetes restarted the pod: a second run follows"'''),
            Question(
                "On the restart, did the stores start from a checkpoint or from scratch (wiped)?",
                "Under exactly-once an unclean stop must wipe the stores. Look at `tl.checkpoints` rows of kind `read` "
                "and at `tl.wipes`.",
                '''restart = runs["start"].iloc[1]
reads = (tl.checkpoints.where((F.col("host") == expected["crashed_host"]) & (F.col("kind") == "read"))
         .where(F.col("ts") >= F.lit(restart)).orderBy("task_id").toPandas())
display(reads[["task_id", "topic", "partition", "ts", "offset", "source", "line_no"]])
stale = {c["checkpoint_offset"] for c in expected["stale_checkpoints"]}
assert stale <= set(reads["offset"]), "the restart trusted the old checkpoint offsets"'''),
            Question(
                "Where did that checkpoint come from, and when was it written?",
                "Compare the offsets with checkpoint writes at restoration time (DEBUG `Writing checkpoint`) and with "
                "the `.checkpoint` files in the state capture (kind `file`, dated by mtime).",
                '''sources = (tl.checkpoints.where((F.col("host") == expected["crashed_host"])
                                & F.col("kind").isin("written", "file") & F.col("offset").isin(list(stale)))
           .orderBy(F.coalesce("ts", "file_mtime")).toPandas())
display(sources[["task_id", "kind", "ts", "file_mtime", "offset", "origin", "source", "line_no"]])
first_seen = sources["ts"].fillna(sources["file_mtime"]).min()
assert not sources.empty and first_seen < runs["end"].iloc[0], "written long before the crash, at restoration"'''),
            Question(
                "How many changelog records were replayed on top of the old store contents?",
                "`tl.restorations` after the restart: `end_offset - start_offset` per changelog partition.",
                '''restores = (tl.restorations.where((F.col("host") == expected["crashed_host"]) & (F.col("start") >= F.lit(restart)))
            .orderBy("partition").toPandas())
display(restores[["task_id", "topic", "partition", "start_offset", "end_offset", "records"]])
replayed = dict(zip(restores["partition"], restores["end_offset"] - restores["start_offset"]))
for c in expected["stale_checkpoints"]:
    assert abs(replayed[c["partition"]] - c["replayed_records"]) <= 1, c'''),
        ),
    ),
    Course(
        bundle="kafka-standby-lock-cleaner",
        detector="standby-lock-stale-checkpoint",
        title="Two threads, one state directory lock, and the cleaner",
        questions=(
            Question(
                "Which thread failed to take the state directory lock of the task, and who held it?",
                "`tl.locks` rows of kind `failed` name the thread that tried and, when known, the holder.",
                '''task = expected["tasks"][0]
failed = (tl.locks.where((F.col("task_id") == task) & (F.col("kind") == "failed") & (F.col("host") == expected["host"]))
          .orderBy("ts").toPandas())
display(failed[["ts", "thread", "role", "holder_thread", "source", "line_no"]])
assert expected["lock_failed_thread"] in set(failed["thread"])'''),
            Question(
                "Did the state directory cleaner delete the task's directory while it was still in use?",
                "`tl.dir_cleanups` lists deletions with the last owner on that host.",
                '''cleanups = tl.dir_cleanups.where((F.col("task_id") == task) & (F.col("host") == expected["host"])).toPandas()
display(cleanups[["ts", "age_ms", "delay_ms", "last_owner_thread", "last_owner_role", "source", "line_no"]])
assert not cleanups.empty, "the cleaner removed the task directory"'''),
            Question(
                "Which checkpoint offset was left behind, and how far behind the changelog end was it?",
                "A checkpoint written back after the deletion describes a store that no longer exists.",
                '''offsets = (tl.checkpoints.where((F.col("task_id") == task) & (F.col("host") == expected["host"]))
           .orderBy(F.coalesce("ts", "file_mtime")).toPandas())
display(offsets[["kind", "ts", "file_mtime", "offset", "origin", "source", "line_no"]])
stale = expected["stale_checkpoint"]
assert stale["offset"] in set(offsets["offset"])
print(f"{stale['end_offset_at_restore'] - stale['offset']:,} records behind the changelog end")'''),
        ),
    ),
    Course(
        bundle="kafka-restore-skipped",
        detector="restore-skipped-after-reassignment",
        title="A task reassigned back, and a restore that never ran",
        questions=(
            Question(
                "Which rebalance generation gave the task back to the host?",
                "`tl.generations` has one row per member and generation.",
                '''gens = tl.generations.where(F.col("host") == expected["host"]).orderBy("joined").toPandas()
display(gens[["group_id", "generation", "joined", "synced", "stream_thread"]].tail(10))
assert expected["generation"] in set(gens["generation"])'''),
            Question(
                "Did the task restore its store after that rebalance before it went RUNNING?",
                "Compare `tl.restorations` (one row per 'No checkpoint found') with `tl.thread_states` after the rebalance.",
                '''task = expected["tasks"][0]
rebalance = gens.loc[gens["generation"] == expected["generation"], "joined"].min()
restores = tl.restorations.where((F.col("task_id") == task) & (F.col("host") == expected["host"])).orderBy("start").toPandas()
display(restores[["start", "start_offset", "end_offset", "from_scratch", "source", "line_no"]])
after = restores[restores["start"] >= rebalance]
# Earlier episodes name the restore target ("Restoring partition ... to endOffset"); this one never starts.
assert len(after) == 1 and after["from_scratch"].all() and after["end_offset"].isna().all(), "no restore ran"
states = tl.thread_states.where((F.col("host") == expected["host"]) & (F.col("state") == "RUNNING")
                                & (F.col("thread") == expected["stream_thread"])).toPandas()
assert (states["start"] >= rebalance).any(), "yet the thread went RUNNING after the rebalance"'''),
        ),
    ),
    Course(
        bundle="kafka-alos-crash-reprocessing",
        detector="alos-crash-reprocessing",
        title="At-least-once after a crash: what gets processed twice",
        questions=(
            Question(
                "Which host crashed, and when was its last line before the crash?",
                "`tl.process_runs.end_kind` and `end` (the last line before the kill).",
                '''runs = tl.process_runs.where(F.col("host") == expected["crashed_host"]).orderBy("start").toPandas()
display(runs[["host", "run_no", "start", "end", "end_kind", "guarantee", "commit_interval_ms"]])
assert runs["end_kind"].iloc[0] == "crash"'''),
            Question(
                "From which checkpoint offsets did the tasks restore after the restart?",
                "Under at-least-once a crash keeps the local state; the restore starts at the last checkpoint.",
                '''restart = runs["start"].iloc[1]
restores = tl.restorations.where(F.col("host") == expected["crashed_host"]).orderBy("start").toPandas()
reads = tl.checkpoints.where((F.col("host") == expected["crashed_host"]) & (F.col("kind") == "read")).toPandas()
display(restores[["task_id", "start", "start_offset", "end_offset", "records", "from_scratch"]])
display(reads[["task_id", "ts", "offset", "source", "line_no"]])
seen = set(restores["start_offset"].dropna().astype(int)) | set(reads["offset"].dropna().astype(int))
for r in expected["restored_from_checkpoint"]:
    # the restore starts at the checkpointed offset (some versions log the next offset to read)
    assert any(abs(r["checkpoint_offset"] - o) <= 1 for o in seen), r'''),
            Question(
                "How long is the window of input that may be processed twice?",
                "Records processed since the last commit are reprocessed: at most `commit.interval.ms`.",
                '''commit_ms = int(runs["commit_interval_ms"].dropna().iloc[0])
print(f"commit.interval.ms = {commit_ms} ms")
assert commit_ms <= expected["reprocessing_window_ms_max"]'''),
        ),
    ),
    Course(
        bundle="nifi-kinesis-migration-loss",
        detector="kinesis-checkpoint-migration-loss",
        title="NiFi ConsumeKinesis: checkpoint tables lost in a migration",
        questions=(
            Question(
                "Which checkpoint tables went through the migration, and in which steps?",
                "`tl.migration_steps` merges NiFi log lines and CloudTrail records per table.",
                '''steps = tl.migration_steps.orderBy("ts").toPandas()
display(steps[["table", "base_table", "ts", "step", "origin", "error_code"]])
tables = set(steps["base_table"].fillna(steps["table"]))
assert {p["table"] for p in expected["processors"]} <= tables'''),
            Question(
                "Which tables lost their checkpoints (the copy failed), and how long after ACTIVE was the first write?",
                "`viz.migration_summary` computes the ACTIVE → first write gap and the outcome per table.",
                '''summary = viz.migration_summary(steps)
display(summary)
failed = set(summary.loc[summary["outcome"] == "failed", "base_table"])
assert set(expected["failed_tables"]) <= failed, failed'''),
        ),
    ),
)


def _story(readme: str) -> tuple[str, str]:
    """Split a bundle README into the story (everything before ``## Answer``) and the answer."""
    parts = re.split(r"^## Answer\s*$", readme, maxsplit=1, flags=re.M)
    story = parts[0].strip()
    answer = parts[1].strip() if len(parts) > 1 else "(no written answer in the bundle README)"
    return story, answer


def notebook_for(course: Course) -> nbformat.NotebookNode:
    """The training notebook of one incident class (no outputs)."""
    story, answer = _story((SAMPLES / course.bundle / "README.md").read_text(encoding="utf-8"))
    nb = new_notebook(metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"},
        "language_info": {"name": "python"}})
    params = new_code_cell(
        "# Parameters (papermill injects overrides after this cell).\n"
        "from typing import Optional\n\n"
        f'bundle: str = "../../sample_logs/{course.bundle}"  # the sample bundle of this course\n'
        f'out_dir: str = "../../out/training/{course.bundle}"  # parsed tables land here\n'
        "spark_master: Optional[str] = None  # None: $SPARK_MASTER or embedded local[*]\n"
        "spark_remote: Optional[str] = None  # Spark Connect URL (sc://...), or None\n")
    params.metadata["tags"] = ["parameters"]
    cells = [
        new_markdown_cell(f"# Training: {course.title}\n\nIncident class `{course.detector}` "
                          f"(playbook `playbooks/{course.detector}.md`), sample bundle `sample_logs/{course.bundle}`.\n\n"
                          "Read the story, try each question yourself on the timeline `tl` (Spark DataFrames), then "
                          "run the answer cell: it shows the rows and `assert`s the answer. The detector's verdict "
                          "comes last. Generated by `notebooks/training/make.py`; edit that, not this file."),
        new_markdown_cell("## The story\n\n" + re.sub(r"^# ", "### ", story, flags=re.M)),
        params,
        new_code_cell('''import json

from IPython.display import display
from pyspark.sql import functions as F

from toolkit import report, viz

viz.use_charts("interactive")  # charts ship their JavaScript: they render offline
params = report.validate_parameters(bundle, out_dir, spark_master=spark_master, spark_remote=spark_remote)
inv = report.investigate(params)  # parse, timeline, detectors (the verdict stays hidden until the end)
tl = inv.timeline
expected = json.loads((params.bundle / "EXPECTED.json").read_text())  # the ground truth answers are checked against
display(tl.summary())'''),
    ]
    for i, q in enumerate(course.questions, 1):
        cells.append(new_markdown_cell(f"## Question {i}: {q.ask}\n\n*Where to look:* {q.hint}"))
        cells.append(new_code_cell(f"# Answer {i} (try it yourself first)\n{q.code}"))
    cells += [
        new_markdown_cell("## The task's history in one picture\n\nCheckpoint writes, crashes, restarts, locks, "
                          "restorations and wipes per task and host, in order."),
        new_code_cell('''viz.task_lanes_for(tl, tasks=expected.get("tasks"), findings=inv.findings)'''),
        new_markdown_cell("## The detector's verdict"),
        new_code_cell(f'''report.show_verdict(inv)
assert "{course.detector}" in {{f.detector for f in inv.findings}}, "the detector should name this incident"'''),
        new_markdown_cell("## Answer\n\n" + answer),
    ]
    nb.cells = cells
    return nb


def path_for(course: Course) -> Path:
    return HERE / f"{course.bundle}.ipynb"


def write_all() -> list[Path]:
    """Write every training notebook; returns their paths."""
    paths = []
    for course in COURSES:
        path = path_for(course)
        nbformat.write(notebook_for(course), str(path))
        paths.append(path)
    return paths


def stale() -> list[Path]:
    """Notebooks whose cells differ from what :func:`notebook_for` generates."""
    out = []
    for course in COURSES:
        path = path_for(course)
        want = [(c.cell_type, c.source) for c in notebook_for(course).cells]
        have = ([(c.cell_type, c.source) for c in nbformat.read(str(path), as_version=4).cells]
                if path.exists() else None)
        if want != have:
            out.append(path)
    return out


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check that the notebooks are up to date")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale()
        for p in bad:
            print(f"out of date: {p} (run python notebooks/training/make.py)", file=sys.stderr)
        return 1 if bad else 0
    for p in write_all():
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
