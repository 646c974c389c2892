"""One spine: every entry point runs ``toolkit.pipeline.run`` and writes the same ``findings.json``.

The report command (its notebook), the Explorer notebook, ``stream-incident detect`` (file and
``--format json``) and a direct call of the pipeline, on one sample with the default options, must
give byte-identical findings: a difference means one door analyses differently from another.
"""

from __future__ import annotations

import json

from support import EOS_SAMPLE

from toolkit import cli, pipeline
from toolkit.options import AnalysisOptions, options_from_args


def test_every_entry_point_writes_the_same_findings_json(spark, tmp_path, capsys, eos_report, eos_explore):
    direct = pipeline.run(spark, EOS_SAMPLE, tmp_path / "direct", AnalysisOptions())
    expected = direct.findings_path.read_bytes()
    document = json.loads(expected)
    assert "eos-stale-restore-checkpoint" in document["summary"]["detectors"]  # a real result, not an empty one
    assert document["bundle"] == str(EOS_SAMPLE.resolve())

    code = cli.main(["detect", str(EOS_SAMPLE), "--out", str(tmp_path / "detect"), "--format", "json", "--quiet",
                     "--master", "local[2]"])
    printed = capsys.readouterr().out
    assert code == 0
    written = {
        "detect --out": (tmp_path / "detect" / "findings.json").read_bytes(),
        "detect --format json": printed.encode("utf-8"),
        "report (incident_report.ipynb)": eos_report.findings.read_bytes(),
        "Explorer (explore.ipynb)": (eos_explore.out_dir / "findings.json").read_bytes(),
    }
    differing = [name for name, data in written.items() if data != expected]
    assert not differing, f"findings.json differs from pipeline.run's for: {differing}"


def test_options_are_the_same_object_from_every_door(tmp_path):
    """The command line and the notebook parameters build equal options for equal values."""
    from toolkit.report import validate_parameters

    args = cli.build_parser().parse_args(
        ["detect", str(EOS_SAMPLE), "--log-timezone", "Europe/Berlin", "--work-dir", str(tmp_path / "w"),
         "--no-cache", "--no-redact", "--only", "unclean-shutdown"])
    from_cli = options_from_args(args)
    params = validate_parameters(EOS_SAMPLE, tmp_path / "out", **from_cli.as_parameters())
    assert params.options == from_cli
    assert from_cli.detectors == ("unclean-shutdown",) and not from_cli.use_cache and not from_cli.redact
    report_args = cli.build_parser().parse_args(
        ["report", str(EOS_SAMPLE), "--out", str(tmp_path), "--chart-timezone", "Asia/Tokyo", "--timezone", "Europe/Berlin"])
    assert report_args.chart_timezone == "Asia/Tokyo"  # the chart axes' zone has a name of its own
    assert options_from_args(report_args).log_timezone == "Europe/Berlin"  # --timezone is the logs' zone everywhere
