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
    evaluated = [graph for spec in policy.artifact.metadata["eval"] for graph in resolve_graphs(spec)]
    graph = min(evaluated, key=lambda graph: graph.instruction_count)
    found = rollout(policy, driver, graph)
    # Deterministic: the greedy sequence and count `xlabench retrain` evaluated and stored.
    assert found.sequence == recorded[graph.name]["sequence"]
    assert found.op_count == recorded[graph.name]["R"]
