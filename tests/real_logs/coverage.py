"""Regenerate the real-log corpus coverage table (per product and layout/wrapper) and, with
``--docs``, write it into ``docs/development/real-logs.md`` between its coverage markers.

    python -m tests.real_logs.coverage [--docs]
    python tests/real_logs/coverage.py [--docs]

Runs the whole corpus through the toolkit in one local Spark session (a minute or two).
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from pathlib import Path

if __package__:
    from .corpus import analyse_corpus, coverage_rows, event_label_counts, load_corpus, totals
else:  # run as a script
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from corpus import analyse_corpus, coverage_rows, event_label_counts, load_corpus, totals  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parents[2]
BEGIN = "<!-- real-log coverage: begin (python -m tests.real_logs.coverage --docs) -->"
#: The documentation page that shows the table.
PAGE = REPO / "docs" / "development" / "real-logs.md"
END = "<!-- real-log coverage: end -->"


def _pct(part: int, whole: int) -> str:
    return f"{part / whole:.1%}" if whole else "–"


def markdown(results) -> str:
    """The coverage table, the totals and what is still not read, as Markdown."""
    t = totals(results)
    out = [
        "| product | read as (layout) | wrappers | files | lines | timestamped lines read | events matched |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for product, layout, wrappers, g in coverage_rows(results):
        out.append(f"| {product} | `{layout}` | {wrappers} | {g.files} | {g.lines} | "
                   f"{g.ts_read}/{g.ts_lines} | {g.events_matched}/{g.event_lines} |")
    out.append(f"| **all** | | | **{t.files}** | **{t.lines}** | **{t.ts_read}/{t.ts_lines} "
               f"({_pct(t.ts_read, t.ts_lines)})** | **{t.events_matched}/{t.event_lines} "
               f"({_pct(t.events_matched, t.event_lines)})** |")
    out.append("")
    out.append(f"Timestamped lines folded into another record: {t.folded}. Lines given an event their label "
               f"does not name: {t.false_events}. Files read with no layout at all: {t.unknown_layout} of "
               f"{t.files}.")
    missed = event_label_counts(results)
    unread = [r for r in results if r.ts_read < r.ts_lines]
    out.append("`read as` is the layout detected for the file; lines it does not fit are read one by one by "
               "`generic`. The manifests (`tests/real_logs/*/manifest.toml`) name each file's own layout.")
    out.append("")
    out.append("Still not read:")
    out.append("")
    if not missed and not unread:
        out.append("- every timestamp and every labelled event of the corpus is read.")
    for r in results:
        if r.unknown_layout:
            out.append(f"- `{r.file.group}/{r.file.id}` ({r.file.layout_family}): no line reads as a record "
                       f"start; every line is kept as `unparsed`.")
    for r in unread:
        out.append(f"- `{r.file.group}/{r.file.id}`: {r.ts_lines - r.ts_read} timestamped lines not read to the "
                   f"exact instant.")
    for event, n in missed.most_common():
        out.append(f"- `{event}`: {n} labelled line{'s' if n > 1 else ''} without this event.")
    return "\n".join(out)


def write_page(table: str, page: Path = PAGE) -> None:
    text = page.read_text(encoding="utf-8")
    block = f"{BEGIN}\n{table}\n{END}"
    if BEGIN in text and END in text:
        text = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: block, text, flags=re.S)
    else:
        text = text.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(text, encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", action="store_true", help="write the table into docs/development/real-logs.md")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from toolkit.spark import get_spark

    files, problems = load_corpus()
    for p in problems:
        print(f"corpus problem: {p}", file=sys.stderr)
    spark = get_spark("local[2]", conf={"spark.sql.shuffle.partitions": "2"}, app_name="real-log-coverage")
    try:
        with tempfile.TemporaryDirectory(prefix="real-log-coverage-") as work:
            results = analyse_corpus(spark, files, Path(work))
    finally:
        spark.stop()
    table = markdown(results)
    print(table)
    if args.docs:
        write_page(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
