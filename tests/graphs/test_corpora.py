"""The corpora beside the suite: real modules written by others (`foreign`), stored byte for byte with
their sources, and small cases of what such modules carry (`synthetic`)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from xlabench.errors import UserInputError
from xlabench.graphs import graph_sets, resolve_graphs
from xlabench.graphs.build import SOURCES_NAME, corpus_sources, index_corpus


@pytest.mark.parametrize("corpus", sorted(graph_sets.CORPORA))
def test_the_manifest_is_the_files_as_stored_with_their_sources(corpus):
    directory = graph_sets.CORPORA[corpus]
    graphs = resolve_graphs(corpus)
    sources = corpus_sources(directory)
    # Every stored module is in the manifest, unchanged since (sha256 of its bytes), with its source.
    assert sorted(g.path.name for g in graphs) == sorted(p.name for p in directory.glob("*.hlo"))
    for graph in graphs:
        assert graph_sets.text_sha256(graph.path.read_bytes().decode()) == graph.sha256, graph.name
        assert graph.config == sources[graph.name] and graph.family == sources[graph.name]["producer"]
        assert graph.split == corpus and graph.instruction_count >= 1


def test_the_foreign_corpus_holds_modules_of_several_producers():
    graphs = resolve_graphs("foreign")
    producers = {g.family for g in graphs}
    assert len(graphs) >= 15 and len(producers) >= 3, producers
    for graph in graphs:  # where each came from, to the commit
        assert graph.config["repository"].count("/") == 1 and graph.config["path"], graph.name
        assert len(graph.config["commit"]) == 40, graph.name


def test_corpus_specs_select_by_producer_and_by_name():
    torch_xla = resolve_graphs("foreign:torch-xla")
    assert torch_xla and {g.family for g in torch_xla} == {"torch-xla"}
    assert resolve_graphs(torch_xla[0].name) == [torch_xla[0]]
    assert {g.name for g in resolve_graphs("foreign,synthetic")} == {
        g.name for g in resolve_graphs("foreign") + resolve_graphs("synthetic")
    }
    with pytest.raises(UserInputError, match="no 'pytorch' graphs in the foreign corpus .*torch-xla"):
        resolve_graphs("foreign:pytorch")


def test_a_corpus_file_without_a_source_row_is_refused(tmp_path):
    directory = tmp_path / "mine"
    shutil.copytree(graph_sets.CORPORA["synthetic"], directory)
    (directory / "unsourced.hlo").write_bytes((directory / "opt-barrier.hlo").read_bytes())
    with pytest.raises(UserInputError, match="unsourced.hlo: no row in"):
        index_corpus(directory)
    (directory / "unsourced.hlo").unlink()
    (directory / "opt-barrier.hlo").unlink()
    with pytest.raises(UserInputError, match="lists files that are not there: opt-barrier"):
        index_corpus(directory)
    (directory / SOURCES_NAME).write_text("# no table\n")
    with pytest.raises(UserInputError, match="no table whose first column is `file`"):
        corpus_sources(directory)


def test_a_corpus_indexes_to_the_manifest_it_ships_with(tmp_path):
    directory = tmp_path / "synthetic"
    shutil.copytree(graph_sets.CORPORA["synthetic"], directory)
    (directory / graph_sets.MANIFEST_NAME).unlink()
    index_corpus(directory)
    stored = Path(graph_sets.CORPORA["synthetic"]) / graph_sets.MANIFEST_NAME
    assert (directory / graph_sets.MANIFEST_NAME).read_text() == stored.read_text()
