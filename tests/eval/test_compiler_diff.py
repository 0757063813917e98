"""`xlabench compilers diff`: a real release-to-release change, per graph, with the pass that made it."""

from __future__ import annotations

import json

import pytest

from conftest import SECOND_RELEASE
from xlabench.cli import main
from xlabench.eval.compiler_diff import GraphDiff
from xlabench.xla.compilers.named_compilers import COMPILERS_DIRECTORY_VARIABLE
from xlabench.xla.shared.releases import REFERENCE_JAXLIB

GRAPH = "bert-infer-l1-d64-h2-s32-b2-f32"


@pytest.mark.slow
def test_the_previous_release_diffed_on_one_graph_names_pass_counts_and_outputs(
    second_compiler, tmp_path, monkeypatch, capsys
):
    from pathlib import Path

    monkeypatch.setenv(COMPILERS_DIRECTORY_VARIABLE, str(Path(second_compiler.python).parents[2]))
    out, report = tmp_path / "diff.json", tmp_path / "report"
    code = main(
        ["compilers", "diff", SECOND_RELEASE, REFERENCE_JAXLIB, "--graphs", GRAPH, "--json", str(out),
         "--report", str(report), "--repeats", "3"]
    )  # fmt: skip
    document = json.loads(out.read_text())
    assert code == 0 and document["regressions"] == []  # 232 -> 216 ops: an improvement, listed
    assert (document["base"], document["head"]) == (SECOND_RELEASE, REFERENCE_JAXLIB)
    assert "gemv-rewriter" in document["catalogue"]["added"] and document["catalogue"]["removed"] == []
    (graph,) = document["graphs"]
    assert graph["name"] == GRAPH and graph["D"] == [232, 216] and graph["R"] == [232, 216]
    assert graph["changed_by"]["default"]["pass_name"] == "tree_reduction_rewriter"
    assert graph["outputs_differ"] is False and None not in graph["runtime_ratio"]
    assert document["improvements"] == [GRAPH]
    assert (report / "changes.png").stat().st_size > 0 and "tree_reduction_rewriter" in (
        report / "report.md"
    ).read_text()
    # Reversed, the same change is a regression: exit 1, and the pass is named.
    assert (
        main(["compilers", "diff", REFERENCE_JAXLIB, SECOND_RELEASE, "--graphs", GRAPH, "--no-runtime"]) == 1
    )
    printed = capsys.readouterr().out
    assert (
        f"REGRESSION {GRAPH}: D 216 -> 232, R 216 -> 232" in printed and "tree_reduction_rewriter" in printed
    )


def test_a_diff_of_one_compiler_with_itself_is_one_line(capsys):
    assert main(["compilers", "diff", REFERENCE_JAXLIB, REFERENCE_JAXLIB, "--graphs", GRAPH]) == 2
    assert capsys.readouterr().err.strip() == (
        f"xlabench: error: base and head are both jaxlib {REFERENCE_JAXLIB}: nothing to diff"
    )


def _graph_diff(D: list[int], R: list[int]) -> GraphDiff:
    return GraphDiff(
        name="g", family="f", D=D, R=R, sequences=[["cse"], ["cse"]], runtime_ratio=[None, None],
        errors=[None, None],
        changed_by={"default": {"summary": "gemv-rewriter (default pipeline)"},
                    "policy": {"summary": "tree_reduction_rewriter (sequence)"}},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("D", "R", "named"),
    [
        ([299, 313], [299, 299], "gemv-rewriter (default pipeline)"),  # only D rose: XLA's pipeline
        ([299, 299], [299, 313], "tree_reduction_rewriter (sequence)"),  # only R rose: the sequence
        ([99, 100], [98, 100], "gemv-rewriter (default pipeline); tree_reduction_rewriter (sequence)"),
    ],
)
def test_a_regression_names_the_pass_behind_each_count_that_rose(D, R, named):
    assert _graph_diff(D, R).regression_culprit(0.0) == named
