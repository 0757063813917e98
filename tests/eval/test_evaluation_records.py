"""The evaluation's records: every stored file reads into them and writes back the same bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.eval.evaluation_records import (
    EvaluationRow,
    Summary,
    SummaryPart,
    WorstGraph,
    summarize,
    worst_text,
)
from xlabench.files import json_bytes
from xlabench.xla.driver.execution import OutputError

ROOT = Path(__file__).resolve().parents[2]
EVAL_RESULTS = sorted((ROOT / "baselines" / "search").rglob("results.json"))
POLICY_METADATA = sorted((ROOT / "policies").rglob("metadata.json"))


def test_the_repository_holds_stored_evaluations_to_check():
    assert EVAL_RESULTS and POLICY_METADATA


@pytest.mark.parametrize("path", EVAL_RESULTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_stored_eval_result_reads_and_writes_back_byte_identically(path):
    stored = path.read_bytes()
    document = json.loads(stored)
    rows = [EvaluationRow.from_json(row) for row in document["graphs"]]
    rebuilt = {
        **document,
        "summary": Summary.from_json(document["summary"]).to_json(),
        "graphs": [row.result_json() for row in rows],
    }
    # Files written before `write_json` lack the final newline: the JSON itself is compared.
    assert json.dumps(rebuilt, indent=1).encode() == stored.rstrip(b"\n")


@pytest.mark.parametrize("path", POLICY_METADATA, ids=lambda path: str(path.relative_to(ROOT)))
def test_every_policys_stored_evaluation_reads_and_writes_back_identically(path):
    for part in json.loads(path.read_text()).get("eval", {}).values():
        rows = [EvaluationRow.from_json(row) for row in part["per_graph"]]
        rebuilt = {
            **Summary.from_json(part).to_json(),
            "per_graph": [row.result_json(details=False) for row in rows],
        }
        assert json_bytes(rebuilt) == json_bytes(part)  # the same keys in the same order


def test_a_stored_row_read_from_a_baseline_file_names_what_it_holds():
    path = ROOT / "baselines" / "general" / "bert-infer-l1-d64-h2-s32-b2-f32.json"
    stored = json.loads(path.read_text())
    row = EvaluationRow.from_json(stored)
    assert (row.input_ops, row.default_ops, row.policy_ops) == (stored["I"], stored["D"], stored["R"])
    assert row.runtime_ratios == stored["runtime_ratios"] and row.sequence == stored["sequence"]
    assert row.search_depth is None and row.error is None  # keys the file lacks read as None


def test_a_whole_row_round_trips_in_the_order_the_evaluation_measures_it():
    whole = {
        "name": "g", "family": "f", "I": 12, "D": 9, "R": 8, "sequence": ["algsimp", "cse"], "calls": 40,
        "search_depth": 2, "seconds": 1.5, "vs_default": 1.125, "reduction_ratio": 4 / 3,
        "runtime_ratio": None,
        "output_errors": [{"index": 0, "rms_sequence": 0.1, "rms_default": 0.2, "max_sequence": 0.3,
                           "max_default": 0.4, "elements": None}],
        "error": "outputs differ from XLA's default executable: output 0",
        "outputs_differ": ["output 0"],
        "run_seconds": {"sequence": [0.1, 0.2], "default": [0.3, 0.4]},
    }  # fmt: skip
    row = EvaluationRow.from_json(whole)
    assert row.output_errors == [OutputError(0, 0.1, 0.2, 0.3, 0.4)]
    assert row.run_seconds is not None and row.run_seconds.default == [0.3, 0.4]
    assert json.dumps(row.to_json()) == json.dumps(whole)
    failed = {"name": "g", "family": "f", "I": 12, "error": "compiler error"}  # stopped before D
    assert json.dumps(EvaluationRow.from_json(failed).to_json()) == json.dumps(failed)
    assert EvaluationRow.from_json(failed).result_json() == {
        **dict.fromkeys(["name", "family", "I", "D", "R", "vs_default", "reduction_ratio", "runtime_ratio",
                         "sequence", "calls", "seconds"]),
        "name": "g", "family": "f", "I": 12, "error": "compiler error",
    }  # fmt: skip


def test_an_older_row_and_summary_with_missing_optional_keys_load():
    older = {"name": "g", "family": "f", "I": 10, "D": 8, "R": 8, "vs_default": 1.0}
    row = EvaluationRow.from_json(older)
    assert row.calls is None and row.runtime_ratio is None and row.outputs_differ is None
    summary = summarize([row])
    assert (summary.graphs, summary.failed, summary.calls, summary.not_executed) == (1, 0, 0, 0)
    assert summary.worst == WorstGraph("g", 1.0)
    # Summaries stored before graphs not executed, below the bar or left unoptimized were counted.
    stored = {"graphs": 1, "failed": 0, "outputs_differ": 0, "geomean_vs_default": 1.0,
              "geomean_reduction_ratio": None, "geomean_runtime_ratio": None,
              "worst": {"name": "g", "vs_default": 1.0}, "calls": 0, "families": {}}  # fmt: skip
    read = Summary.from_json(stored)
    assert read.not_executed is None and read.below is None and read.left_unoptimized is None
    assert json.dumps(read.to_json()) == json.dumps(stored)
    oldest = {key: value for key, value in stored.items() if key != "outputs_differ"}
    assert json.dumps(Summary.from_json(oldest).to_json()) == json.dumps(oldest)


def test_a_summary_written_now_has_every_count_per_family():
    rows = [
        EvaluationRow("a", "f", 10, 8, 8, ["cse"], 3, vs_default=1.0, runtime_ratio=1.1),
        EvaluationRow("b", "h", 10, 9, 10, ["cse"], 5, vs_default=0.9),
        EvaluationRow("c", "h", error="compiler error"),
    ]
    summary = summarize(rows)
    assert list(summary.families) == ["f", "h"]
    assert (summary.graphs, summary.failed, summary.calls, summary.below) == (3, 1, 8, 1)
    # b is left as it came (R = I) while XLA removes 10%: below the bar and left unoptimized.
    assert summary.families["h"] == SummaryPart(
        graphs=2, failed=1, geomean_vs_default=0.9, geomean_reduction_ratio=None, geomean_runtime_ratio=None,
        worst=WorstGraph("b", 0.9), calls=5, outputs_differ=0, not_executed=0, below=1, left_unoptimized=1,
    )  # fmt: skip
    document = summary.to_json()
    assert list(document) == ["graphs", "failed", "outputs_differ", "not_executed", "geomean_vs_default",
                              "geomean_reduction_ratio", "geomean_runtime_ratio", "worst", "calls", "below",
                              "left_unoptimized", "families"]  # fmt: skip
    assert document["worst"] == {"name": "b", "vs_default": 0.9}
    assert Summary.from_json(document) == summary


def test_the_worst_graph_is_a_dash_when_there_is_none():
    assert worst_text(None) == "-"
    assert worst_text(WorstGraph("g", 0.95)) == "g (0.9500)"
