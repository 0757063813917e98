"""Numeric options are checked when the command line is parsed: one line naming the option, exit 2."""

from __future__ import annotations

import pytest

from xlabench.cli import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["eval", "--budget", "0"], "argument --budget: must be at least 1, got 0"),
        (["eval", "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["eval", "--workers", "-3"], "argument --workers: must be at least 1, got -3"),
        (["eval", "--repeats", "two"], "argument --repeats: expected a whole number, got 'two'"),
        (["retrain", "--steps", "-1"], "argument --steps: must be at least 0, got -1"),
        (["baselines", "update", "--min-run-time", "nan"], "argument --min-run-time: must be at least 0"),
        (["bench", "replay", "--workers", "0"], "argument --workers: must be at least 1, got 0"),
        (["interactive", "--channel-base", "x", "--timeout", "0"], "argument --timeout: must be above 0"),
        (["graphs", "build", "--jobs", "0"], "argument --jobs: must be at least 1, got 0"),
    ],
)
def test_a_numeric_option_out_of_range_is_refused_before_anything_runs(capsys, argv, message):
    assert main(argv) == 2
    error = capsys.readouterr().err
    assert message in error and error.count("\n") == 1, error


def test_a_budget_for_a_policy_that_does_not_search_is_refused(capsys):
    # A trained policy's rollout spends no budget: the option would be ignored silently.
    assert main(["eval", "--policy", "general", "--budget", "10", "--graphs", "synthetic"]) == 2
    assert "general does not search" in capsys.readouterr().err
    assert main(["eval", "--policy", "replay", "--budget", "10", "--graphs", "synthetic"]) == 2
