"""The warm start: XLA's effective order as demonstrations, cloned into a policy that then matches XLA."""

from __future__ import annotations

import numpy as np
from stable_baselines3.common.vec_env import DummyVecEnv

from xlabench.agents.imitation import aggregate, behaviour_cloning, demonstrations, expert_action
from xlabench.agents.train import ACTIVATION, ENVIRONMENT, NET_ARCH, build_model, make_environment
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import Artifact
from xlabench.policies.policy import Policy, rollout
from xlabench.xla import default_driver
from xlabench.xla.replay import replay_default_pipeline

NORMALIZER = "batched_gather_scatter_normalizer"


def test_a_cloned_policy_replays_xlas_effective_order_and_count(small_graph, tmp_path):
    driver = default_driver()
    data = demonstrations(small_graph, ENVIRONMENT, driver, workers=1)
    graph = resolve_graphs(small_graph)[0]
    module = driver.load(graph.hlo_text(), graph.name)
    effective = [key.split("@")[0] for key in replay_default_pipeline(driver, module).effective]
    actions = driver.catalogue.action_passes()
    demonstrated = [actions[a] for a in data.actions[:-1]]
    # gather_simplifier needs the normalizer first, even where the normalizer changed nothing.
    assert demonstrated == [name for name in demonstrated if name in effective or name == NORMALIZER]
    assert [name for name in demonstrated if name != NORMALIZER] == effective
    assert data.actions[-1] == len(actions)  # stop
    assert data.masks[range(len(data)), data.actions].all()

    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    figures = behaviour_cloning(model.policy, data, epochs=300, learning_rate=3e-3, batch_size=8, seed=0)
    assert figures["accuracy"] == 1.0

    network = {"net_arch": NET_ARCH, "activation": ACTIVATION}
    metadata = {"name": "cloned", "version": "-", "actions": actions, "algorithm": "ppo",
                "environment": ENVIRONMENT, "hyperparameters": network}  # fmt: skip
    policy = Policy(Artifact(tmp_path, metadata, model.policy.state_dict()))
    found = rollout(policy, driver, graph)
    assert found.sequence == demonstrated
    assert found.op_count == driver.features(driver.run_default_pipeline(module)).op_count


def test_the_expert_resumes_xlas_order_after_a_wrong_step():
    actions = ["a", "b", "c", "d"]
    order = ["a", "b", "c", "b"]
    allowed = np.ones(5, dtype=bool)
    assert expert_action(order, [], allowed, actions) == 0
    assert expert_action(order, ["a", "b"], allowed, actions) == 2
    assert expert_action(order, ["b"], allowed, actions) == 0  # a was left out: do it now
    assert expert_action(order, ["a", "c"], allowed, actions) == 1  # b left out before c
    assert expert_action(order, ["a", "b", "c"], allowed, actions) == 1  # b again, after c
    assert expert_action(order, ["a", "d", "b", "c", "b"], allowed, actions) == 4  # all done: stop
    no_b = allowed.copy()
    no_b[1] = False  # b known to change nothing here: skip it
    assert expert_action(order, ["a"], no_b, actions) == 2


def test_dagger_labels_the_states_a_policy_visits(small_graph):
    driver = default_driver()
    data = demonstrations(small_graph, ENVIRONMENT, driver, workers=1)
    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    # An untrained policy strays from XLA's order; every state it visits gets the expert's label.
    grown, figures = aggregate(model.policy, data, small_graph, ENVIRONMENT, driver, workers=1)
    assert len(grown) == len(data) + figures["visited"] and figures["agreement"] < 1.0
    behaviour_cloning(model.policy, grown, epochs=300, learning_rate=3e-3, batch_size=8, seed=0)
    _, figures = aggregate(model.policy, data, small_graph, ENVIRONMENT, driver, workers=1)
    assert figures["agreement"] == 1.0
