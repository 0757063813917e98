"""`xlabench compare`: eval results side by side per split and family; bad files are one clear error."""

from __future__ import annotations

import json

import pytest

from xlabench.cli import main
from xlabench.eval.comparison_report import write_report


def _result(path, policy, spec, rows):
    graphs = [{"name": name, "family": family, "I": 10, "D": d, "R": r, "vs_default": d / r,
               "reduction_ratio": None, "runtime_ratio": None, "sequence": [], "calls": calls, "seconds": 1.0}
              for name, family, d, r, calls in rows]  # fmt: skip
    path.write_text(json.dumps({"policy": policy, "graphs_spec": spec, "graphs": graphs}))
    return str(path)


def test_compare_tables_strategies_per_spec_and_family(tmp_path, capsys):
    greedy = _result(
        tmp_path / "g.json",
        "search:greedy",
        "test",
        [("a", "gpt2", 100, 110, 500), ("b", "moe", 50, 50, 300)],
    )
    policy = _result(
        tmp_path / "p.json", "general@v1.0", "test", [("a", "gpt2", 100, 100, 31), ("b", "moe", 50, 49, 21)]
    )
    assert main(["compare", greedy, policy, "--report", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "report.md").read_text()
    assert "| search:greedy | 0.9091 | 1.0000 | **0.9535** | a (0.9091) | 1 | 400.0 | 0 |" in table
    assert "| general@v1.0 | 1.0000 | 1.0204 |" in table and "| a (1.0000) | 0 | 26.0 | 0 |" in table
    assert (tmp_path / "out" / "report.png").read_bytes()[:4] == b"\x89PNG"
    assert table in capsys.readouterr().out


def test_the_report_is_written_with_a_figure_for_each_thing_there_is_to_draw(tmp_path):
    greedy = _result(tmp_path / "g.json", "search:greedy", "test", [("a", "gpt2", 100, 110, 500)])
    out = tmp_path / "out"
    report = write_report([greedy], str(out), "One strategy")
    assert report.markdown == (out / "report.md").read_text() and report.markdown.startswith("# One strategy")
    # An eval result has no training curve and no seeds: only the table and the geomeans are drawn.
    assert report.files == (str(out / "report.md"), str(out / "report.png"))
    assert sorted(path.name for path in out.iterdir()) == ["report.md", "report.png"]


def test_a_file_that_is_not_an_eval_result_is_one_clear_error(tmp_path, capsys):
    (tmp_path / "x.json").write_text("[1, 2]")
    assert main(["compare", str(tmp_path / "x.json"), "--report", str(tmp_path / "out")]) == 2
    assert "x.json: not an `xlabench eval --json` result" in capsys.readouterr().err


def test_a_policy_directory_brings_its_stored_evaluations_and_curve(tmp_path):
    greedy = _result(tmp_path / "g.json", "search:greedy", "test", [("a", "gpt2", 100, 110, 500)])
    rows = json.loads((tmp_path / "g.json").read_text())["graphs"]
    version = tmp_path / "general" / "v1.0"
    version.mkdir(parents=True)
    evaluated = [{**rows[0], "R": 100, "vs_default": 1.0, "calls": 31}]
    metadata = {
        "name": "general",
        "version": "v1.0",
        "algorithm": "ppo",
        "seed": 3,
        "warm_start": {"seconds": 90.0},
        "training": {
            "graphs": "train",
            "steps": 128,
            "episodes": 9,
            "seconds": 300.0,
            "curve": [[64, 0.1], [128, 0.2]],
        },
        "eval": {"test": {"per_graph": evaluated}},
    }
    (version / "metadata.json").write_text(json.dumps(metadata))
    assert main(["compare", greedy, str(version), "--report", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "report.md").read_text()
    assert "| general@v1.0 (ppo) | 1.0000 | **1.0000** | a (1.0000) | 0 | 31.0 | 0 |" in table
    assert "| general@v1.0 (ppo) | ppo | train | 3 | 1.5 min | 128 | 9 | 5.0 min |" in table
    assert (tmp_path / "out" / "training_curves.png").read_bytes()[:4] == b"\x89PNG"
    (version / "metadata.json").write_text("{}")
    assert main(["compare", str(version), "--report", str(tmp_path / "out")]) == 2


def _seeded_version(root, name, algorithm, policy, warm_start):
    """A version directory as `retrain --seeds` writes it: per-seed, per-graph selection scores."""
    from xlabench.agents.seeds import SeedScores

    version = root / name / "v1.0"
    version.mkdir(parents=True)
    graphs = [f"g{index}" for index in range(len(policy[0]))]
    seeds = [SeedScores(seed, p, w, [[64, 0.1], [128, 0.2]], graphs).to_json()
             for seed, (p, w) in enumerate(zip(policy, warm_start, strict=True))]  # fmt: skip
    metadata = {"name": name, "version": "v1.0", "algorithm": algorithm, "seed": 0, "selected_on": "val",
                "training": {"graphs": "train", "steps": 128, "episodes": 9, "seconds": 60.0},
                "eval": {}, "seeds": seeds}  # fmt: skip
    (version / "metadata.json").write_text(json.dumps(metadata))
    return str(version)


@pytest.mark.slow
def test_versions_trained_over_seeds_are_compared_with_intervals(tmp_path):
    warm = [[1.0, 1.0, 0.99, 1.0]] * 3
    better = _seeded_version(tmp_path, "ppo", "ppo", [[1.02, 1.01, 1.0, 1.03], [1.01, 1.02, 1.0, 1.02],
                                                      [1.03, 1.01, 1.01, 1.02]], warm)  # fmt: skip
    worse = _seeded_version(tmp_path, "a2c", "a2c", [[0.9, 0.95, 0.9, 0.92]] * 3, warm)
    assert main(["compare", better, worse, "--report", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "report.md").read_text()
    assert "## Over seeds, on val" in table
    ppo_row = next(line for line in table.splitlines() if line.startswith("| ppo@v1.0 (ppo) | 3 | 4 |"))
    a2c_row = next(line for line in table.splitlines() if line.startswith("| a2c@v1.0 (a2c) | 3 | 4 |"))
    # PPO beats its warm start on every graph and seed: P = 1 with a degenerate interval.
    assert "| 1.0000 [1.0000, 1.0000] | - |" in ppo_row
    # A2C is below PPO everywhere: P(a2c > ppo) = 0; below its warm start too.
    assert a2c_row.endswith("| 0.0000 [0.0000, 0.0000] | 0.0000 [0.0000, 0.0000] |")
    assert (tmp_path / "out" / "performance_profiles_val.png").read_bytes()[:4] == b"\x89PNG"


def test_seed_runs_judged_on_different_graphs_are_refused(tmp_path, capsys):
    first = _seeded_version(tmp_path, "one", "ppo", [[1.0, 1.0]], [[1.0, 1.0]])
    other = _seeded_version(tmp_path, "two", "ppo", [[1.0, 1.0, 1.0]], [[1.0, 1.0, 1.0]])
    assert main(["compare", first, other, "--report", str(tmp_path / "out")]) == 2
    assert "were judged on different val graphs" in capsys.readouterr().err


@pytest.mark.slow
def test_a_run_that_wrote_no_version_is_compared_from_its_seed_scores_with_the_reasons(tmp_path):
    from xlabench.agents.seeds import SEED_SCORES_FORMAT, SeedScores

    warm = [[1.0, 1.0, 0.99, 1.0]] * 3
    ppo = _seeded_version(tmp_path, "ppo", "ppo", [[1.02, 1.01, 1.0, 1.03]] * 3, warm)
    reason = "g1: output 28: error vs f32 reference rms 0.0226 (XLA's default 0.00306): worse"
    seeds = [SeedScores(seed, [0.85, 0.9, 0.8, 0.9], None, graphs=["g0", "g1", "g2", "g3"],
                        outputs_worse=[reason]).to_json() for seed in range(3)]  # fmt: skip
    scores = tmp_path / "dqn.json"
    refused = [f"seed {seed}: {reason}" for seed in range(3)]
    scores.write_text(json.dumps({"format": SEED_SCORES_FORMAT, "name": "dqn", "algorithm": "dqn",
                                  "selected_on": "val", "shipped_seed": None, "seeds": seeds,
                                  "not_written": refused}))  # fmt: skip
    assert main(["compare", ppo, str(scores), "--report", str(tmp_path / "out")]) == 0
    table = (tmp_path / "out" / "report.md").read_text()
    label = "dqn (dqn), not written"
    row = next(line for line in table.splitlines() if line.startswith(f"| {label} | 3 | 4 |"))
    assert "| 0.0000 [0.0000, 0.0000] |" in row  # P(dqn > ppo): below on every graph and seed
    assert f"{label}: no version, so no evaluation on other splits" in table
    assert f"- seed 2: {reason}" in table
    assert "## val" not in table  # no evaluation of a version: no per-split row
