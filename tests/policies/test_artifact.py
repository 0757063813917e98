"""Policy artifacts: versions, and a loader that refuses what it cannot trust in one line."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from tests.policies.conftest import SMALL_GRAPH, run_metadata
from xlabench.agents.train import ENVIRONMENT
from xlabench.cli import main
from xlabench.env import PassOrderingEnv
from xlabench.policies.artifact import PolicyError, resolve, save, versions
from xlabench.policies.policy import load_policy
from xlabench.xla import default_driver


def test_a_loaded_policy_acts_as_the_model_it_was_saved_from(saved_policy, ppo_model):
    policy = load_policy("tiny", default_driver())
    assert policy.label == "tiny@v1.0" and saved_policy.name == "v1.0"
    env = PassOrderingEnv(graphs=SMALL_GRAPH, action_set=ENVIRONMENT["action_set"])
    observation, _ = env.reset(seed=0)
    mask = env.action_masks()
    expected, _ = ppo_model.predict(observation, deterministic=True, action_masks=mask)
    assert policy.act(observation, mask) == int(expected)
    metadata = json.loads((saved_policy / "metadata.json").read_text())
    assert metadata["weights_sha256"] and metadata["format"] == 1


def test_versions_minor_for_new_weights_major_for_new_spaces(saved_policy, ppo_model, policies_root):
    weights = ppo_model.policy.state_dict()
    assert save("tiny", weights, run_metadata("tiny"), "again", policies_root).name == "v1.1"
    fewer = default_driver().catalogue.action_passes(ENVIRONMENT["action_set"])[:-1]
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


def test_a_flipped_byte_is_refused(saved_policy, tmp_path, capsys):
    copy = _copy(saved_policy, tmp_path)
    weights = copy / "weights.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    assert f"{weights}: checksum mismatch" in _refusal(capsys, str(copy))


def test_a_truncated_file_is_refused(saved_policy, tmp_path, capsys):
    copy = _copy(saved_policy, tmp_path)
    weights = copy / "weights.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    assert f"{weights}: checksum mismatch" in _refusal(capsys, str(copy))
    (copy / "metadata.json").write_text('{"format": 1, "name": ')
    assert "metadata.json: unreadable" in _refusal(capsys, str(copy))


def test_a_policy_from_another_action_set_is_refused(policies_root, ppo_model, capsys):
    # What a policy trained before gather/scatter_simplifier became actions would carry.
    installed = default_driver().catalogue.action_passes(ENVIRONMENT["action_set"])
    actions = [a for a in installed if "_simplifier" not in a]
    save("old", ppo_model.policy.state_dict(), run_metadata("old", actions), "old", policies_root)
    expected = f"its {len(actions)} actions are not the installed action set's {len(installed)}"
    assert len(actions) < len(installed) and expected in _refusal(capsys, "old")
    with pytest.raises(PolicyError, match="gather_simplifier"):
        load_policy("old", default_driver())


def test_a_policy_for_another_jaxlib_is_refused(policies_root, ppo_model, capsys):
    metadata = {**run_metadata("elsewhere"), "jaxlib_version": "0.9.0"}
    save("elsewhere", ppo_model.policy.state_dict(), metadata, "elsewhere", policies_root)
    assert "trained against jaxlib 0.9.0, installed is" in _refusal(capsys, "elsewhere")


def test_unknown_policies_and_versions_are_one_clear_error(saved_policy, capsys):
    assert "nosuch: no such policy" in _refusal(capsys, "nosuch")
    assert "no version v9.9 of tiny (versions: v1.0)" in _refusal(capsys, "tiny@v9.9")


def test_weights_are_tensors_only(saved_policy):
    from safetensors.torch import load_file

    tensors = load_file(str(saved_policy / "weights.safetensors"))
    assert tensors and all(isinstance(value, torch.Tensor) for value in tensors.values())
    assert all(np.isfinite(value.numpy()).all() for value in tensors.values())
