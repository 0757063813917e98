"""A rollout: where it ends when the policy plays on past XLA's own order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.policies.conftest import run_metadata
from xlabench.agents.train import ROLLOUT
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import Artifact, PolicyError
from xlabench.policies.policy import Policy, rollout
from xlabench.xla import default_driver

# XLA's order lands on D = 753 here; one `algsimp` after it removes 4 ops more, and `gemv-rewriter`
# after that puts them back: a tail that pays off, then one that does not.
TAIL_GRAPH = "control_flow-cond_train-l2-d32-f32"
TAIL = ["algsimp", "gemv-rewriter"]


def scripted(policy: Policy, tail: list[str]) -> Policy:
    """`policy` as it acts until XLA's order is played out, then `tail`, then stop."""
    followed, stop = policy.act, len(policy.actions)
    pending = list(tail)

    def act(observation: dict[str, np.ndarray], mask: np.ndarray) -> int:
        if int(np.argmax(observation["xla_next"])) != stop:
            return followed(observation, mask)
        return policy.actions.index(pending.pop(0)) if pending else stop

    policy.act = act  # type: ignore[method-assign]
    return policy


def made(ppo_model, stop: str | None) -> Policy:
    """The untrained model (it takes XLA's next pass) as a version with the rollout stop `stop`."""
    metadata = {**run_metadata("tail"), "version": "v1.0"}
    if stop is not None:
        metadata["rollout"] = {"stop": stop}
    return Policy(Artifact(Path("(test)"), metadata, ppo_model.policy.state_dict()))


@pytest.mark.slow
def test_past_xlas_order_a_rollout_ends_on_the_lowest_count_it_reached(ppo_model):
    driver, graph = default_driver(), resolve_graphs(TAIL_GRAPH)[0]
    default = driver.features(driver.run_default_pipeline(driver.load(graph.hlo_text(), graph.name))).op_count
    # Where the policy stops, as versions made before the rule roll out: the tail's last pass undoes the gain.
    as_before = rollout(scripted(made(ppo_model, None), TAIL), driver, graph)
    assert as_before.sequence[-2:] == TAIL and as_before.op_count == default
    # A version made by `retrain` ends on the lowest count past XLA's order, the sequence cut there.
    lowest = rollout(scripted(made(ppo_model, ROLLOUT["stop"]), TAIL), driver, graph)
    assert lowest.op_count < default and lowest.sequence == as_before.sequence[:-1]
    assert driver.fair_op_count(lowest.module, lowest.sequence) == lowest.op_count
    replayed = driver.load(graph.hlo_text(), graph.name)
    for name in lowest.sequence:
        replayed, _ = driver.apply_action(replayed, name)
    assert driver.fair_op_count(replayed, lowest.sequence) == lowest.op_count
    # Each state past XLA's order is one count more (where it ends, after each pass of the tail), but
    # the last: its count is the final count.
    assert lowest.calls == as_before.calls + len(TAIL)
    # Where the tail pays off to the end, the rollout ends where the policy stopped.
    kept = rollout(scripted(made(ppo_model, ROLLOUT["stop"]), TAIL[:1]), driver, graph)
    assert kept.sequence == lowest.sequence and kept.op_count == lowest.op_count


def test_a_version_with_a_stop_rule_this_xlabench_does_not_know_is_refused_in_one_line(ppo_model):
    with pytest.raises(PolicyError, match="unknown rollout stop 'oracle'") as raised:
        made(ppo_model, "oracle")
    assert "\n" not in str(raised.value)


@pytest.mark.parametrize("skip", [-1, "one", 1.5])
def test_a_version_whose_cursor_skip_is_not_a_whole_number_is_refused_in_one_line(ppo_model, skip):
    metadata = {**run_metadata("tail"), "version": "v1.0"}
    metadata["environment"] = {**metadata["environment"], "xla_order_skip": skip}
    with pytest.raises(PolicyError, match="xla_order_skip must be a whole number >= 0") as raised:
        Policy(Artifact(Path("(test)"), metadata, ppo_model.policy.state_dict()))
    assert "(test)" in str(raised.value) and "\n" not in str(raised.value)
