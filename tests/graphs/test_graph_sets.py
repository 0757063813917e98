"""Stored graph files match their manifest and are written reproducibly and atomically."""

from __future__ import annotations

from typing import Any

from xlabench.graphs import Graph, graph_sets

MAX_STORED_BYTES = 50 * 2**20


def test_every_manifest_hash_matches_its_file(stored_graphs: list[Graph]) -> None:
    mismatched = [g.name for g in stored_graphs if graph_sets.text_sha256(g.hlo_text()) != g.sha256]
    assert mismatched == []


def test_manifest_lists_exactly_the_stored_files(stored_manifest: dict[str, Any]) -> None:
    listed = {entry["file"] for entry in stored_manifest["graphs"]}
    on_disk = {path.name for path in graph_sets.DATA_DIR.glob("*" + graph_sets.GRAPH_SUFFIX)}
    assert listed == on_disk


def test_manifest_records_the_lowering_framework_version(stored_manifest: dict[str, Any]) -> None:
    by_jax = [entry for entry in stored_manifest["graphs"] if "framework" not in entry]
    versions = {entry["jax_version"] for entry in by_jax}
    assert len(versions) == 1 and versions.pop().count(".") == 2
    others = [entry for entry in stored_manifest["graphs"] if "framework" in entry]
    assert {entry["framework"] for entry in others} == {"tensorflow"}
    assert {entry["tensorflow_version"] for entry in others} == {"2.21.0"}


def test_stored_suite_is_under_50_mib() -> None:
    total = sum(path.stat().st_size for path in graph_sets.DATA_DIR.iterdir() if path.is_file())
    assert total < MAX_STORED_BYTES
