"""Attribution: the pass that first makes two compilers part, on XLA's pipeline and on a replayed sequence."""

from __future__ import annotations

import pytest

from xlabench.graphs import resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.attribution import attribute_default, attribute_sequence
from xlabench.xla.pool import CompilerPool


@pytest.fixture(scope="module")
def reference():
    """A driver on the installed compiler."""
    return PassDriver()


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
