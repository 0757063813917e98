"""The suite-wide runtime gate over every verdict, and what a failing verdict prints."""

from __future__ import annotations

import dataclasses

import pytest

from tests.baselines.test_gate_judgement import baseline_entry, measured_row
from xlabench.baselines.baseline_diff import Tolerances
from xlabench.baselines.gate_judgement import judge
from xlabench.plugin.gates import GEOMEAN_MIN_GATES, Verdict, judge_geomean, runtime_geomean


def verdict_summary(ratio: float, baseline_ratio: float | None, judged: bool = True) -> dict:
    """A verdict summary as the session collects it, reduced to what the suite-wide gate reads."""
    return {
        "runtime_ratio": ratio,
        "baseline_runtime_ratio": baseline_ratio,
        "runtime_judged": judged,
        "failures": [],
    }


def test_the_suite_wide_geomean_fails_a_few_percent_on_every_graph_that_no_graph_gate_sees():
    tolerances = Tolerances()
    steady = [verdict_summary(ratio, 1.0) for ratio in (0.8, 1.25) * 15]  # per-graph noise, geomean 1
    geomean = runtime_geomean(steady)
    assert geomean is not None and geomean[0] == pytest.approx(1.0) and geomean[2] == 30
    assert judge_geomean(geomean, tolerances) == []
    # 15% slower on every graph: each gate passes (<= 2, <= baseline x 1.5), the suite does not.
    slower = [verdict_summary(1.15 * ratio, 1.0) for ratio in (0.8, 1.25) * 15]
    baseline = baseline_entry(R=140, runtime_ratio=1.0)
    assert all(judge(measured_row(1.0, v["runtime_ratio"]), baseline, tolerances) == [] for v in slower)
    gates = [failure.split(":")[0] for failure in judge_geomean(runtime_geomean(slower), tolerances)]
    assert gates == ["suite-wide runtime", "suite-wide runtime vs baselines"]
    # Under the floor, and too few gates, nothing is judged.
    assert runtime_geomean([verdict_summary(3.0, 1.0, judged=False)] * 30) is None
    assert runtime_geomean(slower[: GEOMEAN_MIN_GATES - 1]) is None


def test_a_runtime_failure_shows_each_executables_median_and_spread():
    row = dataclasses.replace(measured_row(1.0, 2.2), input_ops=150, sequence=["cse"])
    row.run_seconds.sequence[0] *= 3  # one slow outlier
    message = Verdict(
        "g", "general@v2.0", "0.10.2", (), row, None, None, ["runtime vs XLA's default"]
    ).message()
    assert "runs (median, IQR): policy 2.200 ms, 0.000 ms, default 1.000 ms, 0.000 ms" in message
