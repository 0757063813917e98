"""Training: every algorithm of the comparison runs, seeded runs repeat, the policy never sees cost."""

from __future__ import annotations

import tempfile
from dataclasses import replace

import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from xlabench.agents.algorithm_config import hyperparameters_of
from xlabench.agents.train import ENVIRONMENT, WARM_START, Validation, build_model, make_environment, train
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.policies.networks import (
    FOLLOW_WEIGHT_INIT,
    FollowsXlaOrderPolicy,
    ValueFeaturesPolicy,
    policy_kwargs,
)
from xlabench.xla import default_driver


def test_ppo_trains_the_steps_asked_and_a_seed_repeats_it(small_graph, tmp_path, monkeypatch):
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    first = train(algorithm="ppo", graphs=small_graph, steps=128, seed=3, environments=1, progress=False)
    again = train(algorithm="ppo", graphs=small_graph, steps=128, seed=3, environments=1, progress=False)
    trained_actions = default_driver().catalogue.action_passes(ENVIRONMENT.action_set)
    assert first.steps == 128 and first.episodes >= 1 and first.actions == trained_actions
    # The training curve: one point per bin of episodes, steps increasing, within the run.
    steps = [step for step, _ in first.curve]
    assert 1 <= len(steps) <= first.episodes and steps == sorted(steps) and steps[-1] <= 128
    assert first.curve == again.curve
    weights, repeated = first.model.policy.state_dict(), again.model.policy.state_dict()
    assert all(torch.equal(weights[key], repeated[key]) for key in weights)
    # The version names the compiler it was made with, its options and build.
    made_with = first.metadata("p", default_driver())["compiler"]
    assert made_with["name"] == made_with["jaxlib"] == default_driver().jaxlib_version
    assert made_with["kind"] == "installed" and made_with["xla_flags"] == [] and made_with["build"]
    # Without a log directory, stable-baselines3's logger leaves no `SB3-<date>` folder behind.
    assert list(temp.iterdir()) == []


def test_validation_rollouts_leave_training_as_it_would_be_without_them(small_graph):
    plain = train(algorithm="ppo", graphs=small_graph, steps=128, seed=3, environments=1, progress=False)
    watched = train(
        algorithm="ppo", graphs=small_graph, steps=128, seed=3, environments=1, progress=False,
        validation=Validation(small_graph, 32),
    )  # fmt: skip
    assert [step for step, _ in watched.validation_curve] == [0, 32, 64, 96, 128]
    assert watched.curve == plain.curve
    weights, observed = plain.model.policy.state_dict(), watched.model.policy.state_dict()
    assert all(torch.equal(weights[key], observed[key]) for key in weights)


@pytest.mark.parametrize("algorithm", ["ppo-shaping", "ppo-value", "a2c", "dqn", "trpo"])
def test_every_algorithm_of_the_comparison_trains(small_graph, algorithm):
    run = train(algorithm=algorithm, graphs=small_graph, steps=64, seed=0, environments=1, progress=False)
    assert run.steps >= 64 and run.algorithm == algorithm


def test_only_the_value_function_sees_the_cost_analysis(small_graph):
    env = PassOrderingEnv(graphs=small_graph)
    policy = ValueFeaturesPolicy(
        env.observation_space, env.action_space, lambda _: 1e-3, **policy_kwargs([32], "tanh")
    )
    observation, _ = env.reset(seed=0)
    changed = {**observation, "cost": observation["cost"] * 3.0}
    tensors = [policy.obs_to_tensor(o)[0] for o in (observation, changed)]
    with torch.no_grad():
        logits = [policy.get_distribution(t).distribution.logits for t in tensors]
        values = [policy.predict_values(t) for t in tensors]
    assert torch.equal(logits[0], logits[1])
    assert not np.isclose(values[0].item(), values[1].item())


# The smoke tier clones for PPO; the other algorithms share the code and run in the full tier.
OTHERS = [pytest.param(algorithm, marks=pytest.mark.slow) for algorithm in ("ppo-value", "a2c", "trpo")]


