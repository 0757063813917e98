"""The warm start: XLA's effective order as demonstrations, cloned into a policy that then matches XLA."""

from __future__ import annotations

from stable_baselines3.common.vec_env import DummyVecEnv

from xlabench.agents.imitation import behaviour_cloning, demonstrations
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
