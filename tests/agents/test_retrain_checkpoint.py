"""`retrain --checkpoint`: an interrupted run over seeds goes on from the seeds it finished."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.agents import train as train_module
from xlabench.agents.retrain_checkpoint import SeedCheckpoint
from xlabench.cli import main
from xlabench.errors import UserInputError
from xlabench.retraining import new_version as retrain_module


def _arguments(small_graph: str, *extra: str) -> list[str]:
    return ["retrain", "--name", "tiny", "--graphs", small_graph, "--steps", "64", "--workers", "1",
            "--seeds", "0-1", "--select-on", small_graph, "--eval-graphs", "", *extra]  # fmt: skip


@pytest.mark.slow
def test_an_interrupted_retrain_trains_only_the_missing_seeds_and_writes_what_an_uninterrupted_one_does(
    tmp_path, monkeypatch, small_graph
):
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path / "whole"))
    assert main(_arguments(small_graph)) == 0

    trained: list[int] = []
    real_train = train_module.train

    def train_until_seed_1(**arguments):
        if arguments["seed"] == 1:
            raise KeyboardInterrupt  # the session stops while seed 1 trains
        trained.append(arguments["seed"])
        return real_train(**arguments)

    checkpoint = tmp_path / "checkpoint"
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path / "resumed"))
    monkeypatch.setattr(train_module, "train", train_until_seed_1)
    assert main(_arguments(small_graph, "--checkpoint", str(checkpoint))) == 130
    assert trained == [0] and (checkpoint / "seed-0.json").exists()
    assert not (tmp_path / "resumed" / "tiny").exists()

    def counted(**arguments):
        trained.append(arguments["seed"])
        return real_train(**arguments)

    judged: list[int] = []
    real_scores = retrain_module._seed_scores

    def scores_until_seed_1(run, *arguments):
        if run.seed == 1:
            raise KeyboardInterrupt  # the session stops while the seeds are judged on --select-on
        judged.append(run.seed)
        return real_scores(run, *arguments)

    monkeypatch.setattr(train_module, "train", counted)
    monkeypatch.setattr(retrain_module, "_seed_scores", scores_until_seed_1)
    assert main(_arguments(small_graph, "--checkpoint", str(checkpoint))) == 130
    assert trained == [0, 1] and judged == [0]  # seed 0 read back, not trained again
    assert (checkpoint / "seed-0.scores.json").exists()

    def counted_scores(run, *arguments):
        judged.append(run.seed)
        return real_scores(run, *arguments)

    monkeypatch.setattr(retrain_module, "_seed_scores", counted_scores)
    assert main(_arguments(small_graph, "--checkpoint", str(checkpoint))) == 0
    assert trained == [0, 1] and judged == [0, 1]  # seed 0's scores read back, not measured again
    assert not checkpoint.exists()  # the version is written: nothing left to resume

    whole, resumed = (tmp_path / root / "tiny" / "v1.0" for root in ("whole", "resumed"))
    assert (resumed / "weights.safetensors").read_bytes() == (whole / "weights.safetensors").read_bytes()
    seeds = [json.loads((version / "metadata.json").read_text())["seeds"] for version in (whole, resumed)]
    assert seeds[0] == seeds[1]  # per-seed scores, curves and warm starts alike


def test_a_checkpoint_of_other_settings_is_refused_in_one_line_before_training(
    tmp_path, monkeypatch, capsys, small_graph
):
    checkpoint = tmp_path / "checkpoint"
    SeedCheckpoint(checkpoint, {"algorithm": "ppo", "steps": 128}).open()
    monkeypatch.setattr(train_module, "train", lambda **arguments: pytest.fail("trained"))
    monkeypatch.setenv("XLABENCH_POLICIES_DIR", str(tmp_path / "policies"))
    assert main(_arguments(small_graph, "--checkpoint", str(checkpoint))) == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0 and f"checkpoint {checkpoint}: made with other settings" in error
    assert "steps" in error and "algorithm" not in error.split("(")[1]
    # A setting one side lacks is named too, not shown as two equal "None"s.
    assert "expert (absent) here" in error


def test_a_changed_weights_file_is_refused(tmp_path, small_graph):
    import torch

    from xlabench.agents.algorithm_config import hyperparameters_of
    from xlabench.agents.train import ENVIRONMENT, TrainingRun

    hyperparameters = hyperparameters_of("ppo")
    run = TrainingRun(
        None, "ppo", hyperparameters, ENVIRONMENT, ["dce"], 64, 2, 1.5, 3, small_graph, 1,
        weights={"layer.weight": torch.ones(2, 2)},
    )  # fmt: skip
    checkpoint = SeedCheckpoint(tmp_path, {"steps": 64})
    checkpoint.open()
    checkpoint.save(run)
    restored = checkpoint.load(3, hyperparameters, ENVIRONMENT)
    assert torch.equal(restored.weights["layer.weight"], torch.ones(2, 2)) and restored.seconds == 1.5
    assert checkpoint.load(4, hyperparameters, ENVIRONMENT) is None
    Path(tmp_path / "seed-3.policy.safetensors").write_bytes(b"not these weights")
    with pytest.raises(UserInputError, match="seed-3.policy.safetensors: missing, or not the file it was"):
        checkpoint.load(3, hyperparameters, ENVIRONMENT)


def test_a_directory_that_is_not_a_checkpoint_is_refused_and_removing_one_keeps_what_is_not_its_own(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(UserInputError, match="not a retrain checkpoint"):
        SeedCheckpoint(tmp_path, {"steps": 64}).open()
    with pytest.raises(UserInputError, match="notes.txt: a file, not a directory"):
        SeedCheckpoint(tmp_path / "notes.txt", {"steps": 64}).open()
    checkpoint = SeedCheckpoint(tmp_path / "checkpoint", {"steps": 64})
    checkpoint.open()
    (tmp_path / "checkpoint" / "notes.txt").write_text("mine")
    checkpoint.remove()
    assert [path.name for path in (tmp_path / "checkpoint").iterdir()] == ["notes.txt"]
