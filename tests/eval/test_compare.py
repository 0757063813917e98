"""`xlabench compare`: eval results side by side per split and family; bad files are one clear error."""

from __future__ import annotations

import json

from xlabench.cli import main


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
