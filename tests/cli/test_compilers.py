"""The driver's command line: JSON that scripts rely on, one clear line for bad input."""

from __future__ import annotations

import json

import pytest

from xlabench.cli import main
from xlabench.xla import HloModule


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_passes_json_lists_classified_passes(capsys):
    code, out, _ = run(capsys, "passes", "--json")
    assert code == 0
    catalogue = json.loads(out)
    kinds = {entry["name"]: entry["kind"] for entry in catalogue["passes"]}
    assert kinds["algsimp"] == "simplification" and kinds["layout-assignment"] == "required"
    assert kinds["flatten-call-graph"] == "orderable"
    assert catalogue["counting_point"] == "layout-assignment"
    # `simplification` is part of `all`; `all` also holds the orderable passes, in pipeline order.
    sets = catalogue["action_sets"]
    assert set(sets["simplification"]) < set(sets["all"])
    assert "flatten-call-graph" in sets["all"] and "flatten-call-graph" not in sets["simplification"]


def test_stats_json_has_the_documented_keys(capsys, data_directory):
    code, out, _ = run(capsys, "stats", str(data_directory / "redundant.hlo"), "--json")
    assert code == 0
    report = json.loads(out)
    assert report["op_count"] == 9
    assert report["default_op_count"] <= report["op_count"]
    assert report["histogram"]["multiply"] == 2
    assert set(report["cost"]) == {"flops", "transcendentals", "bytes_accessed"}
    assert report["full_compile_seconds"] > 0


def test_apply_reports_every_step_and_writes_a_reloadable_module(capsys, tmp_path, data_directory):
    output = tmp_path / "out.hlo"
    source = str(data_directory / "redundant.hlo")
    code, out, _ = run(capsys, "apply", source, "algsimp", "cse", "-o", str(output), "--json")
    assert code == 0
    report = json.loads(out)
    assert [(step["pass"], step["op_count"], step["error"]) for step in report["steps"]] == [
        ("algsimp", 5, None),
        ("cse", 4, None),
    ]
    assert all(step["seconds"] >= 0 for step in report["steps"])
    assert HloModule.from_file(output).op_count == 4


def test_apply_check_outputs_runs_the_result_against_xlas_default(capsys, tmp_path, data_directory):
    source = str(data_directory / "redundant.hlo")
    code, out, _ = run(
        capsys, "apply", source, "algsimp", "cse", "-o", str(tmp_path / "o.hlo"), "--check-outputs"
    )
    assert code == 0
    assert "outputs: every buffer matches XLA's default executable" in out
    # Another input set, signed, as a reproducer names it; a seed that cannot be is one usage line.
    code, out, _ = run(capsys, "apply", source, "algsimp", "-o", str(tmp_path / "o.hlo"), "--check-outputs",
                       "--input-seed", "3", "--signed-inputs")  # fmt: skip
    assert code == 0 and "every buffer matches" in out
    code, _, err = run(
        capsys, "apply", source, "algsimp", "-o", str(tmp_path / "o.hlo"), "--input-seed", "-1"
    )
    assert code == 2 and err.count("\n") == 1
    assert "argument --input-seed: must be at least 0, got -1" in err


@pytest.mark.parametrize(
    ("make_argv", "message"),
    [
        (lambda tmp, data: ["stats", str(tmp / "missing.hlo")], "no such file"),
        (lambda tmp, data: ["stats", str(tmp)], "is a directory"),
        (lambda tmp, data: ["stats", str(tmp / "empty.hlo")], "empty file"),
        (lambda tmp, data: ["stats", str(tmp / "malformed.hlo")], "HLO syntax error at line"),
        (
            lambda tmp, data: ["apply", str(data / "redundant.hlo"), "algsimpp", "-o", str(tmp / "o.hlo")],
            "unknown pass",
        ),
        (lambda tmp, data: ["stats", "no-such-graph-in-the-suite"], "no-such-graph-in-the-suite"),
    ],
)
def test_bad_input_gives_one_line_and_exit_2(capsys, tmp_path, data_directory, make_argv, message):
    (tmp_path / "empty.hlo").write_text("")
    (tmp_path / "malformed.hlo").write_text("HloModule broken\nENTRY {\n")
    code, out, err = run(capsys, *make_argv(tmp_path, data_directory))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("xlabench: error: ") and message in err
    assert not (tmp_path / "o.hlo").exists()
