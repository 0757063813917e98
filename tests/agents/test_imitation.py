"""The warm start: XLA's effective order as demonstrations, cloned into a policy that then matches XLA."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch
from stable_baselines3.common.vec_env import DummyVecEnv

from xlabench.agents.algorithm_config import ACTIVATION, GAMMA, NET_ARCH
from xlabench.agents.expert import expert_action, following_dce
from xlabench.agents.imitation import (
    Demonstrations,
    aggregate,
    behaviour_cloning,
    demonstrations,
    followed_label,
    followed_order,
    program_kind,
    warm_start_graphs,
    with_followed_copies,
)
from xlabench.agents.train import ENVIRONMENT, build_model, make_environment
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import Artifact
from xlabench.policies.policy import Policy, rollout
from xlabench.xla import default_driver
from xlabench.xla.compilers.pass_catalogue import base_pass

NORMALIZER = "batched_gather_scatter_normalizer"


def test_a_cloned_policy_replays_xlas_effective_order_and_count(small_graph, tmp_path):
    driver = default_driver()
    data = demonstrations(small_graph, ENVIRONMENT, driver, workers=1)
    graph = resolve_graphs(small_graph)[0]
    module = driver.load(graph.hlo_text(), graph.name)
    actions = driver.catalogue.action_passes(ENVIRONMENT.action_set)
    demonstrated = [actions[a] for a in data.actions[:-1]]
    # Observing XLA's order, the expert takes XLA's next pass at every state (`xla_next`) until the
    # order is done: the passes of XLA's changes, in order, as the environment's actions.
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0, options={"graph": graph.name})
    assert demonstrated == followed_order(env, observation)
    xla_order = iter(name for _, name in driver.default_pipeline_changes(module))
    assert all(base_pass(name) in xla_order for name in demonstrated if name != NORMALIZER)
    # ... and lands on XLA's count.
    assert (
        driver.fair_op_count(env.module, demonstrated)
        == driver.features(driver.run_default_pipeline(module)).op_count
    )
    assert data.actions[-1] == len(actions)  # stop
    # The value function's targets: the episode's return, discounted back to each state; measured
    # against XLA's count (the training default) it is 0 at XLA's count, against R0 (R0 - D) / R0.
    assert ENVIRONMENT.reward_baseline == "default" and data.returns[-1] == pytest.approx(0.0)
    against_raw = demonstrations(
        small_graph, replace(ENVIRONMENT, reward_baseline="unoptimized"), driver, workers=1
    )
    unoptimized = driver.fair_op_count(module)
    default = driver.features(driver.run_default_pipeline(module)).op_count
    assert against_raw.returns[-1] == pytest.approx((unoptimized - default) / unoptimized)
    assert against_raw.returns[0] == pytest.approx(against_raw.returns[-1] * GAMMA ** (len(against_raw) - 1))
    assert data.masks[range(len(data)), data.actions].all()

    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    # Without the direct path from `xla_next` (at its starting weight it alone takes XLA's next pass),
    # so that what is measured is what cloning fitted.
    with torch.no_grad():
        model.policy.follow_weight.zero_()
    figures = behaviour_cloning(model.policy, data, epochs=300, learning_rate=3e-3, batch_size=8, seed=0)
    assert figures["accuracy"] == 1.0 and figures["value_loss"] < 1e-3

    network = {"net_arch": NET_ARCH, "activation": ACTIVATION}
    metadata = {"name": "cloned", "version": "-", "actions": actions, "algorithm": "ppo",
                "environment": ENVIRONMENT.to_json(), "hyperparameters": network}  # fmt: skip
    policy = Policy(Artifact(tmp_path, metadata, model.policy.state_dict()))
    found = rollout(policy, driver, graph)
    assert found.sequence == demonstrated
    assert found.op_count == default


@pytest.mark.slow
def test_dagger_labels_the_states_a_policy_visits(small_graph):
    driver = default_driver()
    data = demonstrations(small_graph, ENVIRONMENT, driver, workers=1)
    model = build_model("ppo", DummyVecEnv([make_environment(small_graph, "ppo", 0, 0)]), 0, None)
    # Untrained, the policy takes XLA's next pass (the direct path from `xla_next`, at its starting weight).
    _, figures = aggregate(model.policy, data, small_graph, ENVIRONMENT, driver, workers=1)
    assert figures["agreement"] == 1.0
    # Without that path it strays from XLA's order; every state it visits gets the expert's label.
    with torch.no_grad():
        model.policy.follow_weight.zero_()
    grown, figures = aggregate(model.policy, data, small_graph, ENVIRONMENT, driver, workers=1)
    assert len(grown) == len(data) + figures["visited"] and figures["agreement"] < 1.0
    behaviour_cloning(model.policy, grown, epochs=300, learning_rate=3e-3, batch_size=8, seed=0)
    _, figures = aggregate(model.policy, data, small_graph, ENVIRONMENT, driver, workers=1)
    assert figures["agreement"] == 1.0


def test_off_xlas_path_dagger_labels_what_the_policy_is_shown(small_graph):
    # Following `xla_next`, the policy learns what the observation shows; a label that sends it back
    # to a pass XLA's order no longer shows would teach it to ignore what it sees.
    env = PassOrderingEnv(graphs=small_graph, driver=default_driver(), **ENVIRONMENT.to_json())
    order = followed_order(env, env.reset(seed=0)[0])
    # A fresh environment: the one that played the order has learnt which passes change nothing where.
    env = PassOrderingEnv(graphs=small_graph, driver=default_driver(), **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0)
    mask = env.action_masks()
    assert followed_label(order, [], observation, mask, env.actions) == env.actions.index(order[0])
    # On this GRU step, algsimp's single run where XLA's order runs it to a fixed point: by name the
    # fixed point is still to do; XLA's order from there shows its next pass.
    at = order.index("algsimp:fixed-point")
    for name in [*order[:at], "algsimp"]:
        observation, *_ = env.step(env.actions.index(name))
    mask = env.action_masks()
    shown = int(observation["xla_next"].argmax())
    assert expert_action(order, env.sequence, mask, env.actions) != shown
    assert followed_label(order, env.sequence, observation, mask, env.actions) == shown
    # On the path of an order `improve_order` edited, the edit is the label, not what XLA would do.
    env = PassOrderingEnv(graphs=small_graph, driver=default_driver(), **ENVIRONMENT.to_json())
    env.reset(seed=0)
    for name in order:
        observation, *_ = env.step(env.actions.index(name))
    mask = env.action_masks()
    edited = [*order, "dce"]
    assert int(observation["xla_next"].argmax()) == len(env.actions)  # XLA's order is done: stop
    assert followed_label(edited, env.sequence, observation, mask, env.actions) == env.actions.index("dce")


def test_grouped_by_kind_the_warm_start_sees_every_program_of_a_family():
    by_family = warm_start_graphs("control_flow", 2)
    by_kind = warm_start_graphs("control_flow", 1, group_by="kind")
    # The two smallest of the family are one program; one of each kind covers every program and dtype.
    kinds = {program_kind(graph) for graph in resolve_graphs("control_flow")}
    assert len({program_kind(graph) for graph in by_family}) < len(kinds)
    assert {program_kind(graph) for graph in by_kind} == kinds and len(by_kind) == len(kinds)
    assert {graph.config["program"] for graph in by_kind} >= {"cg", "newton_cg", "cond_train"}
    with pytest.raises(ValueError, match="by family or kind"):
        warm_start_graphs("control_flow", 1, group_by="dtype")


def test_graphs_the_version_before_did_better_on_join_the_warm_start():
    by_kind = warm_start_graphs("control_flow", 1, group_by="kind")
    largest = max(resolve_graphs("control_flow"), key=lambda graph: graph.instruction_count)
    joined = warm_start_graphs("control_flow", 1, group_by="kind", also=[largest.name, "not-in-the-spec"])
    assert [graph.name for graph in joined if graph not in by_kind] == [largest.name]
    assert len(joined) == len(by_kind) + 1


def test_a_graph_beyond_the_smallest_is_demonstrated_where_the_version_before_won():
    driver = default_driver()
    smallest, larger = "tensorflow-cnn-infer-l1-d16-b8-f32", "tensorflow-cnn-infer-l2-d32-b4-f32"
    spec = f"{smallest},{larger}"  # one program kind: only the smallest is demonstrated by default
    # On the larger frozen CNN, doing nothing counts 47 against XLA's order's 50: a start that wins.
    by_kind = {"workers": 1, "per_family": 1, "group_by": "kind"}
    won = demonstrations(spec, ENVIRONMENT, driver, **by_kind, starts={larger: []})
    assert set(won.orders) == {smallest, larger}
    # A start the environment cannot play does not win: the graph is left to its kind's smallest.
    lost = demonstrations(spec, ENVIRONMENT, driver, **by_kind, starts={larger: ["no-such-pass"]})
    assert set(lost.orders) == {smallest}


def test_following_xla_is_shown_for_every_pass_the_state_allows():
    # Four actions and stop; state 0 follows XLA's next pass (1), state 1 departs from it (takes 2).
    following = np.zeros((2, 5), dtype=np.float32)
    following[:, 1] = 1.0
    masks = np.array([[True, True, False, True, True], [True, True, True, True, True]])
    data = Demonstrations(
        {"xla_next": following, "histogram": np.ones((2, 3), dtype=np.float32)},
        masks,
        np.array([1, 2]),
        graphs=1,
        returns=np.array([0.5, 0.25], dtype=np.float32),
    )
    copied = with_followed_copies(data, copies=3, seed=0)
    assert len(copied) == 5 and list(copied.actions[:2]) == [1, 2]
    added = copied.observations["xla_next"][2:]
    # Copies of the following state only, XLA's next pass each time another the mask allows (0 or 3,
    # never the masked 2 or stop), and that pass the label.
    assert list(added.argmax(axis=1)) == list(copied.actions[2:]) and set(copied.actions[2:]) <= {0, 3}
    assert (added.sum(axis=1) == 1).all() and (copied.returns[2:] == 0.5).all()
    assert with_followed_copies(data, copies=0, seed=0) is data


def test_a_demonstration_removes_dead_code_where_xla_does(small_graph):
    driver = default_driver()
    graph = resolve_graphs(small_graph)[0]
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0, options={"graph": graph.name})
    order = followed_order(env, observation)
    count = driver.fair_op_count(env.module, order)
    assert "dce" in order
    # An order that leaves XLA's dce runs out (as an improved order may) is shown with them put back:
    # the policy is never shown refusing to remove dead code.
    without = [name for name in order if name != "dce"]

    def fresh() -> PassOrderingEnv:
        return PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())

    shown = following_dce(fresh(), graph.name, without)
    assert shown == order
    assert following_dce(fresh(), graph.name, order) == order
    module = env.graph_start(graph.name).module
    for name in shown:
        module, _ = driver.apply_action(module, name)
    assert driver.fair_op_count(module, shown) == count
