"""The reward: drops of the fair count telescope to the gain over the raw module or over XLA."""

from __future__ import annotations

import pytest

import xlabench.env  # noqa: F401  (registers the environment)
from tests.env.conftest import SMALL_GRAPH
from xlabench.env import PassOrderingEnv
from xlabench.errors import UserInputError


def test_returns_telescope_to_the_fair_improvement_and_replay_matches_xla(small_env):
    observation, info = small_env.reset(seed=0, options={"graph": SMALL_GRAPH})
    assert small_env.observation_space.contains(observation)
    assert info["op_count"] == info["R0"] and info["pass"] is None
    total = 0.0
    for name in ["call-inliner", "algsimp", "cse", "dce"]:
        observation, reward, terminated, truncated, info = small_env.step(small_env.actions.index(name))
        total += reward
        assert info["pass"] == name and info["error"] is None and not terminated and not truncated
    assert total == pytest.approx((info["R0"] - info["op_count"]) / info["R0"])
    assert info["op_count"] == small_env.driver.fair_op_count(small_env.module, small_env.sequence)
    observation, reward, terminated, truncated, info = small_env.step(small_env.stop_action)
    assert terminated and reward == 0.0 and info["pass"] == "stop"


@pytest.mark.parametrize("end", ["stop", "step cap"])
def test_counting_only_at_the_end_gives_the_same_return(end):
    passes = ["call-inliner", "algsimp", "cse", "dce"]
    returns = {}
    for every_step in (True, False):
        env = PassOrderingEnv(
            graphs=SMALL_GRAPH,
            action_set="simplification",
            max_steps=len(passes),
            count_every_step=every_step,
            reward_baseline="unoptimized",
        )
        env.reset(seed=0)
        rewards = [env.step(env.actions.index(name))[1] for name in passes[: len(passes) - (end == "stop")]]
        if end == "stop":
            rewards.append(env.step(env.stop_action)[1])
        if not every_step:
            assert rewards[:-1] == [0.0] * (len(rewards) - 1)  # no count before the episode ends
        returns[every_step] = sum(rewards)
    assert returns[False] == pytest.approx(returns[True]) and returns[True] > 0


@pytest.mark.parametrize("every_step", [True, False])
def test_with_xlas_count_as_baseline_the_return_is_the_gain_over_xla(every_step):
    env = PassOrderingEnv(graphs=SMALL_GRAPH, action_set="simplification", max_steps=8,
                          count_every_step=every_step, reward_baseline="default")  # fmt: skip
    # (D - R) / D: negative for a sequence short of XLA's count, 0 at it (positive only beyond it).
    _, info = env.reset(seed=0)
    _, reward, _, _, info = env.step(env.stop_action)
    assert reward == pytest.approx((info["D"] - info["R0"]) / info["D"]) and reward < 0
    env.reset(seed=0)
    total = sum(env.step(env.actions.index(name))[1] for name in ["call-inliner", "algsimp", "cse", "dce"])
    _, reward, _, _, info = env.step(env.stop_action)
    assert info["op_count"] == info["D"] and total + reward == pytest.approx(0.0)
    with pytest.raises(UserInputError, match="unknown reward baseline"):
        PassOrderingEnv(graphs=SMALL_GRAPH, reward_baseline="xla")


def test_an_evaluation_rollout_without_rewards_never_counts_r0(tmp_path):
    from xlabench.xla import PassDriver
    from xlabench.xla.caches.transition_cache import TransitionCache

    passes = ["call-inliner", "algsimp", "cse"]
    counts, calls = {}, {}
    for rewards in (True, False):
        driver = PassDriver(cache=TransitionCache(str(tmp_path / f"{rewards}.sqlite")))
        env = PassOrderingEnv(
            graphs=SMALL_GRAPH,
            action_set="simplification",
            count_every_step=False,
            reward_baseline="unoptimized",
            rewards=rewards,
            driver=driver,
        )
        _, info = env.reset(seed=0)
        assert (info["R0"] is None) == (not rewards)
        step_rewards = [env.step(env.actions.index(name))[1] for name in passes]
        _, reward, terminated, _, info = env.step(env.stop_action)
        assert terminated and (reward > 0) == rewards and step_rewards == [0.0] * len(passes)
        counts[rewards], calls[rewards] = info["op_count"], driver.calls["xla"]
    assert counts[False] == counts[True] and calls[False] == calls[True] - 1  # R0's compile, not made
