"""Agents train on one small graph, for a few hundred steps: what is tested is the machinery."""

import pytest

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


@pytest.fixture(scope="session")
def small_graph() -> str:
    """A GRU layer's inference step: ~100 ops, a while loop, quick to compile."""
    return SMALL_GRAPH
