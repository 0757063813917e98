"""`xlabench baselines update|diff` on a small graph with the general policy."""

from __future__ import annotations

import pytest

from xlabench.baselines.baseline_store import load
from xlabench.baselines.policy_measurement import median_rows
from xlabench.cli import main
from xlabench.eval.evaluation_records import EvaluationRow

GRAPH = "mlp_mixer-infer-l2-d64-p4-i16-b2-bf16"


@pytest.mark.slow
def test_update_stores_and_diff_shows_what_a_compiler_change_does(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XLABENCH_BASELINES_DIR", str(tmp_path))
    # Versions named: the test is of how a version is shown against the one before, whichever ships.
    options = ["--policy", "general@v2.0", "--graphs", GRAPH, "--workers", "1", "--min-run-time", "0.05"]
    earlier = ["--policy", "general@v1.1", *options[2:], "--measurements", "1"]
    assert main(["baselines", "update", *earlier]) == 0
    capsys.readouterr()
    assert main(["baselines", "update", *options]) == 0
    # A new version is shown against the one stored before, and keeps it for the gate.
    assert (
        "general@v2.0 against general@v1.1 (the version stored before), per graph:" in capsys.readouterr().out
    )
    stored = load("general", root=tmp_path).get(GRAPH)
    assert stored.policy_ops <= stored.default_ops and stored.sequence and stored.runtime_ratio > 0
    assert stored.previous.policy == "general@v1.1" and stored.previous.policy_ops > 0
    # The stored ratio is the median of three measurements (each with its own compiles and runs).
    ratios = stored.runtime_ratios
    assert len(ratios) == 3 and stored.runtime_ratio == sorted(ratios)[1]
    report = tmp_path / "diff.md"
    assert main(["baselines", "diff", *options, "--report", str(report)]) == 0
    assert "(1 graphs, " in capsys.readouterr().out
    markdown = report.read_text()
    assert "| graph | R before | R now | change | runtime before | runtime now | status |" in markdown
    assert (
        f"| {GRAPH} | {stored.policy_ops} | {stored.policy_ops} |  | {stored.runtime_ratio:.3f} |" in markdown
    )
    # A graph without a stored baseline is not a silent pass.
    unstored = [*options[:2], "--graphs", "recurrent-gru-infer-l1-h128-s16-b8-f32", *options[4:]]
    assert main(["baselines", "diff", *unstored]) == 1
    assert "recurrent-gru-infer-l1-h128-s16-b8-f32" in (line := capsys.readouterr().out.splitlines()[2])
    assert line.endswith("no baseline")
    # The same compiler without algsimp: diff names the graph and the op count it grew to; update refuses.
    monkeypatch.setenv("XLABENCH_DISABLE_PASSES", "algsimp")
    assert main(["baselines", "diff", *options]) == 1
    [row] = [line.split() for line in capsys.readouterr().out.splitlines() if line.strip().startswith(GRAPH)]
    assert row[1] == str(stored.policy_ops) and int(row[2]) > stored.policy_ops and "more" in row
    assert main(["baselines", "update", *options]) == 2
    assert "baselines are measured with the whole compiler" in capsys.readouterr().err
    monkeypatch.delenv("XLABENCH_DISABLE_PASSES")
    assert main(["baselines", "update", *options, "--measurements", "0"]) == 2
    assert "argument --measurements: must be at least 1, got 0" in capsys.readouterr().err


def test_a_stored_runtime_ratio_is_the_median_and_a_rollout_that_differs_is_not_stored():
    def row(name, ratio, sequence=("algsimp",), R=10, error=None):
        return EvaluationRow(
            name, "f", policy_ops=R, sequence=list(sequence), runtime_ratio=ratio, error=error
        )

    runs = [
        [row("a", 0.62), row("b", 1.0), row("c", 1.0)],
        [row("a", 1.01), row("b", 1.0, sequence=("cse",)), row("c", 1.0, error="compiler crashed")],
        [row("a", 0.99), row("b", 1.0), row("c", 1.0)],
    ]
    a, b, c = median_rows(runs)
    assert a.runtime_ratio == 0.99 and a.runtime_ratios == [0.62, 1.01, 0.99]  # the outlier is not kept
    assert "differed between measurements" in b.error
    assert c.error == "compiler crashed"


@pytest.mark.slow
def test_update_says_which_stored_graphs_fail_a_gate_today_and_strict_exits_1(tmp_path, monkeypatch, capsys):
    # general@v2.0 stops short of XLA's default on this module (R 5 > D 4): stored, and said so.
    monkeypatch.setenv("XLABENCH_BASELINES_DIR", str(tmp_path))
    options = ["--policy", "general@v2.0", "--graphs", "frontend-attributes", "--workers", "1"]
    options += ["--measurements", "1", "--min-run-time", "0.01"]
    assert main(["baselines", "update", *options]) == 0
    out = capsys.readouterr().out
    assert "frontend-attributes: stored, but fails a gate today: op count vs XLA's default: R 5 > D 4" in out
    assert "general@v2.0: 1 of 1 stored graph(s) fail a gate against XLA's default not listed" in out
    assert load("general", root=tmp_path).get("frontend-attributes") is not None
    assert main(["baselines", "update", *options, "--strict"]) == 1
    # Listed as a reviewed gap, it is said so, and --strict passes.
    (tmp_path / "known-gaps.toml").write_text(
        '[[gap]]\ngraph = "frontend-attributes"\npolicy = "general"\ngate = "op count vs XLA\'s default"\n'
        'reason = "the policy stops one pass short"\ndate = "2026-12-01"\n'
    )
    capsys.readouterr()
    assert main(["baselines", "update", *options, "--strict"]) == 0
    assert "0 of 1 stored graph(s) fail a gate against XLA's default not listed" in capsys.readouterr().out
