"""`xlabench eval`: per-graph counts and ratios, JSON and report files, clear errors."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.commands import interrupt_after
from xlabench.cli import main
from xlabench.errors import UserInputError
from xlabench.eval import resolve_strategy
from xlabench.graphs import resolve_graphs

GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


@pytest.fixture
def one_graph_directory(tmp_path):
    """A directory holding one small suite graph, as a user's own graphs would be given."""
    directory = tmp_path / "graphs"
    directory.mkdir()
    graph = resolve_graphs(GRAPH)[0]
    shutil.copy(graph.path, directory / graph.path.name)
    return directory


def test_replay_evaluates_to_xlas_default_with_json_and_report(tmp_path, one_graph_directory, capsys):
    out, report = tmp_path / "eval.json", tmp_path / "report"
    code = main(["eval", "--policy", "replay", "--graphs", str(one_graph_directory), "--json", str(out),
                 "--report", str(report), "--repeats", "3"])  # fmt: skip
    assert code == 0
    document = json.loads(out.read_text())
    (row,) = document["graphs"]
    assert set(row) == {"name", "family", "I", "D", "R", "vs_default", "reduction_ratio", "runtime_ratio",
                        "sequence", "calls", "seconds"}  # fmt: skip
    assert row["R"] == row["D"] and row["vs_default"] == 1.0 == document["geomean_vs_default"]
    assert row["reduction_ratio"] is None  # I < D on this graph: the paper's ratio is undefined
    assert row["runtime_ratio"] > 0 and row["calls"] > 100
    assert (
        f"| {GRAPH} | {row['I']} | {row['D']} | {row['R']} | 1.0000 |" in (report / "report.md").read_text()
    )
    assert (report / "vs_default.png").read_bytes()[:4] == b"\x89PNG"
    assert "geomean vs_default 1.0000" in capsys.readouterr().out


@pytest.mark.slow
def test_greedy_search_reports_what_it_found_and_cost(tmp_path, one_graph_directory):
    out = tmp_path / "eval.json"
    code = main(["eval", "--policy", "search:greedy", "--graphs", str(one_graph_directory), "--actions",
                 "simplification", "--budget", "120", "--no-runtime", "--json", str(out)])  # fmt: skip
    assert code == 0
    (row,) = json.loads(out.read_text())["graphs"]
    assert row["calls"] <= 120 and row["runtime_ratio"] is None
    assert row["vs_default"] == row["D"] / row["R"]
    assert "search_depth" not in row  # only beam search reports a depth


@pytest.mark.slow
def test_beam_search_reports_the_depth_it_reached(tmp_path, one_graph_directory):
    out, report = tmp_path / "eval.json", tmp_path / "report"
    code = main(["eval", "--policy", "search:beam", "--graphs", str(one_graph_directory), "--actions",
                 "simplification", "--budget", "60", "--no-runtime", "--json", str(out),
                 "--report", str(report)])  # fmt: skip
    assert code == 0
    (row,) = json.loads(out.read_text())["graphs"]
    assert 1 <= row["search_depth"] <= 3 and len(row["sequence"]) <= row["search_depth"]
    assert f"median {row['search_depth']}," in (report / "report.md").read_text()


@pytest.mark.slow
def test_guided_search_starts_from_the_policys_rollout_and_climbs_within_budget(tmp_path):
    # On this CG loop the shipped policy's rollout lands on XLA's count; an edit of it goes below.
    graph = "control_flow-cg-n16-b1-jacobi-f32"
    rollout, guided = tmp_path / "rollout.json", tmp_path / "guided.json"
    assert main(["eval", "--graphs", graph, "--no-runtime", "--json", str(rollout)]) == 0  # general
    arguments = ["--graphs", graph, "--repeats", "3", "--json", str(guided)]
    assert main(["eval", "--policy", "search:guided", *arguments]) == 0
    (start,) = json.loads(rollout.read_text())["graphs"]
    document = json.loads(guided.read_text())
    (row,) = document["graphs"]
    assert document["policy"].startswith("search:guided (general@") and "200 calls" in document["policy"]
    assert start["calls"] < row["calls"] <= 200
    assert row["R"] < start["R"] and row["vs_default"] > 1  # below XLA's default count
    assert row["runtime_ratio"] is not None  # executed: outputs no worse than XLA's default's


