"""`xlabench graphs build|list` through the real command-line entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.cli import main
from xlabench.graphs import Graph, graph_sets
from xlabench.graphs.suite_summary import HISTOGRAM_BOUNDS, histogram


def test_list_prints_a_table_row_per_graph(
    stored_graphs: list[Graph], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["graphs", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["name", "family", "split", "instructions"]
    assert len(lines) == len(stored_graphs) + 1
    first = stored_graphs[0]
    assert lines[1].split() == [first.name, first.family, first.split, str(first.instruction_count)]


def test_list_json_is_one_value(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graphs", "list", "test", "--json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert records and {record["split"] for record in records} == {"test"}
    assert {"name", "family", "instruction_count", "sha256", "config", "path"} <= set(records[0])


def test_summary_counts_families_and_sizes(
    stored_graphs: list[Graph], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["graphs", "list", "--summary"]) == 0
    out = capsys.readouterr().out
    for family in {g.family for g in stored_graphs}:
        assert f"\n{family} " in out
    assert "instructions per graph" in out

    assert main(["graphs", "list", "--summary", "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["graphs"] == len(stored_graphs)
    assert sum(bin_["count"] for bin_ in info["histogram"]) == len(stored_graphs)
    assert sum(sum(counts.values()) for counts in info["families"].values()) == len(stored_graphs)


def test_histogram_bins_are_half_open(small_graphs: list[Graph]) -> None:
    template = small_graphs[0]
    sizes = [0, HISTOGRAM_BOUNDS[0] - 1, HISTOGRAM_BOUNDS[0], 10**6]
    graphs = [Graph(f"g{size}", "f", "train", {}, template.path, size, "") for size in sizes]
    counts = [bin_["count"] for bin_ in histogram(graphs)]
    assert counts[0] == 2 and counts[1] == 1 and counts[-1] == 1 and sum(counts) == 4


def test_list_accepts_a_user_directory(
    small_graphs: list[Graph], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "mine.hlo").write_text(small_graphs[0].hlo_text())
    assert main(["graphs", "list", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines()[1].split() == [
        "mine",
        "user",
        "user",
        str(small_graphs[0].instruction_count),
    ]


def test_build_into_a_directory(
    small_graphs: list[Graph], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = small_graphs[0].name
    assert main(["graphs", "build", "--out", str(tmp_path), "--jobs", "1", name]) == 0
    assert f"built 1 graphs into {tmp_path}" in capsys.readouterr().out
    assert [entry["name"] for entry in graph_sets.read_manifest(tmp_path)["graphs"]] == [name]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["graphs", "list", "nosuchgraph"], "unknown graph, family or split 'nosuchgraph'"),
        (
            ["graphs", "build", "--out", "{tmp}", "nosuchgraph"],
            "unknown graph, family or split 'nosuchgraph'",
        ),
        (["graphs", "build", "--out", "{tmp}", "--jobs", "0", "gpt2"], "argument --jobs: must be at least 1"),
    ],
)
def test_user_mistakes_exit_2_with_one_line(
    argv: list[str], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([arg.replace("{tmp}", str(tmp_path)) for arg in argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err
    assert not (tmp_path / graph_sets.MANIFEST_NAME).exists()
