"""A policy directory of its own per test, with one freshly built (untrained) PPO policy saved in it."""

from __future__ import annotations

import pytest

from xlabench.agents.train import build_model, make_environment
from xlabench.policies.artifact import save
from xlabench.xla import default_driver

SMALL_GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


@pytest.fixture(scope="session")
def ppo_model():
    """An untrained MaskablePPO model on the small graph (what is stored is its network)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    return build_model("ppo", DummyVecEnv([make_environment(SMALL_GRAPH, "ppo", 0, 0)]), 0, None)


@pytest.fixture
def policies_root(tmp_path, monkeypatch):
    """An empty policies directory, used by the CLI too."""
    root = tmp_path / "policies"
    root.mkdir()
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(root))
    return root


def run_metadata(name: str, actions: list[str] | None = None) -> dict:
    """Metadata as `xlabench retrain` writes it, for a model that was not trained."""
    from xlabench.agents.algorithm_config import ACTIVATION, NET_ARCH
    from xlabench.agents.train import ENVIRONMENT
    from xlabench.env.observation import observation_space
    from xlabench.policies.artifact import observation_spec

    driver = default_driver()
    actions = actions or driver.catalogue.action_passes(ENVIRONMENT.action_set)
    return {
        "name": name,
        "algorithm": "ppo",
        "jaxlib_version": driver.jaxlib_version,
        "actions": actions,
        "observation_spec": observation_spec(observation_space(len(actions), ENVIRONMENT.observe_xla_order)),
        "environment": ENVIRONMENT.to_json(),
        "hyperparameters": {"net_arch": list(NET_ARCH), "activation": ACTIVATION},
        "training": {"graphs": SMALL_GRAPH, "steps": 0, "seconds": 0},
        "eval": {},
    }


@pytest.fixture
def saved_policy(policies_root, ppo_model):
    """The model saved as policy `tiny`, v1.0."""
    return save("tiny", ppo_model.policy.state_dict(), run_metadata("tiny"), "first", policies_root)
