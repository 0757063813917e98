"""Lowering is normalised and reproducible; builds merge into an existing graph directory."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jax
import pytest

from xlabench.graphs import Graph, build, graph_sets, resolve_graphs
from xlabench.graphs.suite_definition import GraphSpec, suite

LOWERED = (
    "HloModule jit_step, entry_computation_layout={(f32[2]{0})->f32[2]{0}}\n\n"
    "ENTRY main.3 {\n"
    '  Arg_0.1 = f32[2]{0} parameter(0), metadata={op_name="x"}\n'
    '  ROOT sine.2 = f32[2]{0} sine(Arg_0.1), metadata={op_name="jit(step)/sin{weird}\\"}"'
    ' source_file="/home/u/a.py" source_line=3}\n'
    "}\n"
)


def _specs_named(names: list[str]) -> list[GraphSpec]:
    wanted = set(names)
    return [spec for spec in suite() if spec.name in wanted]


def test_strip_metadata_handles_braces_and_quotes_in_strings() -> None:
    stripped = build.strip_metadata(LOWERED)
    assert "metadata" not in stripped
    assert "/home/u" not in stripped
    assert "ROOT sine.2 = f32[2]{0} sine(Arg_0.1)\n}" in stripped


def test_normalize_names_the_module_after_the_graph() -> None:
    text = build.normalize_hlo(LOWERED, "toy-graph-f32")
    assert text.startswith("HloModule toy_graph_f32, entry_computation_layout=")
    assert text.endswith("}\n") and not text.endswith("\n\n")


def test_lowered_text_has_no_paths_of_this_checkout(small_graphs: list[Graph]) -> None:
    checkout = str(Path(__file__).resolve().parents[2])
    for spec in _specs_named([g.name for g in small_graphs]):
        text = build.lower(spec)
        assert checkout not in text
        assert "metadata=" not in text


def test_rebuild_reproduces_stored_bytes(
    small_graphs: list[Graph],
    stored_manifest: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recorded = {entry["name"]: entry for entry in stored_manifest["graphs"]}
    if recorded[small_graphs[0].name]["jax_version"] != jax.__version__:
        pytest.skip("stored graphs come from another jax version; regeneration is explicit")
    # A different working directory must not change a byte.
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "rebuilt"
    build.build(_specs_named([g.name for g in small_graphs]), out, jobs=1)
    for graph in small_graphs:
        assert (out / graph.path.name).read_bytes() == graph.path.read_bytes(), graph.name
    rebuilt = {entry["name"]: entry for entry in graph_sets.read_manifest(out)["graphs"]}
    assert rebuilt == {g.name: recorded[g.name] for g in small_graphs}


def test_partial_build_merges_and_drops_stale_entries(small_graphs: list[Graph], tmp_path: Path) -> None:
    first, second = _specs_named([g.name for g in small_graphs])
    build.build([first], tmp_path, jobs=1)
    stale = tmp_path / ("no-longer-in-suite" + graph_sets.GRAPH_SUFFIX)
    stale.write_bytes(b"")
    manifest = json.loads((tmp_path / graph_sets.MANIFEST_NAME).read_text())
    manifest["graphs"].append(dict(manifest["graphs"][0], name="no-longer-in-suite", file=stale.name))
    (tmp_path / graph_sets.MANIFEST_NAME).write_text(json.dumps(manifest))

    report = build.build([second], tmp_path, jobs=1)

    assert report.built == [second.name]
    assert sorted(g.name for g in resolve_graphs(str(tmp_path))) == sorted([first.name, second.name])
    assert not stale.exists()
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]


def test_parallel_build_matches_serial_build(small_graphs: list[Graph], tmp_path: Path) -> None:
    specs = _specs_named([g.name for g in small_graphs])
    build.build(specs, tmp_path / "serial", jobs=1)
    build.build(specs, tmp_path / "parallel", jobs=2)
    for spec in specs:
        name = spec.name + graph_sets.GRAPH_SUFFIX
        assert (tmp_path / "serial" / name).read_bytes() == (tmp_path / "parallel" / name).read_bytes()
    assert (tmp_path / "serial" / "manifest.json").read_bytes() == (
        tmp_path / "parallel" / "manifest.json"
    ).read_bytes()


def test_a_tensorflow_graph_without_tensorflow_is_one_clear_error(monkeypatch, capsys, tmp_path) -> None:
    # The family TensorFlow's bridge lowers needs a Python with TensorFlow; xlabench's own has none.
    from xlabench.cli import main
    from xlabench.graphs.build import TENSORFLOW_PYTHON_VARIABLE

    monkeypatch.delenv(TENSORFLOW_PYTHON_VARIABLE, raising=False)
    graph = "tensorflow-mlp-infer-l1-d64-b8-f32"
    assert main(["graphs", "build", graph, "--out", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == (
        f"xlabench: error: {graph}: the tensorflow family is lowered by TensorFlow: set "
        f"{TENSORFLOW_PYTHON_VARIABLE} to a Python that has it "
        "(e.g. a venv with `pip install tensorflow-cpu==2.21.0`)"
    )
    assert list(tmp_path.iterdir()) == []
