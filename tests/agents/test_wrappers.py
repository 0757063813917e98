"""Shaping is potential-based; algorithms without masks are refused masked actions without XLA."""

from __future__ import annotations

import pytest

from xlabench.agents.wrappers import CostShaping, MaskedActionPenalty
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs


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


def test_a_masked_action_is_refused_without_calling_xla():
    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    actions = ["batched_gather_scatter_normalizer", "scatter_simplifier"]
    env = MaskedActionPenalty(PassOrderingEnv(graphs=graph.name, actions=actions, max_steps=2))
    env.reset(seed=0)
    calls = env.unwrapped.compiler_calls()
    _, reward, terminated, truncated, info = env.step(1)  # scatter_simplifier before its requirement
    assert reward == -env.unwrapped.error_penalty and not terminated and not truncated
    assert info["error"]["kind"] == "masked" and env.unwrapped.sequence == []
    assert env.unwrapped.compiler_calls() == calls
    *_, truncated, _ = env.step(1)
    assert truncated  # refused steps count towards the cap