def test_unknown_or_missing_policies_are_one_clear_error(capsys, one_graph_directory, tmp_path, monkeypatch):
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path / "no-policies"))
    with pytest.raises(UserInputError, match="no general policy is shipped"):
        resolve_strategy(None)
    assert resolve_strategy("search:beam") == "beam" and resolve_strategy("replay") == "replay"
    assert main(["eval", "--policy", "search:astar", "--graphs", str(one_graph_directory)]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("xlabench: error: search:astar: unknown search strategy") and "\n" not in error


def test_an_evaluation_runs_under_the_settings_it_is_given(one_graph_directory, tmp_path):
    # A program passes its settings down; the environment (the checkout's policies/) is not consulted.
    from xlabench import Settings, evaluate

    here = Settings.from_environment()
    with pytest.raises(UserInputError, match="no general policy is shipped"):
        evaluate(None, str(one_graph_directory), runtime=False, workers=1,
                 settings=here.with_options(policies_directory=tmp_path / "no-policies"))  # fmt: skip
    with pytest.raises(UserInputError, match="compiler not-added is not added"):
        evaluate("replay", str(one_graph_directory), runtime=False, workers=1,
                 settings=here.with_options(compiler="not-added"))  # fmt: skip
    evaluation = evaluate("replay", str(one_graph_directory), runtime=False, workers=1, settings=here)
    assert [row.name for row in evaluation.rows] == [GRAPH] and evaluation.rows[0].error is None


@pytest.mark.slow
def test_an_interrupted_eval_stops_soon_and_writes_nothing(tmp_path, one_graph_directory):
    out = tmp_path / "eval.json"
    arguments = ["eval", "--policy", "search:beam", "--budget", "100000", "--graphs",
                 str(one_graph_directory), "--no-runtime", "--json", str(out)]  # fmt: skip
    # Ctrl-C once the evaluation has begun (its bar is up): a beam this wide runs for many minutes on a
    # cold cache, so wherever it lands -- loading, XLA's default, the search -- the run is under way.
    environment = {"XLABENCH_CACHE_DIR": str(tmp_path / "cache")}
    code, last_line = interrupt_after(
        arguments, 120, environment, ready=r"eval search:beam \(100000 calls\): +0%"
    )
    assert (code, last_line) == (130, "xlabench: interrupted")
    assert not out.exists()


@pytest.mark.slow
def test_a_checkpoint_keeps_finished_graphs_and_a_rerun_takes_them_from_it(
    tmp_path, one_graph_directory, capsys
):
    checkpoint, out = tmp_path / "greedy.checkpoint.json", tmp_path / "eval.json"
    arguments = ["eval", "--policy", "search:greedy", "--graphs", str(one_graph_directory), "--budget", "120",
                 "--actions", "simplification", "--no-runtime", "--checkpoint", str(checkpoint)]  # fmt: skip
    assert main(arguments) == 0
    stored = json.loads(checkpoint.read_text())
    (row,) = stored["rows"]
    assert row["name"] == GRAPH and stored["run"]["budget"] == 120 and stored["run"]["strategy"] == "greedy"
    # The rerun must not search again: mark the stored row, and the marked value is what it reports.
    row["R"], row["vs_default"] = row["R"] + 1000, 0.5
    checkpoint.write_text(json.dumps(stored))
    capsys.readouterr()
    assert main([*arguments, "--json", str(out)]) == 0
    assert "resuming: 1 of 1 graphs already finished" in capsys.readouterr().out
    (reported,) = json.loads(out.read_text())["graphs"]
    assert reported["R"] == row["R"] and reported["vs_default"] == 0.5


def test_a_checkpoint_of_another_run_or_not_a_checkpoint_is_refused_in_one_line(
    tmp_path, one_graph_directory, capsys
):
    checkpoint = tmp_path / "checkpoint.json"
    checkpoint.write_text(json.dumps({"format": "xlabench-eval-checkpoint-1", "rows": [], "run": {
        "strategy": "greedy", "jaxlib": "0.10.2", "actions": "simplification", "budget": 120,
        "max_length": 30, "runtime": False, "repeats": None}}))  # fmt: skip
    arguments = ["eval", "--policy", "search:greedy", "--graphs", str(one_graph_directory), "--actions",
                 "simplification", "--no-runtime", "--checkpoint", str(checkpoint), "--budget"]  # fmt: skip
    assert main([*arguments, "99"]) == 2
    error = capsys.readouterr().err.strip()
    assert error == (f"xlabench: error: {checkpoint}: checkpoint of another run (budget 120 here 99); "
                     "give another file or remove this one")  # fmt: skip
    checkpoint.write_text('{"graphs": [')
    assert main([*arguments, "120"]) == 2
    assert (
        capsys.readouterr().err.strip() == f"xlabench: error: {checkpoint}: not an xlabench eval checkpoint"
    )


def test_eval_judges_outputs_by_the_rule_search_and_the_plugin_use(tmp_path):
    # Greedy search at one call keeps ResNet inference as it came: the same program, no worse. Judged on
    # signed inputs without the domain check, eval called its outputs different (NaN square roots of
    # negative variances, which XLA's default pipeline turns into numbers).
    out = tmp_path / "eval.json"
    code = main(["eval", "--policy", "search:greedy", "--budget", "1", "--graphs",
                 "resnet-infer-n111-w16-i32-b4-f32", "--repeats", "1", "--json", str(out)])  # fmt: skip
    assert code == 0
    (row,) = json.loads(out.read_text())["graphs"]
    assert row["sequence"] == [] and "error" not in row and row["runtime_ratio"] > 0


def test_a_graph_whose_outputs_differ_is_counted_and_named_in_the_report():
    from xlabench.eval.evaluation_records import EvaluationRow, summarize
    from xlabench.eval.report import markdown

    stored = {"name": "g", "family": "f", "I": 10, "D": 8, "R": 8, "vs_default": 1.0, "reduction_ratio": 1.0,
           "runtime_ratio": None, "sequence": ["algsimp"], "calls": 3, "seconds": 1.0}  # fmt: skip
    problem = "output 0 (float32[4]): 1 of 4 elements differ, largest difference 1"
    differing = {**stored, "name": "h", "error": f"outputs differ from XLA's default executable: {problem}",
                 "outputs_differ": [problem]}  # fmt: skip
    # Counted, then the executable failed: neither compared nor timed, and not called a difference.
    failure = "compiler error in pass @required-passes: execution failed: ..."
    unexecuted = {**stored, "name": "k", "error": failure}
    row, differing, unexecuted = (EvaluationRow.from_json(one) for one in (stored, differing, unexecuted))
    summary = summarize([row, differing, unexecuted])
    assert (summary.failed, summary.outputs_differ, summary.not_executed) == (0, 1, 1)
    table = markdown("t", [row, differing, unexecuted], summary)
    assert "| h | 10 | 8 | 8 | 1.0000 | 1.000 | outputs differ | 3 | algsimp |" in table
    assert "| k | 10 | 8 | 8 | 1.0000 | 1.000 | not run | 3 | algsimp |" in table
    assert f"- h: outputs differ from XLA's default executable: {problem}\n" in table
    assert table.rstrip().endswith(f"- k: {failure}")


def test_graphs_below_the_bar_and_graphs_left_unoptimized_are_counted():
    from xlabench.eval.evaluation_records import EvaluationRow, summarize
    from xlabench.eval.report import markdown

    def row(name, i, d, r):
        return EvaluationRow(name, "f", input_ops=i, default_ops=d, policy_ops=r, vs_default=d / r,
                             sequence=[], calls=1, seconds=1.0)  # fmt: skip

    # Left as it came where XLA removes 10%, 4% and 3% (0.90, 0.96, 0.97 of XLA's count); one at D.
    rows = [row("a", 100, 90, 100), row("b", 100, 96, 100), row("c", 100, 97, 100), row("d", 50, 40, 40)]
    summary = summarize(rows)
    assert (summary.below, summary.left_unoptimized) == (3, 1)  # a, b, c; only a is over 5%
    assert "Graphs below 0.98: 3; left unoptimized (R = I where XLA's default removes more than 5%): 1." in (
        markdown("t", rows, summary)
    )
