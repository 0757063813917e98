"""The pass catalogue: discovered from the installed XLA, classified, cached per jaxlib version."""

from __future__ import annotations

import json
import os

import pytest

from xlabench.errors import UserInputError
from xlabench.xla.compilers import pass_catalogue
from xlabench.xla.compilers.named_compilers import resolve_compiler

SAMPLE_LOG = """\
I0000 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: outer
I0000 hlo_pass_pipeline.cc:181]   HLO pass first
I0000 hlo_pass_pipeline.cc:176] HLO pass: first time: 1 us
I0000 hlo_pass_pipeline.cc:181]   HLO pass inner
I0000 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: inner
I0000 hlo_pass_pipeline.cc:181]   HLO pass algsimp
I0000 hlo_pass_pipeline.cc:181]   HLO pass dce
I0000 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: inner
I0000 hlo_pass_pipeline.cc:181]   HLO pass algsimp
I0000 hlo_pass_pipeline.cc:181]   HLO pass dce
I0000 hlo_pass_pipeline.cc:176] HLO pass: inner time: 9 us
I0000 hlo_pass_pipeline.cc:181]   HLO pass layout-assignment
I0000 hlo_pass_pipeline.cc:303] Running HLO pass pipeline on module m: late
I0000 hlo_pass_pipeline.cc:181]   HLO pass copy-insertion
I0000 hlo_pass_pipeline.cc:181]   HLO pass cse
"""


def test_log_parsing_rebuilds_nesting_and_marks_fixed_point_pipelines():
    tree = pass_catalogue.parse_pipeline_log(SAMPLE_LOG)
    assert [node["name"] for node in tree] == ["outer", "late"]
    outer = tree[0]
    assert [child["name"] for child in outer["children"]] == ["first", "inner", "layout-assignment"]
    inner = outer["children"][1]
    # Its second iteration neither repeats its children nor makes them appear twice.
    assert [child["name"] for child in inner["children"]] == ["algsimp", "dce"]
    assert inner.get("fixed_point") is True
    assert "fixed_point" not in outer and "fixed_point" not in tree[1]


def test_classification_uses_first_run_and_counting_point():
    classified = pass_catalogue.classify(pass_catalogue.parse_pipeline_log(SAMPLE_LOG), "test")
    assert classified.passes["algsimp"].kind == "simplification"
    # Any other pass before the counting point is orderable: an action the required-only pipeline keeps.
    assert classified.passes["first"].kind == "orderable"
    assert classified.action_passes() == ["first", "algsimp", "dce"]
    assert classified.action_passes("simplification") == ["algsimp", "dce"]
    assert classified.disabled_for_required_only() == ["algsimp", "dce"]
    assert classified.passes["layout-assignment"].kind == "required"
    assert classified.passes["algsimp"].ancestors == ("outer", "inner")
    assert classified.passes["inner"].kind == "pipeline"
    # cse first runs after the counting point (layout-assignment): not an action there.
    assert classified.passes["cse"].kind == "required"
    assert classified.passes["copy-insertion"].kind == "required"
    disabled = classified.disabled_for_single_pass("algsimp")
    assert "algsimp" not in disabled and "inner" not in disabled and "copy-insertion" not in disabled
    assert {"dce", "first", "layout-assignment", "cse"} <= set(disabled)


def test_instances_and_what_the_required_only_pipeline_runs_after_a_sequence():
    tree = [
        {
            "name": "outer",
            "children": [
                {"name": "expander"},
                {"name": "inner", "fixed_point": True, "children": [{"name": "dce"}, {"name": "expander"}]},
                {"name": "expander"},
                {"name": "normalizer"},
                {"name": "layout-assignment"},
                {"name": "normalizer"},
                {"name": "copy-insertion"},
            ],
        }
    ]
    classified = pass_catalogue.classify(tree, "test")
    # Every time a pass appears before the counting point is an instance; the first is its name.
    every_instance = ("expander", "expander@outer/inner#1", "expander@outer#2")
    assert classified.passes["expander"].instances == every_instance
    assert classified.passes["normalizer"].instances == ("normalizer",)
    assert classified.passes["copy-insertion"].instances == ()
    # An orderable pass runs again after a sequence unless the sequence applied every instance.
    assert classified.disabled_for_required_only() == ["dce"]
    assert classified.disabled_for_required_only(["normalizer", "expander"]) == ["dce", "normalizer"]
    assert classified.disabled_for_required_only(every_instance) == ["dce", "expander"]
    # Required passes always run, whatever the sequence claims to have applied.
    assert classified.disabled_for_required_only(["layout-assignment", "copy-insertion"]) == ["dce"]


