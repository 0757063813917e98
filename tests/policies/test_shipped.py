"""The policies shipped under `policies/`: each one's latest version loads, verified, and acts as recorded."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import policy_names
from xlabench.policies.policy import load_policy, rollout
from xlabench.xla import default_driver

SHIPPED = Path(__file__).resolve().parents[2] / "policies"


@pytest.mark.parametrize("name", policy_names(SHIPPED))
def test_a_shipped_policy_loads_on_the_installed_jaxlib_and_repeats_its_recorded_rollout(name):
    driver = default_driver()
    policy = load_policy(name, driver, SHIPPED)  # checksum, jaxlib, action list, observation spec
    recorded = {
        row["name"]: row
        for summary in policy.artifact.metadata["eval"].values()
        for row in summary["per_graph"]
    }
    # The suite may have grown since (a split gains graphs): the smallest graph the version recorded.
    evaluated = [
        graph
        for spec in policy.artifact.metadata["eval"]
        for graph in resolve_graphs(spec)
        if graph.name in recorded
    ]
    graph = min(evaluated, key=lambda graph: graph.instruction_count)
    found = rollout(policy, driver, graph)
    # Deterministic: the greedy sequence and count `xlabench retrain` evaluated and stored.
    assert found.sequence == recorded[graph.name]["sequence"]
    assert found.op_count == recorded[graph.name]["R"]


def test_a_policy_acts_the_same_from_two_threads_at_once():
    # `xlabench eval --workers 2` rolls out two graphs at once on one policy.
    import threading

    import numpy as np

    driver = default_driver()
    policy = load_policy("general", driver, SHIPPED)
    generator = np.random.default_rng(0)
    space = policy.network.observation_space
    observations = [
        {key: generator.random(box.shape).astype(np.float32) for key, box in space.items()} for _ in range(8)
    ]
    mask = np.ones(len(policy.actions) + 1, dtype=bool)
    serial = [policy.act(observation, mask) for observation in observations]
    assert len(set(serial)) > 1  # different observations, different actions: a mix-up would show
    wrong = []

    def act_repeatedly(offset: int) -> None:
        for round_ in range(300):
            index = (round_ + offset) % len(observations)
            if policy.act(observations[index], mask) != serial[index]:
                wrong.append(index)

    threads = [threading.Thread(target=act_repeatedly, args=(offset,)) for offset in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
