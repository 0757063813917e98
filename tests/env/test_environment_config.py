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
