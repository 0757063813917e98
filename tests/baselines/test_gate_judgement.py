"""Judging a measured row by the gates: the runtime floor, the version before; the reviewed known gaps."""

from __future__ import annotations

import pytest

from xlabench.baselines.baseline_diff import Tolerances
from xlabench.baselines.baseline_records import BaselineEntry
from xlabench.baselines.gate_judgement import KnownGap, judge, load_known_gaps, split_known
from xlabench.errors import UserInputError
from xlabench.eval.evaluation_records import EvaluationRow


def measured_row(default_ms: float, ratio: float) -> EvaluationRow:
    """A measured row (as `measure` keeps it): equal op counts, executables `ratio` apart in time."""
    default = [default_ms / 1000] * 21
    return EvaluationRow.from_json(
        {
            "name": "g",
            "family": "f",
            "D": 140,
            "R": 140,
            "vs_default": 1.0,
            "runtime_ratio": ratio,
            "run_seconds": {"default": default, "sequence": [seconds * ratio for seconds in default]},
        }
    )


def baseline_entry(**stored) -> BaselineEntry:
    """A stored baseline of graph g with the given JSON fields."""
    return BaselineEntry.from_json({"name": "g", **stored})


def test_a_slower_executable_fails_above_the_floor_and_is_not_judged_below_it_whatever_the_load():
    tolerances = Tolerances()
    baseline = baseline_entry(R=140, D=140, runtime_ratio=1.2)
    slow_long = judge(measured_row(1.0, 2.2), baseline, tolerances)
    gates = [failure.split(":")[0] for failure in slow_long]
    assert gates == ["runtime vs XLA's default", "runtime vs baseline"]
    # 0.065 ms: what control_flow-cg-n16-b4-plain-bf16's default executable runs, where dispatch and
    # thread wake-ups decide the ratio (2.1-2.3 next to another xdist worker, with R = D).
    assert judge(measured_row(0.065, 2.2), baseline, tolerances) == []
    assert judge(measured_row(0.065, 2.2), baseline, Tolerances(runtime_floor_ms=0.0)) != []
    # A busy machine lifts a short default's median over the floor, never its fastest run: CI measured
    # control_flow-newton_cg-m256-f32-f32's default at a 0.344 ms median, 0.106 ms fastest alone.
    loaded = measured_row(0.344, 2.2)
    loaded.run_seconds.default[0] = loaded.run_seconds.sequence[0] = 0.000106
    assert judge(loaded, baseline, tolerances) == []
    assert judge(loaded, baseline, Tolerances(runtime_floor_ms=0.1)) != []


def test_known_gaps_are_read_checked_and_matched_by_gate(tmp_path):
    path = tmp_path / "known-gaps.toml"
    assert load_known_gaps(path) == []  # no file, no gaps
    path.write_text(
        '[[gap]]\ngraph = "g"\npolicy = "general"\ngate = "op count vs XLA\'s default"\n'
        'reason = "r"\ndate = "2026-11-27"\n'
    )
    [gap] = load_known_gaps(path)
    assert gap.covers("g", "general@v2.0") and gap.covers("g", "general")
    assert not gap.covers("g", "gpt2@v1.0") and not gap.covers("h", "general@v2.0")
    gap_line = "op count vs XLA's default: R 9 > D 8 x 1.05 (vs_default 0.8889)"
    assert split_known([gap_line, "op count vs baseline: R 9 > baseline R 8"], [gap]) == (
        ["op count vs baseline: R 9 > baseline R 8"],
        [gap_line],
        [gap],
    )
    [closed] = split_known([], [gap])[0]
    assert closed.startswith("known gap closed: op count vs XLA's default passes now")
    # Not judged is not closed: a policy that could not run, a runtime under the floor.
    assert split_known(["the policy could not be run: x"], [gap])[0] == ["the policy could not be run: x"]
    runtime_gap = KnownGap("g", "general", "runtime vs XLA's default", "r", "d")
    assert split_known([], [runtime_gap], runtime_judged=False) == ([], [], [])
    path.write_text('[[gap]]\ngraph = "g"\npolicy = "general"\ngate = "speed"\nreason = "r"\ndate = "d"\n')
    with pytest.raises(UserInputError, match=r"gap 1: unknown gate 'speed'"):
        load_known_gaps(path)
    path.write_text('[[gap]]\ngraph = "g"\n')
    with pytest.raises(UserInputError, match=r"gap 1 lacks policy, gate, reason, date$"):
        load_known_gaps(path)
    path.write_text("[[gap]\n")
    with pytest.raises(UserInputError, match="not a readable known-gaps file"):
        load_known_gaps(path)


def test_a_known_gaps_file_that_would_not_apply_is_refused_one_line_a_problem(tmp_path):
    # Misspelled, it would be ignored: "0 known gaps", and the user never learns why.
    path = tmp_path / "known-gaps.toml"
    entry = 'graph = "g"\npolicy = "{policy}"\ngate = "no baseline"\nreason = "r"\ndate = "d"\n'
    path.write_text(
        "[[gaps]]\n" + entry.format(policy="general")
        + "[[gap]]\n" + entry.format(policy="genral") + 'colour = "red"\n'
        + "[[gap]]\n" + entry.format(policy="general@v9.9")
    )  # fmt: skip
    with pytest.raises(UserInputError) as refused:
        load_known_gaps(path)
    assert str(refused.value).splitlines() == [
        f"{path}: unknown table 'gaps' (gaps are listed as [[gap]])",
        f"{path}: gap 1: unknown key(s) colour (graph, policy, gate, reason, date)",
        f"{path}: gap 1: no policy 'genral' is stored (policies: general)",
        f"{path}: gap 2: policy general has no version v9.9",
    ]


def test_a_new_version_worse_than_the_previous_one_fails_until_a_reviewer_lists_it():
    previous = {"policy": "general@v2.0", "jaxlib": "0.10.2", "R": 130, "runtime_ratio": 1.0}
    # The new version's own baseline is R 140: gate (b) alone would pass it.
    baseline = baseline_entry(R=140, D=140, runtime_ratio=1.0, previous=previous)
    failures = judge(measured_row(1.0, 1.6), baseline, Tolerances())
    assert failures == [
        "op count vs previous version: R 140 > general@v2.0 R 130 (+10, +7.7%)",
        "runtime vs baseline: policy/default 1.600 > baseline 1.000 x 1.5",
        "runtime vs previous version: policy/default 1.600 > general@v2.0 1.000 x 1.5",
    ]
    gap = KnownGap("g", "general@v2.1", "op count vs previous version", "reviewed", "2026-11-27")
    standing, known, _ = split_known(failures[:1], [gap])
    assert standing == [] and known == failures[:1]
    level = baseline_entry(R=140, D=140, runtime_ratio=1.0, previous={**previous, "R": 140})
    assert judge(measured_row(1.0, 1.0), level, Tolerances()) == []