@pytest.mark.parametrize("algorithm", ["ppo", *OTHERS])
def test_a_warm_start_alone_follows_xlas_order(small_graph, algorithm):
    run = train(
        algorithm=algorithm, graphs=small_graph, steps=0, seed=0, environments=1, progress=False,
        warm_start=WARM_START,
    )  # fmt: skip
    assert run.steps == 0 and run.warm_start["accuracy"] == 1.0
    # DAgger rounds ran; after the first fit the rollout already agrees with XLA's order everywhere.
    assert [r["agreement"] for r in run.warm_start["dagger"]] == [1.0] * WARM_START.dagger_rounds


@pytest.mark.slow
def test_a_seeded_warm_start_repeats_with_rollouts_in_two_threads():
    # DAgger rolls graphs out in two threads on one policy object: what one thread's rollout reads
    # must be its own, or the weights depend on thread timing.
    graphs = "recurrent-gru-infer-l1-h128-s16-b8-f32,recurrent-lstm-infer-l1-h128-s16-b8-f32"
    # Two short fits: a policy that still strays visits more states for the threads to share.
    warm_start = replace(WARM_START, improve_budget=0, epochs=50, dagger_rounds=2)
    runs = [
        train(
            algorithm="ppo",
            graphs=graphs,
            steps=0,
            seed=1,
            environments=2,
            progress=False,
            warm_start=warm_start,
        )
        for _ in range(2)
    ]
    weights, repeated = (run.model.policy.state_dict() for run in runs)
    assert all(torch.equal(weights[key], repeated[key]) for key in weights)
    assert runs[0].warm_start["dagger"] == runs[1].warm_start["dagger"]


@pytest.mark.slow
def test_the_kl_anchor_holds_ppo_near_its_warm_start(small_graph):
    # A large entropy bonus and learning rate pull the policy away from its clone; the anchor
    # (`clone_kl_coef`) pulls it back: after the same updates it is closer to the clone than without.
    pull = {"ent_coef": 0.5, "learning_rate": 3e-3}
    # Without XLA's order in the observation: a clone that sees `xla_next` is so sure of it that this
    # pull no longer moves it in 256 steps, and the anchor would have nothing to hold.
    environment = ENVIRONMENT.replace(observe_xla_order=False, max_steps=64)
    settings = {
        "graphs": small_graph,
        "steps": 256,
        "environments": 1,
        "progress": False,
        "warm_start": WARM_START,
        "environment": environment,
    }
    runs = [
        train(
            algorithm="ppo",
            **settings,
            hyperparameters=hyperparameters_of("ppo", {**pull, "clone_kl_coef": k}),
        )
        for k in (0.0, 5.0)
    ]
    # Measured over every state of the warm start's own rollout (XLA's order): at any one state both
    # policies can be near-deterministic, and two divergences near zero have a ratio of noise.
    env = PassOrderingEnv(graphs=small_graph, **environment.to_json())
    observation, _ = env.reset(seed=0)
    states, done = [], False
    while not done:
        mask = env.action_masks()
        states.append((observation, mask))
        action, _ = runs[0].model.anchor.predict(observation, action_masks=mask, deterministic=True)
        observation, _, terminated, truncated, _ = env.step(int(action))
        done = terminated or truncated
    divergences = []
    for run in runs:
        assert run.hyperparameters.clone_kl_coef in (0.0, 5.0) and run.steps >= 256
        model = run.model
        per_state = [model.anchor_divergence(model.policy.obs_to_tensor(o)[0], m[None]) for o, m in states]
        divergences.append(float(np.mean([d.item() for d in per_state])))
    # The pull moved the unanchored policy (by ~2.9 nats on this path); the anchor kept the other near.
    assert len(states) > 1 and divergences[0] > 0.05
    assert divergences[1] < divergences[0] / 2


def test_the_kl_anchor_holds_the_direct_path_from_xlas_order_too(small_graph):
    # The shipped network adds `follow_weight` x `xla_next` to its logits: the anchor is a copy of
    # all of it, so PPO moving that weight away from the warm start's is pulled back like any other.
    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    assert isinstance(model.policy, FollowsXlaOrderPolicy)
    model.set_anchor()
    env = PassOrderingEnv(graphs=small_graph, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0)
    state, mask = model.policy.obs_to_tensor(observation)[0], env.action_masks()[None]
    assert model.anchor_divergence(state, mask).item() == pytest.approx(0.0, abs=1e-6)
    with torch.no_grad():
        model.policy.follow_weight.fill_(0.0)
    divergence = model.anchor_divergence(state, mask)
    divergence.backward()
    assert divergence.item() > 0.1 and model.anchor.follow_weight.item() == FOLLOW_WEIGHT_INIT
    assert model.policy.follow_weight.grad.item() < 0  # descending the KL raises the weight back


