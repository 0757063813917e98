"""The pass-ordering environment: gymnasium's protocol, fair rewards, failures that never raise."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import xlabench.env  # noqa: F401  (registers the environment)
from tests.env.conftest import SMALL_GRAPH
from xlabench.env import ENV_ID, PassOrderingEnv
from xlabench.errors import UserInputError


def test_gymnasium_checker_accepts_the_registered_environment():
    env = gymnasium.make(ENV_ID, graphs=SMALL_GRAPH, action_set="simplification", max_steps=4)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.action_space.n == 18 + 1  # the last action stops


def test_same_seed_and_actions_give_the_same_episode(small_env):
    def episode() -> list:
        observation, _ = small_env.reset(seed=7)
        trace = [observation]
        for action in [3, 0, 1, 5]:
            observation, reward, *_ = small_env.step(action)
            trace.append((observation, reward))
        return trace

    first, second = episode(), episode()
    for a, b in zip(first[1:], second[1:], strict=True):
        assert a[1] == b[1]
        assert all(np.array_equal(a[0][key], b[0][key]) for key in a[0])


def test_a_pass_that_crashes_xla_is_a_penalty_not_an_exception():
    from xlabench.graphs import resolve_graphs

    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    # scatter_simplifier before batched_gather_scatter_normalizer aborts XLA on this graph: masked,
    # but an agent that ignores the mask must not bring the environment down.
    env = PassOrderingEnv(graphs=graph.name, actions=["scatter_simplifier", "algsimp"], max_steps=3)
    env.reset(seed=0)
    assert not env.action_masks()[0]
    before = env.fair_op_count
    _, reward, terminated, truncated, info = env.step(0)
    assert reward == -env.error_penalty and not terminated and not truncated
    assert info["error"]["kind"] == "crash" and info["error"]["reproducer"]
    assert env.fair_op_count == before and env.sequence == []
    assert not env.action_masks()[0]
    _, reward, *_ = env.step(1)  # the episode goes on
    assert env.sequence == ["algsimp"]


def test_a_fixed_point_variant_is_one_step_and_reports_its_runs_as_calls():
    graph = "mlp_mixer-infer-l2-d64-p4-i16-b2-bf16"
    prefix = ["dot_decomposer", "float-normalization-bf16", "algsimp:fixed-point"]
    env = PassOrderingEnv(graphs=graph, actions=[*prefix, "reshape-mover:fixed-point"], max_steps=8)
    env.reset(seed=0)
    for action in range(len(prefix)):
        *_, info = env.step(action)
    before = env.module
    *_, info = env.step(len(prefix))
    fixed, runs = env.driver.apply_to_fixed_point(before, "reshape-mover")
    assert info["calls"] == runs >= 3 and env.module.fingerprint == fixed.fingerprint
    assert env.sequence[-1] == "reshape-mover:fixed-point"
    # Its repeat changes nothing: masked, like any pass that left this module as it was.
    env.step(len(prefix))
    assert not env.action_masks()[len(prefix)]
    *_, info = env.step(env.stop_action)
    assert info["calls"] == 0


def test_bad_arguments_are_one_clear_error(small_env):
    with pytest.raises(UserInputError, match="not one of"):
        small_env.reset(options={"graph": "no-such-graph"})
    with pytest.raises(UserInputError, match="outside"):
        small_env.reset(seed=0)
        small_env.step(99)
    with pytest.raises(UserInputError, match="max_steps"):
        PassOrderingEnv(graphs=SMALL_GRAPH, max_steps=0)
    with pytest.raises(UserInputError, match="unknown reward baseline"):
        PassOrderingEnv(graphs=SMALL_GRAPH, reward_baseline="xla")
