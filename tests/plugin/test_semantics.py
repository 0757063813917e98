"""The semantics check's parts: covering examples, a run on a real graph, the reproducer a failure leaves."""

from __future__ import annotations

import json

from xlabench.cli import main
from xlabench.plugin.semantics import (
    Outcome,
    SemanticsCheck,
    action_passes,
    covering_sequences,
    small_graphs,
)
from xlabench.xla import default_driver


def test_covering_sequences_run_every_action_with_its_requirement_first():
    driver = default_driver()
    actions = action_passes(driver)
    sequences = covering_sequences(driver, actions)
    assert set(actions) <= {action for sequence in sequences for action in sequence}
    assert all(1 <= len(sequence) <= 30 for sequence in sequences)
    for sequence in sequences:
        for index, action in enumerate(sequence):
            assert driver.catalogue.unmet_requirement(action, sequence[:index]) is None


def test_a_failing_example_is_saved_as_a_reproducer_that_xlabench_apply_replays(tmp_path, capsys):
    graph = small_graphs("mlp_mixer")[0]
    check = SemanticsCheck(default_driver())
    outcome = check.run(graph, ["algsimp", "cse"])
    assert outcome.applied == ["algsimp", "cse"] and outcome.problems == []  # XLA is right here
    # Stand in for a miscompile (none is known on jaxlib 0.10.2): the reproducer is what a real one leaves.
    check.last_failure = (graph, Outcome(outcome.applied, ["output 0: 3 of 8 elements differ"]))
    directory = check.save_reproducer(tmp_path)
    details = json.loads((directory / "reproducer.json").read_text())
    assert details["sequence"] == ["algsimp", "cse"] and details["jaxlib"] == check.driver.jaxlib_version
    assert (directory / "passes.txt").read_text().split() == ["algsimp", "cse"]
    replay = details["replay"].split()[1:]
    replay[replay.index("-o") + 1] = str(tmp_path / "out.hlo")
    assert main(replay) == 0
    assert "every buffer matches" in capsys.readouterr().out
