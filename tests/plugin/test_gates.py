"""Gate (c)'s runtime floor: which measured rows the runtime gate judges."""

from __future__ import annotations

from xlabench.plugin.gates import Tolerances, judge


def measured_row(default_ms: float, ratio: float) -> dict:
    """A measured row (as `measure` keeps it): equal op counts, executables `ratio` apart in time."""
    default = [default_ms / 1000] * 21
    return {
        "D": 140,
        "R": 140,
        "vs_default": 1.0,
        "runtime_ratio": ratio,
        "run_seconds": {"default": default, "sequence": [seconds * ratio for seconds in default]},
    }


def test_a_slower_executable_fails_above_the_floor_and_is_not_judged_below_it():
    tolerances = Tolerances()
    baseline = {"R": 140, "D": 140, "runtime_ratio": 1.2}
    slow_long = judge(measured_row(1.0, 2.2), baseline, tolerances)
    gates = [failure.split(":")[0] for failure in slow_long]
    assert gates == ["runtime vs XLA's default", "runtime vs baseline"]
    # 0.065 ms: what control_flow-cg-n16-b4-plain-bf16's default executable runs, where dispatch and
    # thread wake-ups decide the ratio (2.1-2.3 next to another xdist worker, with R = D).
    assert judge(measured_row(0.065, 2.2), baseline, tolerances) == []
    assert judge(measured_row(0.065, 2.2), baseline, Tolerances(runtime_floor_ms=0.0)) != []
