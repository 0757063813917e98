"""`xlabench bench scaling`: generated stacks of the sizes asked, every cost measured side by side."""

from __future__ import annotations

import json

import pytest

from xlabench.cli import main
from xlabench.xla import HloModule


@pytest.mark.slow
def test_bench_scaling_builds_each_size_and_times_steps_and_compiles(capsys, tmp_path):
    code = main(["bench", "scaling", "--sizes", "300,900", "--actions", "simplification",
                 "--keep", str(tmp_path), "--json"])  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert code == 0 and len(report["rows"]) == 2
    small, large = report["rows"]
    assert large["layers"] > small["layers"]
    for row, target in zip(report["rows"], (300, 900), strict=True):
        assert abs(row["op_count"] - target) < 100  # one layer is ~96 ops
        assert row["steps"] > 10 and row["median_step_seconds"] > 0 and row["full_compile_seconds"] > 0
        assert row["ratio"] == row["median_step_seconds"] / row["full_compile_seconds"]
        per_thousand = 1e6 * row["median_step_seconds"] / row["op_count"]
        assert row["step_ms_per_thousand_ops"] == pytest.approx(per_thousand)
        kept = HloModule.from_file(tmp_path / f"gpt2-stack-l{row['layers']}.hlo")
        assert kept.op_count == row["op_count"]


def test_bench_scaling_refuses_sizes_it_cannot_build(capsys):
    assert main(["bench", "scaling", "--sizes", "5,x"]) == 2
    assert capsys.readouterr().err.strip() == (
        "xlabench: error: --sizes 5,x: expected op counts of at least 100, e.g. 1000,5000"
    )
