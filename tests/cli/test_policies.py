"""`xlabench retrain` end to end on one small graph; `xlabench policies`; `xlabench eval` with the result."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.policies.conftest import SMALL_GRAPH
from xlabench.agents.train import ENVIRONMENT
from xlabench.cli import main
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.xla import default_driver


@pytest.mark.slow
def test_retrain_writes_a_version_that_eval_and_policies_use(policies_root, tmp_path, capsys):
    arguments = ["retrain", "--name", "tiny", "--graphs", SMALL_GRAPH, "--steps", "128", "--workers", "1",
                 "--eval-graphs", SMALL_GRAPH, "--logdir", str(tmp_path / "tb"),
                 "--set", "ent_coef=0.02"]  # fmt: skip
    assert main(arguments) == 0
    metadata = json.loads((policies_root / "tiny" / "v1.0" / "metadata.json").read_text())
    assert metadata["training"]["steps"] == 128 and metadata["algorithm"] == "ppo"
    assert metadata["hyperparameters"]["ent_coef"] == 0.02  # --set, as trained
    assert metadata["eval"][SMALL_GRAPH]["geomean_vs_default"] > 0
    # Evaluated by executing: the rollout's outputs were judged against XLA's default executable's.
    assert metadata["eval"][SMALL_GRAPH]["per_graph"][0]["runtime_ratio"] is not None
    assert any((tmp_path / "tb").rglob("events.out.tfevents.*"))  # TensorBoard logs

    out = tmp_path / "eval.json"
    capsys.readouterr()
    assert (
        main(["eval", "--policy", "tiny", "--graphs", SMALL_GRAPH, "--no-runtime", "--json", str(out)]) == 0
    )
    # Not executed, so not compared: the summary says so rather than "0 with outputs that differ".
    printed = capsys.readouterr().out
    assert "outputs not compared (--no-runtime)" in printed and "with outputs that differ" not in printed
    (row,) = json.loads(out.read_text())["graphs"]
    assert row["vs_default"] == row["D"] / row["R"]
    # Calls: every pass application (each run of a fixed-point variant) and the count at the end.
    driver = default_driver()
    graph = resolve_graphs(SMALL_GRAPH)[0]
    module, applications = driver.load(graph.hlo_text(), graph.name), 0
    for action in row["sequence"]:
        module, calls = driver.apply_action(module, action)
        applications += calls
    # ... one compile for XLA's order, when the policy observes it (the training default), and one
    # count a state past the end of that order (`retrain` writes the stop rule that counts them), but
    # the last state: its count is the final one.
    observing = int(ENVIRONMENT.observe_xla_order)
    assert metadata["rollout"] == {"stop": "lowest-past-xla-order"}
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0, options={"graph": graph.name})
    past_order = 0
    for action in row["sequence"][:-1]:
        observation, *_ = env.step(env.actions.index(action))
        past_order += int(np.argmax(observation["xla_next"])) == len(env.actions)
    assert row["calls"] == applications + 1 + observing + past_order
    assert driver.fair_op_count(module, row["sequence"]) == row["R"]
    assert json.loads(out.read_text())["policy"] == "tiny@v1.0"
    # The rollout is the one retrain evaluated.
    assert row["R"] == metadata["eval"][SMALL_GRAPH]["per_graph"][0]["R"]

    capsys.readouterr()
    assert main(["policies", "list"]) == 0 and "tiny@v1.0: ppo" in capsys.readouterr().out
    assert main(["policies", "list", "--markdown"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].endswith(f"| selected on | {SMALL_GRAPH} |")
    assert table[2].startswith("| tiny@v1.0 | ppo |")
    assert main(["policies", "show", "tiny"]) == 0 and "weights     sha256" in capsys.readouterr().out
    assert main(["retrain", "--name", "../x", "--graphs", SMALL_GRAPH]) == 2  # refused before training
    capsys.readouterr()
    assert main(["retrain", "--name", "tiny", "--graphs", SMALL_GRAPH, "--set", "entropy=0.1"]) == 2
    assert "ppo has no hyperparameter entropy" in capsys.readouterr().err


@pytest.mark.slow
def test_retrain_writes_nothing_when_outputs_are_worse_than_the_default(policies_root, monkeypatch, capsys):
    from xlabench.eval import evaluate
    from xlabench.xla.driver.execution import OutputsVerdict

    # As if the policy's executable computed output 0 less accurately than XLA's default executable.
    worse = OutputsVerdict(["output 0 (f32[8]): 3 of 8 elements differ, largest difference 0.5"], "test")
    monkeypatch.setattr(evaluate, "judge_outputs", lambda *arguments: worse)
    arguments = ["retrain", "--name", "tiny", "--graphs", SMALL_GRAPH, "--steps", "0", "--workers", "1",
                 "--eval-graphs", SMALL_GRAPH]  # fmt: skip
    assert main(arguments) == 1
    err = capsys.readouterr().err
    assert f"{SMALL_GRAPH}: output 0 (f32[8]): 3 of 8 elements differ" in err
    assert "tiny not written" in err
    assert not (policies_root / "tiny").exists()
