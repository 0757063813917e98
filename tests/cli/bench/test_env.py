"""`xlabench bench env`: environment step cost next to a full compile, as figures."""

from __future__ import annotations

import json

import pytest

from xlabench.cli import main


@pytest.mark.slow
def test_bench_env_prints_both_medians_for_one_graph(capsys):
    code = main(["bench", "env", "recurrent-gru-infer-l1-h128-s16-b8-f32", "--steps", "3", "--actions",
                 "simplification", "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["steps"] == 3
    assert report["median_step_seconds"] > 0 and report["median_full_compile_seconds"] > 0
    assert report["ratio"] == report["median_step_seconds"] / report["median_full_compile_seconds"]
