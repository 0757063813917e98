"""Fixtures shared by the graph-suite tests."""

from __future__ import annotations

from typing import Any

import pytest

from xlabench.graphs import Graph, graph_sets, resolve_graphs
from xlabench.graphs.suite_definition import FRAMEWORKS, GraphSpec, suite


@pytest.fixture(scope="session")
def suite_specs() -> list[GraphSpec]:
    """The suite definition (what `graphs build` would produce)."""
    return suite()


@pytest.fixture(scope="session")
def stored_graphs() -> list[Graph]:
    """Every graph stored in the package."""
    return resolve_graphs("all")


@pytest.fixture(scope="session")
def stored_manifest() -> dict[str, Any]:
    """The package's raw manifest."""
    return graph_sets.read_manifest(graph_sets.DATA_DIR)


@pytest.fixture(scope="session")
def small_graphs(stored_graphs: list[Graph]) -> list[Graph]:
    """Two small stored graphs of different families lowered by jax, for tests that rebuild or copy graphs."""
    lowered_by_jax = [g for g in stored_graphs if g.family not in FRAMEWORKS]
    by_size = sorted(lowered_by_jax, key=lambda g: (g.instruction_count, g.name))
    first = by_size[0]
    second = next(g for g in by_size if g.family != first.family)
    return [first, second]


def smallest_graphs(spec: str = "all") -> list[Graph]:
    """The smallest graph of each family among `spec`'s graphs (cheap to compile and run)."""
    smallest: dict[str, Graph] = {}
    for graph in resolve_graphs(spec):
        kept = smallest.get(graph.family)
        if kept is None or graph.instruction_count < kept.instruction_count:
            smallest[graph.family] = graph
    return [smallest[family] for family in sorted(smallest)]
