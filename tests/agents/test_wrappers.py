"""Shaping is potential-based: it shapes the steps and leaves an episode's return as it was."""

from __future__ import annotations

import pytest

from xlabench.agents.wrappers import CostShaping
from xlabench.env import PassOrderingEnv


def test_cost_shaping_telescopes_to_nothing_over_an_episode(small_graph):
    env = CostShaping(PassOrderingEnv(graphs=small_graph, action_set="simplification"), gamma=1.0)
    observation, _ = env.reset(seed=0)
    assert env.potential(observation) == 0.0  # the raw module's cost is the reference
    shaping = []
    for name in ["call-inliner", "algsimp", "cse", "dce"]:
        *_, info = env.step(env.unwrapped.actions.index(name))
        shaping.append(info["shaping"])
    *_, info = env.step(env.unwrapped.stop_action)
    shaping.append(info["shaping"])
    assert any(abs(value) > 1e-6 for value in shaping)  # it does shape the steps
    assert sum(shaping) == pytest.approx(0.0, abs=1e-9)  # and leaves the return as it was
