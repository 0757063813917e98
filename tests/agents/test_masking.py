"""A2C, TRPO and DQN act through a masked distribution: a masked action is never taken."""

from __future__ import annotations

import numpy as np
import pytest
from stable_baselines3.common.vec_env import DummyVecEnv

from xlabench.agents.masking import MaskInObservation
from xlabench.agents.train import build_model
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs

DRAWS = 200


@pytest.fixture(scope="module")
def masked_env():
    """A GPT-2 graph with two actions: scatter_simplifier is masked before its requirement runs."""
    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    actions = ["batched_gather_scatter_normalizer", "scatter_simplifier"]
    env = DummyVecEnv([lambda: MaskInObservation(PassOrderingEnv(graphs=graph.name, actions=actions))])
    env.seed(0)
    observation = env.reset()
    assert observation["action_mask"][0].tolist() == [1.0, 0.0, 1.0]  # normalizer, -, stop
    return env, observation


@pytest.mark.parametrize("algorithm", ["a2c", "trpo", "dqn"])
def test_an_unmaskable_algorithm_never_draws_a_masked_action(masked_env, algorithm):
    env, observation = masked_env
    model = build_model(algorithm, env, 0, None)
    if algorithm == "dqn":
        model.exploration_rate = 1.0  # every draw is the random exploration's
    # An untrained network puts about a third of its probability on each of the three actions: without
    # the mask, 200 draws would take scatter_simplifier about 67 times.
    draws = [int(model.predict(observation, deterministic=False)[0][0]) for _ in range(DRAWS)]
    assert 1 not in draws and {0, 2} <= set(draws)
    assert int(model.predict(observation, deterministic=True)[0][0]) != 1


def test_dqn_warm_up_draws_among_allowed_actions(masked_env):
    env, observation = masked_env
    model = build_model("dqn", env, 0, None)
    model._last_obs = observation
    draws = [int(model._sample_action(learning_starts=10**6)[0][0]) for _ in range(DRAWS)]
    assert 1 not in draws and set(draws) == {0, 2}


def test_the_mask_is_not_an_input_of_the_network(masked_env):
    # Same weights, with or without the mask in the observation: a stored policy rolls out without it.
    env, observation = masked_env
    model = build_model("trpo", env, 0, None)
    plain = {key: value for key, value in observation.items() if key != "action_mask"}
    tensors = [model.policy.obs_to_tensor(o)[0] for o in (observation, plain)]
    logits = [model.policy.get_distribution(t).distribution.logits.detach().numpy() for t in tensors]
    allowed = np.array([True, False, True])
    np.testing.assert_allclose(
        logits[0][0][allowed] - logits[0][0][0], logits[1][0][allowed] - logits[1][0][0], atol=1e-6
    )
