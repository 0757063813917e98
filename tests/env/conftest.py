"""Fixtures of the environment tests: one small graph."""

from __future__ import annotations

import pytest

from xlabench.env import PassOrderingEnv

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"
# The environment as the paper's algorithms train in it, not the shipped policy's (the defaults): a
# count and a reward every step, the return against the raw module, XLA's order not observed.
PER_STEP = {
    "count_every_step": True,
    "reward_baseline": "unoptimized",
    "observe_xla_order": False,
    "xla_order_skip": 0,
}


@pytest.fixture
def small_env() -> PassOrderingEnv:
    """The environment on one small graph with the 18 simplification passes, 6 steps per episode,
    a reward every step."""
    return PassOrderingEnv(graphs=SMALL_GRAPH, action_set="simplification", max_steps=6, **PER_STEP)
