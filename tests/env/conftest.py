"""Fixtures of the environment tests: one small graph."""

from __future__ import annotations

import pytest

from xlabench.env import PassOrderingEnv

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


@pytest.fixture
def small_env() -> PassOrderingEnv:
    """The environment on one small graph with the 18 simplification passes, 6 steps per episode."""
    return PassOrderingEnv(graphs=SMALL_GRAPH, action_set="simplification", max_steps=6)
