"""Every analysis command reads the same bundle arguments and the same analysis, Spark and output options, with one
meaning each: read off the real parser, so a command whose flag drifts (another dest, help, default or nargs)
fails here. No Spark: only the parsers are built."""

from __future__ import annotations

import argparse

import pytest

#: The commands that analyse a bundle on Spark.
ANALYSIS_COMMANDS = ("parse", "timeline", "catalogue", "detect", "report")

#: Flags every analysis command accepts with one meaning (``--out`` too, though what it holds is the command's).
SHARED_FLAGS = frozenset({
    "--timezone", "--log-timezone", "--work-dir", "--no-cache", "--cache-dir", "--no-redact", "--catalogue",
    "--master", "--remote", "--verbose", "--quiet",
})

#: The commands that run the detectors, and so take ``--only``.
DETECTING = frozenset({"detect", "report"})


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    from toolkit.cli import build_parser

    (sub,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


SUBCOMMANDS = _subcommands()


def _by_flag(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    return {flag: action for action in parser._actions for flag in action.option_strings}


def _meaning(action: argparse.Action) -> tuple:
    """What a flag means, as far as the parser says: where it goes, what it takes and its default."""
    return (type(action).__name__, action.dest, tuple(action.option_strings), action.nargs, action.const,
            action.default, action.required, action.metavar, action.help, action.choices)


def _bundle_action(name: str) -> argparse.Action:
    (action,) = [a for a in SUBCOMMANDS[name]._actions if a.dest == "bundle"]
    return action


def test_the_analysis_commands_are_the_commands_that_read_a_bundle():
    """A new command that analyses a bundle joins the list above, and so these tests. (``serve`` and ``warm-up``
    start a Spark of their own, with a ``--master`` of their own, and read no bundle.)"""
    reading = {name for name, parser in SUBCOMMANDS.items() if any(a.dest == "bundle" for a in parser._actions)}
    assert reading == set(ANALYSIS_COMMANDS)


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_every_analysis_command_takes_one_or_more_bundle_paths(command):
    reference, action = _bundle_action("parse"), _bundle_action(command)
    assert action.nargs == "+" and action.dest == "bundle"
    assert (action.help, action.metavar, action.default) == (reference.help, reference.metavar, reference.default)
    # Positional everywhere but catalogue, whose bundle is optional (--bundle).
    assert action.option_strings == ([] if command != "catalogue" else ["--bundle"])


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_every_analysis_command_accepts_the_shared_flags_with_one_meaning(command):
    flags, reference = _by_flag(SUBCOMMANDS[command]), _by_flag(SUBCOMMANDS["parse"])
    missing = sorted(SHARED_FLAGS - set(flags))
    assert not missing, f"{command} lacks {missing}"
    differing = sorted(flag for flag in SHARED_FLAGS if _meaning(flags[flag]) != _meaning(reference[flag]))
    assert not differing, f"{command} gives {differing} another meaning than parse"
    assert ("--only" in flags) == (command in DETECTING)
    assert flags["--out"].dest == "out"


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_timezone_is_the_log_zone_on_every_analysis_command(command):
    flags = _by_flag(SUBCOMMANDS[command])
    assert flags["--timezone"] is flags["--log-timezone"]
    assert flags["--timezone"].dest == "log_timezone"


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_the_shared_flags_are_in_the_same_help_groups(command):
    groups = {action.option_strings[0] if action.option_strings else action.dest: group.title
              for group in SUBCOMMANDS[command]._action_groups for action in group._group_actions}
    expected = {"bundle": "bundle", "--bundle": "bundle", "--out": "output", "--quiet": "output",
                "--timezone": "analysis", "--work-dir": "analysis", "--no-cache": "analysis",
                "--cache-dir": "analysis", "--no-redact": "analysis", "--catalogue": "analysis", "--master": "Spark", "--remote": "Spark",
                "--verbose": "Spark"}
    assert {flag: groups[flag] for flag in groups if flag in expected} == {
        flag: title for flag, title in expected.items() if flag in groups}


def test_report_names_its_chart_zone_apart_from_the_log_zone():
    from toolkit.cli import build_parser
    from toolkit.options import options_from_args

    args = build_parser().parse_args(["report", "a", "b", "--out", "o", "--timezone", "Europe/Berlin",
                                      "--chart-timezone", "Asia/Tokyo"])
    assert args.bundle == ["a", "b"]
    assert options_from_args(args).log_timezone == "Europe/Berlin" and args.chart_timezone == "Asia/Tokyo"
    assert build_parser().parse_args(["report", "a", "--out", "o"]).chart_timezone == "UTC"


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_the_same_command_line_gives_every_command_the_same_shared_values(command):
    from toolkit.cli import build_parser
    from toolkit.options import options_from_args

    bundle = ["--bundle", "a", "b"] if command == "catalogue" else ["a", "b"]
    args = build_parser().parse_args([command, *bundle, "--out", "o", "--timezone", "Europe/Berlin", "--no-cache",
                                      "--remote", "sc://h:15002", "--verbose", "--quiet"])
    assert (args.bundle, args.out, args.remote, args.master, args.verbose, args.quiet) == (
        ["a", "b"], "o", "sc://h:15002", None, True, True)
    assert options_from_args(args).log_timezone == "Europe/Berlin" and not options_from_args(args).use_cache


@pytest.mark.parametrize("command", ANALYSIS_COMMANDS)
def test_every_analysis_command_reads_the_same_user_catalogue(command, tmp_path, monkeypatch):
    """``--catalogue DIR`` fills the same option on every command (and is checked before Spark starts)."""
    from toolkit.cli import build_parser
    from toolkit.options import options_from_args

    monkeypatch.delenv("STREAM_INCIDENT_CATALOGUE", raising=False)
    bundle = ["--bundle", "a"] if command == "catalogue" else ["a"]
    args = build_parser().parse_args([command, *bundle, "--out", "o", "--catalogue", str(tmp_path)])
    assert options_from_args(args).catalogue == tmp_path.resolve()
    assert options_from_args(build_parser().parse_args([command, *bundle, "--out", "o"])).catalogue is None


def test_report_parameters_read_one_path_or_several(tmp_path):
    """The notebook gets one path as before, several as a list; the report is named after all of them."""
    from toolkit.report import validate_parameters

    first, second = tmp_path / "node-a", tmp_path / "node-b.log"
    first.mkdir()
    second.write_text("x\n")
    one = validate_parameters([str(first)], tmp_path / "out")
    assert (one.inputs, one.bundle_parameter(), one.bundle_name) == ((first,), str(first), "node-a")
    assert validate_parameters(str(first), tmp_path / "out") == one
    both = validate_parameters([str(first), str(second)], tmp_path / "out")
    assert both.bundle == first and both.inputs == (first, second)
    assert both.bundle_parameter() == [str(first), str(second)] and both.bundle_name == "node-a, node-b.log"
    with pytest.raises(Exception, match="does not exist"):
        validate_parameters([str(first), str(tmp_path / "missing")], tmp_path / "out")
