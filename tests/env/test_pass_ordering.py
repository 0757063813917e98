"""The pass-ordering environment: gymnasium's protocol, fair rewards, failures that never raise."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import xlabench.env  # noqa: F401  (registers the environment)
from xlabench.env import ENV_ID, PassOrderingEnv
from xlabench.errors import UserInputError

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


@pytest.fixture
def small_env() -> PassOrderingEnv:
    """The environment on one small graph with the 18 simplification passes, 6 steps per episode."""
    return PassOrderingEnv(graphs=SMALL_GRAPH, action_set="simplification", max_steps=6)


def test_gymnasium_checker_accepts_the_registered_environment():
    env = gymnasium.make(ENV_ID, graphs=SMALL_GRAPH, action_set="simplification", max_steps=4)
    check_env(env.unwrapped, skip_render_check=True)
    assert env.action_space.n == 18 + 1  # the last action stops


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
    from xlabench.xla.cache import TransitionCache

    passes = ["call-inliner", "algsimp", "cse"]
    counts, calls = {}, {}
    for rewards in (True, False):
        driver = PassDriver(cache=TransitionCache(str(tmp_path / f"{rewards}.sqlite")))
        env = PassOrderingEnv(
            graphs=SMALL_GRAPH,
            action_set="simplification",
            count_every_step=False,
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


def test_episode_cap_truncates_and_useless_actions_are_masked(small_env):
    small_env.reset(seed=0)
    dce = small_env.actions.index("dce")
    small_env.step(dce)
    _, reward, _, _, _ = small_env.step(dce)  # dce twice: the second changes nothing
    assert reward == 0.0
    assert not small_env.action_masks()[dce] and small_env.action_masks()[small_env.stop_action]
    truncated = False
    for _ in range(small_env.max_steps - 2):
        *_, truncated, _ = small_env.step(small_env.actions.index("algsimp"))
    assert truncated


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


def test_a_pass_is_masked_until_the_pass_it_requires_has_run():
    from xlabench.graphs import resolve_graphs

    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    actions = ["batched_gather_scatter_normalizer", "scatter_simplifier"]
    env = PassOrderingEnv(graphs=graph.name, actions=actions, max_steps=3)
    env.reset(seed=0)
    assert env.action_masks().tolist() == [True, False, True]
    env.step(0)
    assert env.action_masks()[1]
    *_, info = env.step(1)
    assert info["error"] is None and env.sequence == actions


def test_passes_with_nothing_to_rewrite_are_masked_and_would_have_changed_nothing():
    from xlabench.graphs import resolve_graphs
    from xlabench.xla.catalogue import inapplicable

    # The smallest GRU graph has no scatter, transpose or sort; the smallest GPT-2 graph has transposes.
    graph = min(resolve_graphs("recurrent"), key=lambda g: g.instruction_count)
    env = PassOrderingEnv(graphs=graph.name, max_steps=3, mask_inapplicable=True)
    env.reset(seed=0)
    mask, histogram = env.action_masks(), env.driver.features(env.module).histogram
    for name in ("scatter_simplifier", "transpose-folding", "topk-rewriter"):
        assert not mask[env.actions.index(name)], name
    assert mask[env.actions.index("dot_decomposer")]  # its dots are there
    # Every pass masked for that reason, applied anyway by XLA, leaves the module as it was.
    masked = [name for name in env.actions if inapplicable(name, histogram)]
    assert len(masked) >= 10
    for name in masked:
        assert env.driver.apply_pass(env.module, name).fingerprint == env.module.fingerprint, name
    gpt2 = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    env = PassOrderingEnv(graphs=gpt2.name, max_steps=3, mask_inapplicable=True)
    env.reset(seed=0)
    assert env.action_masks()[env.actions.index("transpose-folding")]
    # Off (the policies made before it): only what this module's own runs showed is masked.
    env = PassOrderingEnv(graphs=graph.name, max_steps=3)
    env.reset(seed=0)
    assert env.action_masks()[env.actions.index("transpose-folding")]


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


def test_known_no_ops_cost_no_call_and_change_nothing_a_policy_sees():
    graph = "mlp_mixer-infer-l2-d64-p4-i16-b2-bf16"
    # scatter_simplifier has no scatter to rewrite; the second algsimp:fixed-point starts where the
    # first one's loop ended. Both are known no-ops; the other steps are XLA's runs.
    actions = ["scatter_simplifier", "dot_decomposer", "float-normalization-bf16", "algsimp:fixed-point"]
    played = [0, 1, 2, 3, 3, 0]
    episodes = {}
    for skip in (True, False):
        env = PassOrderingEnv(graphs=graph, actions=actions, max_steps=8, skip_known_no_ops=skip)
        observation, _ = env.reset(seed=0)
        seen, calls = [], []
        for action in played:
            seen.append((observation, env.action_masks()))
            observation, _, _, _, info = env.step(action)
            calls.append(info["calls"])
        seen.append((observation, env.action_masks()))
        episodes[skip] = (seen, calls, env.module.fingerprint, env.sequence)
    (seen_on, calls_on, module_on, sequence_on), (seen_off, calls_off, module_off, sequence_off) = (
        episodes[True],
        episodes[False],
    )
    assert module_on == module_off and sequence_on == sequence_off
    for (observation_on, mask_on), (observation_off, mask_off) in zip(seen_on, seen_off, strict=True):
        assert all(np.array_equal(observation_on[key], observation_off[key]) for key in observation_off)
        assert np.array_equal(mask_on, mask_off)
    assert [calls_on[i] for i in (0, 4, 5)] == [0, 0, 0] and calls_off[0] == calls_off[4] == calls_off[5] == 1
    assert calls_on[1:4] == calls_off[1:4] and calls_on[3] >= 2


def test_with_masks_a_fixed_point_is_masked_where_its_run_ended():
    graph = "mlp_mixer-infer-l2-d64-p4-i16-b2-bf16"
    actions = ["dot_decomposer", "float-normalization-bf16", "algsimp:fixed-point", "cse"]
    env = PassOrderingEnv(graphs=graph, actions=actions, max_steps=8, mask_inapplicable=True)
    env.reset(seed=0)
    env.step(0)
    env.step(1)
    before = env.module
    *_, info = env.step(2)
    assert env.module.fingerprint != before.fingerprint and info["calls"] >= 2
    # Its last run found nothing to do: masked without being tried again, and XLA agrees.
    assert not env.action_masks()[2]
    assert env.driver.apply_pass(env.module, "algsimp").fingerprint == env.module.fingerprint


def test_bad_arguments_are_one_clear_error(small_env):
    with pytest.raises(UserInputError, match="not one of"):
        small_env.reset(options={"graph": "no-such-graph"})
    with pytest.raises(UserInputError, match="outside"):
        small_env.reset(seed=0)
        small_env.step(99)
    with pytest.raises(UserInputError, match="max_steps"):
        PassOrderingEnv(graphs=SMALL_GRAPH, max_steps=0)
