"""Attribution: the pass that first makes two compilers part, on XLA's pipeline and on a replayed sequence."""

from __future__ import annotations

import pytest

from xlabench.graphs import resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.attribution import (
    PassRun,
    PipelineRuns,
    attribute_default,
    attribute_sequence,
    first_pipeline_difference,
)


@pytest.fixture(scope="module")
def reference():
    """A driver on the installed compiler."""
    return PassDriver()


def runs(*entries: tuple[str, int, str, str]) -> PipelineRuns:
    """A pipeline on module "m0": (pipeline, round, pass, fingerprint after) per run, k counted."""
    counted: dict[tuple[str, int, str], int] = {}
    listed = []
    for pipeline, round_, pass_name, after in entries:
        counted[pipeline, round_, pass_name] = counted.get((pipeline, round_, pass_name), 0) + 1
        listed.append((PassRun(pipeline, round_, pass_name, counted[pipeline, round_, pass_name]), after))
    return PipelineRuns("m0", listed)


def test_the_first_run_that_leaves_the_module_different_is_named_not_the_first_in_pipeline_order():
    # Round 1: algsimp changes nothing on either; reshape-mover changes the module only on head. Round
    # 2 (head only) has algsimp change it too. Ordered by pipeline position, algsimp would come first.
    base = runs(("simplification", 1, "algsimp", "m0"), ("simplification", 1, "reshape-mover", "m0"))
    head = runs(
        ("simplification", 1, "algsimp", "m0"),
        ("simplification", 1, "reshape-mover", "m1"),
        ("simplification", 2, "algsimp", "m2"),
        ("simplification", 2, "reshape-mover", "m2"),
    )
    found = first_pipeline_difference(base, head)
    assert found is not None and found.pass_name == "reshape-mover" and found.position == 1
    assert "the same module in, another out" in found.effect


def test_a_run_only_one_compiler_makes_is_passed_over_when_it_changes_nothing():
    base = runs(("p", 1, "cse", "m1"), ("p", 1, "dce", "m2"))
    head = runs(("p", 1, "new-pass", "m0"), ("p", 1, "cse", "m1"), ("p", 1, "dce", "m2"))
    assert first_pipeline_difference(base, head) is None
    changing = runs(("p", 1, "new-pass", "m5"), ("p", 1, "cse", "m6"), ("p", 1, "dce", "m7"))
    found = first_pipeline_difference(base, changing)
    assert found is not None and found.pass_name == "new-pass"
    assert "changes the module on head; the other compiler does not run it there" in found.effect
    assert first_pipeline_difference(base, runs(("p", 1, "cse", "m1"))) is not None  # head stops early
    # Two no-ops at once, then the same change under run numbers that no longer line up.
    base = runs(("p", 1, "cse", "m0"), ("p", 1, "algsimp", "m1"))
    head = runs(("p", 1, "algsimp", "m0"), ("p", 1, "cse", "m0"), ("p", 1, "algsimp", "m1"))
    assert first_pipeline_difference(base, head) is None
    # Different runs with the same output (a renamed pass) are not a difference either.
    renamed = runs(("p", 1, "new-name", "m1"))
    assert first_pipeline_difference(runs(("p", 1, "old-name", "m1")), renamed) is None


def test_a_pass_turned_off_is_named_as_where_the_default_pipelines_part(reference, redundant_module):
    changed = PassDriver(disabled_passes=["algsimp"])
    found = attribute_default(reference, changed, redundant_module.text, "redundant.hlo")
    assert found is not None and found.pass_name == "algsimp" and found.where == "default pipeline"
    assert "changes the module on base" in found.describe()
    assert attribute_default(reference, PassDriver(), redundant_module.text, "redundant.hlo") is None


def test_a_replayed_sequence_parts_at_the_step_whose_pass_changed(reference, redundant_module):
    changed = PassDriver(disabled_passes=["cse"])
    found = attribute_sequence(
        reference, changed, redundant_module.text, "redundant.hlo", ["algsimp", "cse", "dce"]
    )
    assert found is not None and (found.where, found.pass_name, found.position) == ("sequence", "cse", 1)
    same = attribute_sequence(
        reference, PassDriver(), redundant_module.text, "redundant.hlo", ["algsimp", "cse"]
    )
    assert same is None


@pytest.mark.slow
def test_the_previous_release_names_the_pass_that_moved_a_suite_graph(reference, second_compiler):
    # jaxlib 0.10.1 runs tree_reduction_rewriter twice in its simplification pipeline, 0.10.2 once:
    # on this BERT graph XLA's default counts 232 ops on 0.10.1 and 216 on 0.10.2.
    graph = resolve_graphs("bert-infer-l1-d64-h2-s32-b2-f32")[0]
    pool = CompilerPool(compiler=second_compiler)
    try:
        previous = PassDriver(pool=pool)
        found = attribute_default(previous, reference, graph.hlo_text(), graph.name)
        assert found is not None and found.pass_name == "tree_reduction_rewriter"
        assert found.pipeline == "simplification" and "on base" in found.effect
    finally:
        pool.close()
