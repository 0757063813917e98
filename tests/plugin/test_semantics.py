"""The semantics check's parts: covering examples, a run on a real graph, the reproducer a failure leaves."""

from __future__ import annotations

import collections
import json

import pytest

from tests.graphs.conftest import smallest_graphs
from xlabench.cli import main
from xlabench.graphs import resolve_graphs
from xlabench.plugin.semantics import (
    Outcome,
    SemanticsCheck,
    action_passes,
    covering_sequences,
    semantics_graphs,
)
from xlabench.xla import default_driver
from xlabench.xla.driver.execution import judge_sequence


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
    graph = smallest_graphs("mlp_mixer")[0]
    check = SemanticsCheck(default_driver())
    outcome = check.run(graph, ["algsimp", "cse"])
    assert outcome.applied == ["algsimp", "cse"] and outcome.problems == []  # XLA is right here
    # Stand in for a miscompile (none is known on jaxlib 0.10.2): the reproducer is what a real one leaves.
    failed = Outcome(outcome.applied, ["output 0: 3 of 8 elements differ"], seed=2, signed=True)
    check.last_failure = (graph, failed)
    directory = check.save_reproducer(tmp_path)
    details = json.loads((directory / "reproducer.json").read_text())
    assert details["sequence"] == ["algsimp", "cse"] and details["jaxlib"] == check.driver.jaxlib_version
    assert details["inputs"] == {"seed": 2, "signed": True}  # the example's own input set
    assert (directory / "passes.txt").read_text().split() == ["algsimp", "cse"]
    replay = details["replay"].split()[1:]
    assert replay[-3:] == ["--input-seed", "2", "--signed-inputs"]
    replay[replay.index("-o") + 1] = str(tmp_path / "out.hlo")
    assert main(replay) == 0
    assert "outputs: every buffer" in capsys.readouterr().out


def test_the_property_draws_bf16_and_training_graphs_and_counts_only_what_xla_applied():
    graphs = semantics_graphs()
    dtypes = {graph.config.get("dtype") for graph in graphs}
    assert {"bf16", "f32"} <= dtypes
    assert any("train" in graph.name for graph in graphs if graph.config.get("dtype") == "bf16")
    check = SemanticsCheck(default_driver())
    # gather_simplifier before its normalizer is masked (not run); what XLA ran is what counts.
    outcome = check.run(
        smallest_graphs("gnn")[0], ["gather_simplifier", "algsimp", "cse"], seed=1, signed=True
    )
    assert outcome.applied == ["algsimp", "cse"] and outcome.problems == []
    assert check.coverage == collections.Counter(outcome.applied)


SUITE = "from xlabench.plugin.suite import test_known_miscompile  # noqa: F401\n"


@pytest.mark.slow
def test_a_stored_miscompile_is_pinned_to_its_jaxlib(pytester, tmp_path):
    graph = smallest_graphs("mlp_mixer")[0]
    check = SemanticsCheck(default_driver())
    outcome = check.run(graph, ["algsimp", "cse"])
    # Stand in for a miscompile (none is known on jaxlib 0.10.2), stored as a user keeps a real one.
    check.last_failure = (graph, Outcome(outcome.applied, ["output 0: 3 of 8 elements differ"]))
    directory = check.save_reproducer(tmp_path / "baselines" / "miscompiles")
    pytester.makepyfile(test_suite=SUITE)
    options = ["-p", "no:cacheprovider", "--xlabench-baselines", str(tmp_path / "baselines")]
    # On the jaxlib it is pinned to, a reproducer whose outputs match is stale, not a pass.
    result = pytester.runpytest_subprocess(*options)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*outputs match on jaxlib 0.10.2*the reproducer does not reproduce*"])
    # Pinned to another jaxlib, outputs that match here mean this jaxlib fixed it.
    details_file = directory / "reproducer.json"
    details_file.write_text(details_file.read_text().replace(check.driver.jaxlib_version, "0.0.1"))
    pytester.runpytest_subprocess(*options).assert_outcomes(passed=1)
    details_file.write_text("{")
    result = pytester.runpytest_subprocess(*options)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([f"*{details_file}: not a reproducer xlabench wrote*"])


def test_inputs_outside_the_programs_domain_are_flagged_not_failed():
    # Signed inputs give ResNet negative variances: the unsimplified program takes square roots of them
    # and computes NaN where XLA's default pipeline, assuming finite arithmetic, does not.
    check = SemanticsCheck(default_driver())
    outcome = check.run(resolve_graphs("resnet-infer-n111-w8-i32-b2-bf16")[0], ["async-collective-replacer"],
                        seed=0, signed=True)  # fmt: skip
    assert outcome.flagged and outcome.problems == [] and check.flagged == 1
    # The same inputs without signs stay in the domain: compared, and equal.
    outcome = check.run(resolve_graphs("resnet-infer-n111-w8-i32-b2-bf16")[0], ["async-collective-replacer"])
    assert not outcome.flagged and outcome.problems == []


@pytest.mark.slow
def test_a_sequence_is_held_to_the_unoptimized_program_where_that_is_already_less_accurate():
    # gpt2-l1-d128 bf16: the unoptimized program's loss is 7x further from the f32 reference than XLA's
    # default's (its algsimp removes bf16 round trips), so a no-op pass cannot be judged against the
    # default; against the program it started from it is exact.
    driver = default_driver()
    [graph] = resolve_graphs("gpt2-l1-d128-h4-s64-b2-bf16")
    module = driver.load(graph.hlo_text(), graph.name)
    against_default, _ = judge_sequence(module, module, [], driver=driver)
    assert against_default.problems  # what the fallback is for
    check = SemanticsCheck(driver, known=[])
    outcome = check.run(graph, ["dce"], seed=0)
    assert outcome.applied == ["dce"] and outcome.problems == [] and not outcome.flagged
