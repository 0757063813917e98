"""Per-graph comparisons of a measurement with a stored record: statuses and the tables printed."""

from __future__ import annotations

from xlabench.baselines.baseline_diff import Comparison, Tolerances, counts, markdown_table, text_table
from xlabench.baselines.baseline_records import BaselineEntry
from xlabench.eval.evaluation_records import EvaluationRow

STORED = BaselineEntry.from_json(
    {"name": "g", "R": 100, "runtime_ratio": 1.0, "sequence": ["algsimp", "cse"]}
)


def now(R=100, ratio=1.0, sequence=("algsimp", "cse"), **extra):
    return EvaluationRow.from_json(
        {"name": "g", "family": "f", "R": R, "runtime_ratio": ratio, "sequence": list(sequence), **extra}
    )


def test_each_status_is_the_worst_thing_the_graph_shows():
    cases = {
        "failed": Comparison("a", STORED, EvaluationRow("a", "f", error="compiler crashed")),
        "no baseline": Comparison("b", None, now()),
        "more ops": Comparison("c", STORED, now(R=101, ratio=0.5)),
        "slower": Comparison("d", STORED, now(ratio=1.6)),
        "fewer ops": Comparison("e", STORED, now(R=90, ratio=1.4)),  # 1.4 is within the noise
        "faster": Comparison("f", STORED, now(ratio=0.6)),
        "same": Comparison("g", STORED, now(ratio=1.3)),
    }
    assert {status: c.status() for status, c in cases.items()} == {status: status for status in cases}
    assert cases["same"].status(Tolerances(runtime_noise=0.2)) == "slower"
    assert counts(list(cases.values())) == dict.fromkeys(cases, 1)


def test_under_the_runtime_floor_a_ratio_is_neither_slower_nor_faster():
    # control_flow-newton_cg-m256-f32-f32: XLA's default runs in 0.11 ms, where the ratio measures
    # dispatch; the gates do not judge it (`runtime_judged`), so the comparison does not either.
    def runs(default_ms: float) -> dict:
        return {"run_seconds": {"sequence": [default_ms / 500] * 5, "default": [default_ms / 1000] * 5}}

    assert Comparison("g", STORED, now(ratio=2.0, **runs(0.11))).status() == "same"
    assert Comparison("g", STORED, now(ratio=0.5, **runs(0.11))).status() == "same"
    assert Comparison("g", STORED, now(R=101, ratio=2.0, **runs(0.11))).status() == "more ops"
    assert Comparison("g", STORED, now(ratio=2.0, **runs(4.0))).status() == "slower"


def test_tables_show_op_counts_and_runtime_columns_before_and_now():
    comparisons = [
        Comparison("graph-one", STORED, now(R=110, ratio=1.25, sequence=["cse"])),
        Comparison("graph-two", None, now()),
    ]
    header, one, two = text_table(comparisons)
    assert header.split() == ["graph", "R", "before", "R", "now", "change", "runtime", "before", "runtime",
                              "now", "status"]  # fmt: skip
    assert one.split() == ["graph-one", "100", "110", "+10.0%", "1.000", "1.250", "more", "ops;", "sequence",
                           "changed"]  # fmt: skip
    assert two.split() == ["graph-two", "-", "100", "-", "1.000", "no", "baseline"]
    markdown = markdown_table(comparisons)
    assert markdown[0] == "| graph | R before | R now | change | runtime before | runtime now | status |"
    assert markdown[2] == "| graph-one | 100 | 110 | +10.0% | 1.000 | 1.250 | more ops; sequence changed |"