def test_the_network_departs_from_xlas_next_pass_only_as_demonstrated(small_graph):
    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    env = PassOrderingEnv(graphs=small_graph, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0)
    state = model.policy.obs_to_tensor(observation)[0]
    following = int(observation["xla_next"].argmax())
    with torch.no_grad():
        model.policy.follow_weight.zero_()  # the MLP alone: every action has some probability
        assert (model.policy.get_distribution(state).distribution.probs > 1e-6).sum() > 2
        departure = (following + 1) % len(observation["xla_next"])
        model.policy.show_departures(observation["xla_next"][None], [departure])
        probabilities = model.policy.get_distribution(state).distribution.probs[0]
    # XLA's next pass, or the one departure shown where it was XLA's next: nothing else.
    assert set(torch.nonzero(probabilities > 1e-6).flatten().tolist()) == {following, departure}
    # Shown only further on in XLA's order (or on a smaller module), the departure is not taken here.
    here = np.array([[observation["xla_progress"][0], observation["op_count"][0]]])
    for elsewhere in (here + [[0.5, 0.0]], here - [[0.0, 0.5]]):
        with torch.no_grad():
            model.policy.show_departures(observation["xla_next"][None], [departure], elsewhere)
            probabilities = model.policy.get_distribution(state).distribution.probs[0]
        assert set(torch.nonzero(probabilities > 1e-6).flatten().tolist()) == {following}
    with torch.no_grad():
        model.policy.show_departures(observation["xla_next"][None], [departure], here)
        probabilities = model.policy.get_distribution(state).distribution.probs[0]
    assert set(torch.nonzero(probabilities > 1e-6).flatten().tolist()) == {following, departure}


@pytest.mark.slow
def test_ppo_after_a_warm_start_trains_on_a_users_graph_files(tmp_path):
    # PPO runs on the warm start's graphs, handed over as graphs: files outside the suite resolve by path.
    graph = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")[0]
    (tmp_path / "mine.hlo").write_text(graph.hlo_text())
    warm_start = replace(WARM_START, improve_budget=0, epochs=5, dagger_rounds=1)
    run = train(graphs=str(tmp_path), steps=64, environments=2, progress=False, warm_start=warm_start)
    assert run.steps >= 64 and run.episodes > 0
    # The artifact says what PPO ran on, and how the warm start was made.
    training = run.metadata("mine", default_driver())["training"]
    assert training["graphs"] == str(tmp_path) and training["ppo_graphs"] == ["mine"]
    assert run.warm_start["network"] == "FollowsXlaOrderPolicy" and run.warm_start["try_share"] is None
    assert run.warm_start["expert"].startswith("followed xla_next")


def _settings_of_an_environment_built_here(pickled_factory: bytes) -> tuple[float, str]:
    """In another process, as SubprocVecEnv runs a factory: the timeout and cache its driver runs under."""
    import pickle

    env = pickle.loads(pickled_factory)()
    try:
        return env.unwrapped.driver.timeout, env.unwrapped.driver.settings.cache_directory
    finally:
        env.close()
        env.unwrapped.driver.pool.close()


def test_an_environment_factory_keeps_the_settings_it_was_made_under(small_graph, tmp_path, monkeypatch):
    # SubprocVecEnv and Ray run the factory in another process, where a command's settings in effect
    # are not: the factory carries what the command chose; caches are that process's own.
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    import cloudpickle

    from xlabench.settings import current, in_effect

    asked = current().with_options(compiler_timeout_seconds=77.0)
    with in_effect(asked):
        pickled = cloudpickle.dumps(make_environment(small_graph, "ppo", 0, 0))
    assert _settings_of_an_environment_built_here(pickled) == (77.0, asked.cache_directory)  # this process
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))  # the other process's own cache
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as other:
        assert other.submit(_settings_of_an_environment_built_here, pickled).result() == (77.0, str(tmp_path))
