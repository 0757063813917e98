"""The environment's settings as a policy's metadata stores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.env.environment_config import EnvironmentConfig
from xlabench.errors import UserInputError

POLICIES = Path(__file__).parents[2] / "policies"


def test_every_shipped_policys_environment_reads_back_and_writes_the_same_keys():
    for path in sorted(POLICIES.glob("*/v*/metadata.json")):
        stored = json.loads(path.read_text())["environment"]
        config = EnvironmentConfig.from_json(stored)
        # Settings added after a policy was made take the behaviour it was made with.
        assert {key: config.to_json()[key] for key in stored} == stored, path
    old = EnvironmentConfig.from_json({"max_steps": 30})
    assert old.mask_inapplicable is False and old.xla_order_skip == 0  # the cursor waits, as it did


def test_an_unknown_setting_is_refused_in_one_line():
    with pytest.raises(UserInputError, match="unknown environment setting steps"):
        EnvironmentConfig().replace(steps=3)


def test_the_environment_a_user_makes_is_the_shipped_policys():
    import gymnasium

    import xlabench.env  # noqa: F401  (registers the environment)
    from tests.env.conftest import SMALL_GRAPH
    from xlabench.env import ENV_ID
    from xlabench.policies.policy import load_policy

    shipped = load_policy("general").environment
    assert EnvironmentConfig() == shipped
    env = gymnasium.make(ENV_ID, graphs=SMALL_GRAPH).unwrapped
    made = {name: getattr(env, name, None) for name in ("max_steps", "error_penalty")}
    assert made == {"max_steps": shipped.max_steps, "error_penalty": shipped.error_penalty}
    assert "xla_next" in env.observation_space.spaces  # XLA's order observed, as the policy was trained


def test_a_setting_an_older_policy_lacks_reads_as_before_it_existed():
    older = EnvironmentConfig.from_json(
        {"action_set": "fixed-point", "max_steps": 64, "error_penalty": 0.01, "count_every_step": False}
    )
    assert older.observe_xla_order is False and older.reward_baseline == "unoptimized"
    assert older.xla_order_skip == 0 and older.mask_inapplicable is False
