"""Policy artifacts: versions, and a loader that refuses what it cannot trust in one line."""

from __future__ import annotations

import json
import shutil

from tests.policies.conftest import SMALL_GRAPH, run_metadata
from xlabench.agents.train import ENVIRONMENT
from xlabench.cli import main
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import resolve, save, versions
from xlabench.policies.policy import load_policy, rollout
from xlabench.xla import default_driver


def test_a_loaded_policy_acts_as_the_model_it_was_saved_from(saved_policy, ppo_model):
    policy = load_policy("tiny", default_driver())
    assert policy.label == "tiny@v1.0" and saved_policy.name == "v1.0"
    env = PassOrderingEnv(
        graphs=SMALL_GRAPH, action_set=ENVIRONMENT.action_set, observe_xla_order=ENVIRONMENT.observe_xla_order
    )
    observation, _ = env.reset(seed=0)
    mask = env.action_masks()
    expected, _ = ppo_model.predict(observation, deterministic=True, action_masks=mask)
    assert policy.act(observation, mask) == int(expected)
    metadata = json.loads((saved_policy / "metadata.json").read_text())
    assert metadata["weights_sha256"] and metadata["format"] == 1


def test_versions_minor_for_new_weights_major_for_new_spaces(saved_policy, ppo_model, policies_root):
    weights = ppo_model.policy.state_dict()
    assert save("tiny", weights, run_metadata("tiny"), "again", policies_root).name == "v1.1"
    fewer = default_driver().catalogue.action_passes(ENVIRONMENT.action_set)[:-1]
    assert (
        save("tiny", weights, run_metadata("tiny", fewer), "a compiler change", policies_root).name == "v2.0"
    )
    assert versions("tiny", policies_root) == [(1, 0), (1, 1), (2, 0)]
    assert (
        resolve("tiny", policies_root).name == "v2.0" and resolve("tiny@v1.1", policies_root).name == "v1.1"
    )
    changelog = (policies_root / "tiny" / "CHANGELOG.md").read_text()
    assert "## v1.1" in changelog and "a compiler change" in changelog
    assert not [p for p in (policies_root / "tiny").iterdir() if p.name.startswith(".")]  # no staging left


def _copy(saved_policy, tmp_path):
    copy = tmp_path / "copy" / "v1.0"
    shutil.copytree(saved_policy, copy)
    return copy


def _refusal(capsys, reference: str) -> str:
    """Run `xlabench eval` with the policy: one error line, exit 2."""
    assert main(["eval", "--policy", reference, "--graphs", SMALL_GRAPH, "--no-runtime"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    return err


def test_a_truncated_file_is_refused(saved_policy, tmp_path, capsys):
    copy = _copy(saved_policy, tmp_path)
    weights = copy / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert f"{weights}: checksum mismatch" in _refusal(capsys, str(copy))
    (copy / "metadata.json").write_text('{"format": 1, "name": ')
    assert "metadata.json: unreadable" in _refusal(capsys, str(copy))


def _untrained_weights(action_count: int) -> dict:
    """The state dict of an untrained network for `action_count` actions, as retrain would save it."""
    from gymnasium import spaces

    from xlabench.agents.algorithm_config import ACTIVATION, NET_ARCH
    from xlabench.env.observation import observation_space
    from xlabench.policies.networks import policy_class, policy_kwargs

    network = policy_class("ppo")(
        observation_space(action_count, ENVIRONMENT.observe_xla_order),
        spaces.Discrete(action_count + 1),
        lambda _: 0.0,
        **policy_kwargs(NET_ARCH, ACTIVATION),
    )
    return network.state_dict()


def test_a_policy_made_with_other_actions_keeps_its_own_and_masks_what_the_compiler_lacks(policies_root):
    # Made on a release without the gather/scatter simplifiers, with one pass this release does not have.
    driver = default_driver()
    installed = driver.catalogue.action_passes(ENVIRONMENT.action_set)
    actions = [a for a in installed if "_simplifier" not in a] + ["pass-of-another-release"]
    metadata = {**run_metadata("other", actions), "jaxlib_version": "0.9.2"}
    save("other", _untrained_weights(len(actions)), metadata, "other", policies_root)
    policy = load_policy("other", driver)
    match = policy.action_match(driver)
    assert policy.actions == actions
    assert match.masked == ("pass-of-another-release",)
    assert set(match.not_offered) == {a for a in installed if "_simplifier" in a} != set()
    assert match.trained_jaxlib == "0.9.2" and match.changed
    env = PassOrderingEnv(
        graphs=SMALL_GRAPH,
        actions=actions,
        mask_missing_actions=True,
        observe_xla_order=ENVIRONMENT.observe_xla_order,
    )
    env.reset(seed=0)
    assert env.missing_actions == ["pass-of-another-release"] and not env.action_masks()[len(actions) - 1]
    found = rollout(policy, driver, resolve_graphs(SMALL_GRAPH)[0])
    assert "pass-of-another-release" not in found.sequence and found.op_count > 0


def test_a_policy_whose_network_cannot_take_the_observations_is_refused(policies_root, ppo_model, capsys):
    metadata = {**run_metadata("elsewhere"), "observation_spec": {"histogram": [3]}}
    save("elsewhere", ppo_model.policy.state_dict(), metadata, "elsewhere", policies_root)
    assert "its network takes observations {'histogram': [3]}, this xlabench gives" in _refusal(
        capsys, "elsewhere"
    )


def test_unknown_policies_and_versions_are_one_clear_error(saved_policy, capsys):
    assert "nosuch: no such policy" in _refusal(capsys, "nosuch")
    assert "no version v9.9 of tiny (versions: v1.0)" in _refusal(capsys, "tiny@v9.9")


def test_a_policy_with_an_unknown_environment_setting_is_refused_naming_it(saved_policy, tmp_path, capsys):
    copy = _copy(saved_policy, tmp_path)
    metadata = json.loads((copy / "metadata.json").read_text())
    metadata["environment"]["future_setting"] = 1
    (copy / "metadata.json").write_text(json.dumps(metadata))
    assert f"{copy}: unknown environment setting future_setting" in _refusal(capsys, str(copy))
