"""resolve_graphs: suite selectors, user files and directories (including XLA dumps), and bad specs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xlabench.errors import UserInputError
from xlabench.graphs import Graph, graph_sets, resolve_graphs
from xlabench.graphs.build import build
from xlabench.graphs.suite_definition import SPLITS, suite


def test_selectors_partition_the_suite(stored_graphs: list[Graph]) -> None:
    by_split = {split: resolve_graphs(split) for split in SPLITS}
    assert sum(len(graphs) for graphs in by_split.values()) == len(stored_graphs)
    for split, graphs in by_split.items():
        assert graphs and {g.split for g in graphs} == {split}
    gpt2 = resolve_graphs("gpt2")
    assert gpt2 and {g.family for g in gpt2} == {"gpt2"}
    # SPLIT:FAMILY: a family's graphs in one split (what a per-family policy trains on).
    assert resolve_graphs("train:gpt2") == [g for g in by_split["train"] if g.family == "gpt2"]
    with pytest.raises(UserInputError, match="no gnn graphs in the train split"):
        resolve_graphs("train:gnn")
    # Several SPECs joined by commas: their union, each graph once (the README's main job uses one).
    union = resolve_graphs("test:gpt2,unseen:vit,gpt2")
    expected = [
        *resolve_graphs("test:gpt2"),
        *resolve_graphs("unseen:vit"),
        *(g for g in gpt2 if g.split != "test"),
    ]
    assert [g.name for g in union] == [g.name for g in expected]
    with pytest.raises(UserInputError, match="unknown graph, family or split 'vitt'"):
        resolve_graphs("test:gpt2,vitt")


def test_graph_name_resolves_to_that_graph(stored_graphs: list[Graph]) -> None:
    graph = stored_graphs[len(stored_graphs) // 2]
    assert resolve_graphs(graph.name) == [graph]
    assert graph.hlo_text().startswith("HloModule ")


def test_user_directory_takes_hlo_and_dump_files_only(small_graphs: list[Graph], tmp_path: Path) -> None:
    first, second = small_graphs
    (tmp_path / "mine.hlo").write_text(first.hlo_text())
    (tmp_path / "module_0007.jit_step.before_optimizations.txt").write_text(second.hlo_text())
    (tmp_path / "module_0007.jit_step.cpu_after_optimizations.txt").write_text("not taken")
    (tmp_path / "notes.txt").write_text("not HLO")
    (tmp_path / "module_0007.jit_step").mkdir()

    graphs = resolve_graphs(str(tmp_path))

    assert [g.name for g in graphs] == ["mine", "module_0007.jit_step"]
    assert {g.family for g in graphs} == {"user"} and {g.split for g in graphs} == {"user"}
    # Same text as the suite graphs, so the same XLA op count and hash.
    assert [(g.instruction_count, g.sha256) for g in graphs] == [
        (first.instruction_count, first.sha256),
        (second.instruction_count, second.sha256),
    ]


def test_single_user_file_and_gzipped_file(small_graphs: list[Graph], tmp_path: Path) -> None:
    graph = small_graphs[0]
    gzipped = tmp_path / "copy.hlo.gz"
    shutil.copyfile(graph.path, gzipped)
    [loaded] = resolve_graphs(str(gzipped))
    assert (loaded.name, loaded.sha256, loaded.hlo_text()) == ("copy", graph.sha256, graph.hlo_text())


def test_real_xla_dump_directory(tmp_path: Path) -> None:
    dump = tmp_path / "dump"
    program = textwrap.dedent(
        """
        import jax, jax.numpy as jnp
        jax.jit(lambda x, w: jnp.tanh(x @ w).sum())(jnp.ones((4, 8)), jnp.ones((8, 2)))
        """
    )
    env = dict(os.environ, XLA_FLAGS=f"--xla_dump_to={dump}", JAX_PLATFORMS="cpu")
    subprocess.run([sys.executable, "-c", program], check=True, env=env, cwd=tmp_path, timeout=120)

    graphs = resolve_graphs(str(dump))

    names = [g.name for g in graphs]
    assert any(name.endswith(".jit__lambda") for name in names), names
    assert len(names) == len(list(dump.glob("*.before_optimizations.txt")))
    assert max(g.instruction_count for g in graphs) >= 3


def test_built_directory_is_read_through_its_manifest(small_graphs: list[Graph], tmp_path: Path) -> None:
    specs = [spec for spec in suite() if spec.name == small_graphs[0].name]
    build(specs, tmp_path, jobs=1)
    [graph] = resolve_graphs(str(tmp_path))
    assert (graph.name, graph.family, graph.sha256) == (
        small_graphs[0].name,
        small_graphs[0].family,
        small_graphs[0].sha256,
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("gpt3-l1", "unknown graph, family or split 'gpt3-l1'"),
        ("no/such/dir", "no such file or directory: no/such/dir"),
        ("missing.hlo", "no such file or directory: missing.hlo"),
        ("test:gpt2,", "empty graph SPEC"),
        ("", "empty graph SPEC"),
    ],
)
def test_bad_specs_name_what_is_wrong(
    spec: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserInputError, match=message.replace("(", r"\(")):
        resolve_graphs(spec)


def test_near_miss_name_gets_a_suggestion(stored_graphs: list[Graph]) -> None:
    name = stored_graphs[0].name
    with pytest.raises(UserInputError, match=f"did you mean '{name}'"):
        resolve_graphs(name + "x")


def test_empty_directory_is_rejected(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("no graphs here")
    with pytest.raises(UserInputError, match=f"no graphs in directory {tmp_path}"):
        resolve_graphs(str(tmp_path))


def test_malformed_user_file_names_the_file(tmp_path: Path) -> None:
    bad = tmp_path / "broken.hlo"
    bad.write_text("HloModule broken\n\nENTRY e {\n  ROOT x = f32[] nonsense(\n}\n")
    with pytest.raises(UserInputError, match="broken.hlo"):
        resolve_graphs(str(bad))


def test_missing_manifest_says_how_to_build(tmp_path: Path) -> None:
    with pytest.raises(UserInputError, match="run `xlabench graphs build`"):
        graph_sets.read_manifest(tmp_path)


def test_a_spec_too_long_for_a_file_name_is_read_as_graph_names() -> None:
    names = [spec.name for spec in suite()][:40]
    assert len(",".join(names)) > 255  # past the file-name limit of Linux file systems
    assert sorted(g.name for g in resolve_graphs(",".join(names))) == sorted(names)
