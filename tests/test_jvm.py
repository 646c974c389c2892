"""How the embedded driver JVM is started: input size estimate, small-input settings."""

from __future__ import annotations

import gzip
from pathlib import Path


from toolkit import jvm


def test_input_bytes_walks_folders_and_weighs_compressed_files(tmp_path: Path) -> None:
    (tmp_path / "host-0").mkdir()
    (tmp_path / "host-0" / "app.log").write_bytes(b"x" * 1000)
    with gzip.open(tmp_path / "host-0" / "app.log.1.gz", "wb") as out:
        out.write(b"y" * 5000)
    packed = (tmp_path / "host-0" / "app.log.1.gz").stat().st_size
    loose = tmp_path / "loose.log"
    loose.write_bytes(b"z" * 7)
    assert jvm.input_bytes([tmp_path / "host-0", loose]) == 1000 + packed * jvm.COMPRESSED_FACTOR + 7
    assert jvm.input_bytes([tmp_path / "absent"]) == 0


def test_small_inputs_get_the_quick_jit_and_large_or_unknown_ones_do_not() -> None:
    small = jvm.driver_java_options(1024)
    assert "-XX:TieredStopAtLevel=1" in small
    for size in (jvm.SMALL_INPUT_BYTES + 1, None):
        options = jvm.driver_java_options(size)
        assert "-XX:TieredStopAtLevel=1" not in options
        # JVM warnings never go to stdout, where `detect --format json` prints its document
        assert options[:2] == ["-Xlog:disable", "-Xlog:all=warning:stderr"]


def test_plan_for_input_switches_generated_code_off_for_small_inputs_and_back(spark) -> None:
    conf = spark.conf
    jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)  # whatever an earlier analysis in this session chose
    assert conf.get("spark.sql.codegen.wholeStage") == "true"
    try:
        jvm.plan_for_input(spark, 10_000)
        assert conf.get("spark.sql.codegen.wholeStage") == "false"
        assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        assert spark.range(5).selectExpr("sum(id * 2) AS s").first()["s"] == 20
        jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
        assert conf.get("spark.sql.codegen.wholeStage") == "true"
        assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        # a setting the user made is not undone by a large input
        conf.set("spark.sql.codegen.wholeStage", "false")
        jvm.plan_for_input(spark, 10 * jvm.SMALL_INPUT_BYTES)
        assert conf.get("spark.sql.codegen.wholeStage") == "false"
    finally:
        for key in jvm.SMALL_INPUT_SQL_CONF:
            conf.unset(key)






def test_a_line_longer_than_a_megabyte_turns_generated_code_back_on(spark) -> None:
    conf = spark.conf
    try:
        jvm.plan_for_input(spark, 10_000)
        jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS)
        assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        jvm.plan_for_lines(spark, jvm.LONG_LINE_CHARS + 1)
        assert conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
        assert conf.get("spark.sql.codegen.wholeStage") == "true"
    finally:
        for key in jvm.SMALL_INPUT_SQL_CONF:
            conf.unset(key)