def test_installed_pipeline_is_discovered_and_classified():
    found = pass_catalogue.load_catalogue()
    actions = found.action_passes()
    simplifications = found.action_passes("simplification")
    for expected in ("algsimp", "cse", "dce", "reshape-mover", "constant_folding", "call-inliner"):
        assert expected in simplifications
    # `all` adds the expanders, normalizers and canonicalizers that apply cleanly on their own.
    for expected in ("flatten-call-graph", "batchnorm_expander", "float-normalization-bf16"):
        assert expected in actions and expected not in simplifications
    assert set(simplifications) < set(actions)
    assert found.passes["layout-assignment"].kind == "required"
    assert found.passes["copy-insertion"].kind == "required"
    # gather_simplifier is an action that needs batched_gather_scatter_normalizer earlier (XLA bug).
    gather = found.passes["gather_simplifier"]
    assert gather.kind == "orderable" and gather.name in actions and gather.description
    normalizer = "batched_gather_scatter_normalizer"
    assert found.unmet_requirement("gather_simplifier", ["algsimp"]) == normalizer
    assert found.unmet_requirement("gather_simplifier", [normalizer, "algsimp@x#1"]) is None
    assert found.unmet_requirement("algsimp", []) is None and normalizer in found.requirements()
    with pytest.raises(UserInputError, match="unknown action set"):
        found.action_passes("everything")
    assert "simplification" in found.passes["algsimp"].ancestors
    # Action passes are listed in pipeline order.
    positions = [found.passes[name].position for name in actions]
    assert positions == sorted(positions)


def test_catalogue_is_cached_per_compiler_build_and_survives_a_damaged_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))  # the file is damaged below: not the kept cache
    monkeypatch.setattr(pass_catalogue, "_loaded", {})
    found = pass_catalogue.load_catalogue()
    path = pass_catalogue.catalogue_path(resolve_compiler())
    assert os.path.dirname(path) == str(tmp_path) and found.jaxlib_version in os.path.basename(path)
    with open(path) as handle:
        assert json.load(handle)["jaxlib_version"] == found.jaxlib_version
    with open(path, "w") as handle:
        handle.write("{ not json")
    monkeypatch.setattr(pass_catalogue, "_loaded", {})  # as a new process would start
    again = pass_catalogue.load_catalogue()
    assert again.action_passes() == found.action_passes()
    with open(path) as handle:
        assert json.load(handle)["format"] == pass_catalogue.CATALOGUE_FORMAT


def test_fixed_point_action_set_takes_the_variant_of_every_pass_xla_iterates():
    found = pass_catalogue.load_catalogue()
    single, fixed = found.action_passes(), found.action_passes("fixed-point")
    assert len(fixed) == len(single)
    # algsimp and reshape-mover first run in XLA's fixed-point `simplification` pipeline; cse does not.
    assert "reshape-mover:fixed-point" in fixed and "reshape-mover" not in fixed
    assert "algsimp:fixed-point" in fixed and "cse" in fixed
    assert found.fixed_point_variant("cse") is None
    assert found.get("algsimp:fixed-point") is found.passes["algsimp"]
    assert found.action_for("reshape-mover", fixed) == "reshape-mover:fixed-point"
    assert found.action_for("reshape-mover", single) == "reshape-mover"
    # Both: each iterated pass's single run comes just before its variant; XLA's run is the variant's.
    both = found.action_passes("fixed-point-and-single")
    assert [name for name in both if name not in fixed] == [name for name in single if name not in fixed]
    at = both.index("reshape-mover")
    assert both[at + 1] == "reshape-mover:fixed-point" and both.count("cse") == 1
    assert found.action_for("reshape-mover", both) == "reshape-mover:fixed-point"
    # A variant keeps its pass's requirement and counts as its pass for the required-only pipeline.
    normalizer = "batched_gather_scatter_normalizer"
    assert found.unmet_requirement("gather_simplifier:fixed-point", []) == normalizer
    assert found.disabled_for_required_only(["algsimp:fixed-point"]) == found.disabled_for_required_only(
        ["algsimp"]
    )


def test_what_runs_right_after_a_pass_is_read_from_the_tree_with_the_disabled_passes_left_out():
    tree = [
        {
            "name": "outer",
            "children": [
                {"name": "expander"},
                {"name": "inner", "fixed_point": True, "children": [{"name": "dce"}, {"name": "algsimp"}]},
                {"name": "expander"},
                {"name": "layout-assignment"},
                {"name": "copy-insertion"},
            ],
        }
    ]
    classified = pass_catalogue.classify(tree, "test")
    off = ["dce", "algsimp", "layout-assignment"]
    assert classified.successors("expander", ("outer",), off) == ["copy-insertion", "inner"]
    # The same pass twice in a row: the first run is followed by the second.
    assert classified.successors("expander", ("outer",), [*off, "inner"]) == ["copy-insertion", "expander"]
    assert classified.successors("algsimp", ("outer", "inner"), ["dce"]) == ["pipeline-end"]
    assert classified.successors("dce", ("outer", "inner"), []) == ["algsimp"]
    assert classified.successors("algsimp", ("elsewhere",), []) == []


def test_scatter_simplifier_runs_again_after_a_pass_that_feeds_it():
    # select_and_scatter_expander makes scatters the CPU emitter refuses until scatter_simplifier ran.
    found = pass_catalogue.load_catalogue()
    simplifier, expander = "scatter_simplifier", "select_and_scatter_expander"
    assert simplifier in found.disabled_for_required_only([expander, simplifier])  # XLA's order
    assert simplifier not in found.disabled_for_required_only([simplifier])  # the expander still runs
    assert simplifier not in found.disabled_for_required_only([simplifier, expander])  # applied after it
