"""Measured alternatives for hot spots of ``toolkit/layouts.py`` (evidence for suggestions, not tests).

Each experiment runs one per-line Spark expression over all text files of a bundle with the
``noop`` writer and reports the best of ``--repeat`` timings, next to the plain scan. The difference
to the scan is the cost of the expression. Pairs compare what layouts.py does today with a
cheaper formulation that gives the same result on these lines (checked on a sample and printed).

    python benchmarks/parse_experiments.py BUNDLE [--master local[2]] [--repeat 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

# Greedy form of the kafka-log4j pattern: take the logger trailer if the line ends with one
# (".*" runs to the end and backs off to the last " ("), else the whole rest is the message.
# Same fields as the lazy "(?P<message>.*?)(?: \((?P<logger>...)\))?$", which tries the optional
# trailer and "$" at every character of every line.
KAFKA_GREEDY = (r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2},\d{3})\] (TRACE|DEBUG|INFO|WARN|ERROR|FATAL) "
                r"(?:(.*) \(([A-Za-z_$][\w$]*(?:\.[\w$]+)+)(?::\d+)?\)|(.*))$")
KAFKA_GREEDY_REPLACEMENT = "\u0001$1\u0001$2\u0001\u0001$4\u0001$3$5"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bundle", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args(argv)

    from pyspark.sql import functions as F

    from toolkit import layouts as L
    from toolkit.spark import get_spark

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from baseline import log_files

    spark = get_spark(master=args.master)
    paths = [str(p.resolve()) for p in log_files(args.bundle)]
    raw = spark.read.text(paths).select("value", F.col("_metadata.file_path").alias("uri"))
    value = F.col("value")
    kafka = L.load_layouts().layout("kafka-log4j")
    current = F.regexp_replace(value, L.to_java_regex(kafka.pattern),
                               L.FIELD_SEP + L.FIELD_SEP.join(
                                   f"${kafka.regex.groupindex[f]}" if f in kafka.regex.groupindex else ""
                                   for f in L.FIELDS))
    greedy = F.regexp_replace(value, KAFKA_GREEDY, KAFKA_GREEDY_REPLACEMENT.replace("\u0001", L.FIELD_SEP))

    # Same output? (on a sample; the fields are joined by FIELD_SEP in both)
    sample = raw.select(current.alias("a"), greedy.alias("b")).limit(200_000)
    differ = sample.where(F.col("a") != F.col("b")).count()
    print(f"kafka-log4j lazy vs greedy rewrite: {differ} differing lines in the first 200,000")

    experiments = [
        ("scan only (value)", value),
        ("translate(value, FIELD_SEP, ' ') on every line (today)", F.translate(value, L.FIELD_SEP, " ")),
        ("translate only when value contains FIELD_SEP",
         F.when(value.contains(L.FIELD_SEP), F.translate(value, L.FIELD_SEP, " ")).otherwise(value)),
        ("_local_path(file uri) on every line (today)", L._local_path(F.col("uri"))),
        ("raw file uri (decode once per file instead)", F.col("uri")),
        ("kafka-log4j rewrite, lazy message (today)", current),
        ("kafka-log4j rewrite, greedy message", greedy),
    ]
    # The record fields as _parse_all builds them today: _split_fields inside a CASE on the layout id.
    # Inside a conditional branch Spark's subexpression elimination does not apply, so the one
    # regexp_replace is evaluated once per reference (startsWith check + twice per nullif'ed field).
    per_file = F.col("uri").isNotNull()  # not constant-foldable, like CASE layout_id WHEN ...
    fields_today = F.when(per_file, L._split_fields(kafka, value))
    # Alternative: the rewrite in a column of its own (CollapseProject keeps an expensive expression
    # referenced several times in its own projection), fields split from that column.
    rewritten_col = raw.select("*", F.when(per_file, current).alias("_rw"))
    parts = F.split(F.substring(F.col("_rw"), 2, 1 << 30), L.FIELD_SEP, len(L.FIELDS))
    fields_once = F.when(F.col("_rw").startswith(L.FIELD_SEP), F.struct(
        *[F.nullif(parts.getItem(i), F.lit("")).alias(f) for i, f in enumerate(L.FIELDS)]))
    frames = {"fields struct, regex inside CASE (today)": raw.select(fields_today.alias("x")),
              "fields struct from a projected rewrite column": rewritten_col.select(fields_once.alias("x"))}

    results = []
    for name, expr in [*experiments, *frames.items()]:
        df = expr if name in frames else raw.select(expr.alias("x"))
        best = float("inf")
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            df.write.format("noop").mode("overwrite").save()
            best = min(best, time.perf_counter() - t0)
        results.append((name, best))
        print(f"  {best:7.2f} s  {name}", file=sys.stderr, flush=True)
    scan = results[0][1]
    print(f"\n{'best s':>8} {'over scan':>10}  expression (per line, {len(paths)} files)")
    for name, best in results:
        print(f"{best:8.2f} {best - scan:+10.2f}  {name}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
