"""The report command and its notebook kernel: one typed channel in (``command_channel``), one outcome out."""

from __future__ import annotations

import json

import pytest

from toolkit.bundle import BundleError
from toolkit.report import ParameterError, validate_parameters
from toolkit.report.channel import (EXIT_FAILED, EXIT_SPARK, EXIT_USAGE, KernelChannel, KernelOutcome,
                                    exit_code_of)
from toolkit.spark import SparkUnavailable

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(("error", "code"), [
    (BundleError("bundle.toml is not valid TOML"), EXIT_USAGE),
    (ParameterError("bundle 'x' does not exist"), EXIT_USAGE),
    (SparkUnavailable("cannot reach the Spark master spark://h:7077"), EXIT_SPARK),
    (ValueError("a bug"), EXIT_FAILED),
    (RuntimeError("a bug"), EXIT_FAILED),
])
def test_an_exception_in_the_kernel_means_the_exit_code_of_its_type(error, code):
    assert exit_code_of(error) == code


def test_a_subclass_keeps_its_meaning():
    """Types, not names: a subclass of an input error is still unusable input (a name table missed these)."""
    class TomlProblem(BundleError):
        pass

    assert exit_code_of(TomlProblem("x")) == EXIT_USAGE


def test_the_channel_travels_as_one_json_parameter_and_back(tmp_path):
    channel = KernelChannel(folder=tmp_path / "logs", verbose=True)
    parameter = channel.to_parameter()
    assert json.loads(json.dumps(parameter)) == parameter  # papermill injects plain JSON values
    assert KernelChannel.from_parameter(parameter) == channel
    assert KernelChannel.from_parameter(None) is None


@pytest.mark.parametrize("bad", ["logs", {"verbose": True}, {"folder": 3}, {"folder": "x", "verbose": "yes"}])
def test_a_hand_set_channel_that_the_command_would_not_write_is_a_parameter_error(tmp_path, bad):
    with pytest.raises(ParameterError, match="command_channel is set by `stream-incident report`"):
        validate_parameters(tmp_path, tmp_path / "out", command_channel=bad)


def test_a_bad_parameter_is_written_as_the_outcome_with_exit_2(tmp_path):
    channel = KernelChannel(folder=tmp_path / "logs")
    with pytest.raises(ParameterError):
        validate_parameters(tmp_path / "missing", tmp_path / "out", command_channel=channel.to_parameter())
    outcome = channel.read()
    assert outcome.status == "failed" and outcome.exit_code == EXIT_USAGE
    assert outcome.message.startswith("bundle ") and "does not exist" in outcome.message


def test_good_parameters_carry_the_channel_and_write_no_outcome(tmp_path):
    channel = KernelChannel(folder=tmp_path / "logs", verbose=True)
    params = validate_parameters(tmp_path, tmp_path / "out", command_channel=channel.to_parameter())
    assert params.channel == channel
    assert channel.read() is None
    assert validate_parameters(tmp_path, tmp_path / "out").channel is None


def test_an_outcome_round_trips_and_an_old_one_is_cleared(tmp_path):
    channel = KernelChannel(folder=tmp_path / "logs")
    outcome = KernelOutcome(status="analysed", ingest_status="empty", ingest_message="no log file found")
    channel.write(outcome)
    assert channel.read() == outcome
    assert not list((tmp_path / "logs").glob("*.partial"))
    channel.clear()
    assert channel.read() is None


def test_the_kernel_progress_lines_go_to_the_channel_file(tmp_path):
    channel = KernelChannel(folder=tmp_path)
    say = channel.progress()
    say("parsing 4 log files\n(300 MB)")
    say("classifying events")
    assert channel.progress_file.read_text().splitlines() == ["parsing 4 log files (300 MB)", "classifying events"]
