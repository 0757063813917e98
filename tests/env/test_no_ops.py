"""What the environment knows changes nothing: masked actions, and steps that cost no compiler call."""

from __future__ import annotations

import numpy as np

import xlabench.env  # noqa: F401  (registers the environment)
from xlabench.env import PassOrderingEnv


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
    from xlabench.xla.compilers.pass_catalogue import inapplicable

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
