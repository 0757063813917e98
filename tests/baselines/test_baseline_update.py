"""Storing a policy's baselines, judged as the gates judge them, and measuring again against them."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlabench.baselines.baseline_records import PreviousVersion
from xlabench.baselines.baseline_store import load
from xlabench.baselines.baseline_update import (
    BaselineUpdate,
    against_previous,
    chosen_policies,
    diff_baselines,
    judge_stored,
    update_baselines,
)
from xlabench.baselines.gate_judgement import KnownGap
from xlabench.errors import UserInputError
from xlabench.eval.evaluation_records import EvaluationRow


def row(name: str, R: int = 8, D: int = 8, error: str | None = None) -> EvaluationRow:
    """A measured row on a graph XLA's default takes to D ops, the policy to R."""
    if error is not None:
        return EvaluationRow(name, "f", error=error)
    return EvaluationRow.from_json(
        {"name": name, "family": "f", "I": 10, "D": D, "R": R, "vs_default": D / R, "sequence": ["cse"]}
    )


def test_stored_graphs_are_judged_against_xlas_default_and_the_listed_gaps():
    rows = [row("short", R=9), row("listed", R=9), row("closed"), row("broken", error="compiler crashed")]
    gaps = [
        KnownGap("listed", "general", "op count vs XLA's default", "reviewed", "2026-12-01"),
        KnownGap("closed", "general@v2.0", "op count vs XLA's default", "reviewed", "2026-12-01"),
        KnownGap("short", "gpt2", "op count vs XLA's default", "another policy's", "2026-12-01"),
    ]
    short, listed, closed = judge_stored(rows, "general@v2.0", gaps)  # the failed row is not stored
    assert short.graph == "short" and short.known == ()
    assert short.standing == ("op count vs XLA's default: R 9 > D 8 x 1.05 (vs_default 0.8889)",)
    assert listed.standing == () and listed.known == short.standing
    # A listed gap whose gate passes fails too: the list stays true.
    assert closed.known == () and closed.standing[0].startswith("known gap closed: op count vs XLA's")
    update = BaselineUpdate("general@v2.0", Path("general"), tuple(rows), (short, listed, closed), None)
    assert (update.stored, update.failing, update.failing_only_listed) == (3, 2, 1)
    assert [failed.name for failed in update.not_stored] == ["broken"]


def test_a_new_version_is_compared_with_the_one_before_on_the_graphs_both_cover():
    before = {
        "grew": PreviousVersion("general@v1.1", "0.10.2", 8),
        "level": PreviousVersion("general@v1.1", "0.10.2", 8),
        "gone": PreviousVersion("general@v1.0", "0.10.1", 8),
        "broken": PreviousVersion("general@v1.1", "0.10.2", 8),
    }
    rows = [row("grew", R=9), row("level"), row("new"), row("broken", error="compiler crashed")]
    previous = against_previous(rows, before)
    assert previous.versions == ("general@v1.0", "general@v1.1")
    assert [comparison.graph for comparison in previous.comparisons] == ["grew", "level"]
    assert previous.new_graphs == 1 and previous.worse == ("grew",)


def test_without_stored_policies_there_is_nothing_to_measure(tmp_path, monkeypatch):
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path))
    with pytest.raises(UserInputError, match="no policies in .* \\(train one with `xlabench retrain`\\)"):
        chosen_policies(None)
    assert chosen_policies(["general@v2.0"]) == ["general@v2.0"]


@pytest.mark.slow
def test_update_stores_each_version_against_the_one_before_and_diff_measures_against_it(
    tmp_path, monkeypatch
):
    # general stops one pass short of XLA's default on this module (R 5 > D 4): stored, and judged so.
    monkeypatch.setenv("XLABENCH_BASELINES_DIR", str(tmp_path))
    options = {"graphs": "frontend-attributes", "workers": 1, "min_run_seconds": 0.01}
    heard = []
    [first] = update_baselines(["general@v1.1"], measurements=1, heard=heard.append, **options)
    [update] = update_baselines(["general@v2.0"], measurements=1, heard=heard.append, **options)
    assert heard == [first, update] and first.previous is None
    assert update.label == "general@v2.0" and update.directory == tmp_path / "general"
    assert update.stored == 1 and update.not_stored == () and update.failing == 1
    [gates] = update.gates
    assert gates.standing[0].startswith("op count vs XLA's default: R 5 > D 4")
    assert update.previous.versions == ("general@v1.1",) and update.previous.new_graphs == 0
    [comparison] = update.previous.comparisons
    assert comparison.now.policy_ops == load("general", root=tmp_path).get("frontend-attributes").policy_ops
    [diff] = diff_baselines(["general@v2.0"], **options)
    assert diff.label == "general@v2.0" and diff.stored_directory == update.directory
    assert diff.compiler == diff.stored_compiler
    [now] = diff.comparisons
    assert now.before.policy_ops == now.now.policy_ops and diff.regressions == 0
    # A graph without a stored baseline is a regression, not a silent pass.
    [unstored] = diff_baselines(["general@v2.0"], "recurrent-gru-infer-l1-h128-s16-b8-f32", 1, 20, 0.01)
    assert [c.status() for c in unstored.comparisons] == ["no baseline"] and unstored.regressions == 1
