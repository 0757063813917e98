"""Training configuration: overrides replace fields, and the metadata form is the stored one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.agents.algorithm_config import ALGORITHMS, hyperparameters_of

SHIPPED = Path(__file__).parents[2] / "policies" / "general"


def test_an_override_replaces_one_field_and_an_unknown_one_is_refused():
    config = hyperparameters_of("ppo", {"ent_coef": 0.01})
    assert config.ent_coef == 0.01 and config.clip_range == hyperparameters_of("ppo").clip_range
    with pytest.raises(ValueError, match="trpo has no hyperparameter clone_kl_coef"):
        hyperparameters_of("trpo", {"clone_kl_coef": 0.1})


def test_the_metadata_form_keeps_the_keys_of_shipped_policies():
    stored = json.loads(sorted(SHIPPED.glob("v*/metadata.json"))[-1].read_text())["hyperparameters"]
    written = hyperparameters_of("ppo").to_json()
    assert list(written)[: len(stored)] == list(stored)
    assert all(written[key] == stored[key] for key in ("gamma", "net_arch", "activation"))
    # Shaping's coefficient is the wrapper's setting, not the model's.
    for algorithm in ALGORITHMS:
        assert "shaping_coefficient" not in hyperparameters_of(algorithm).model_arguments()
