"""The pass catalogue: discovered from the installed XLA, classified, cached per jaxlib version."""

from __future__ import annotations

import json
import os

from xlabench.xla import catalogue
from xlabench.xla.cache import cache_directory

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


def test_log_parsing_rebuilds_nesting_and_ignores_fixed_point_iterations():
    tree = catalogue.parse_pipeline_log(SAMPLE_LOG)
    assert [node["name"] for node in tree] == ["outer", "late"]
    outer = tree[0]
    assert [child["name"] for child in outer["children"]] == ["first", "inner", "layout-assignment"]
    assert [child["name"] for child in outer["children"][1]["children"]] == ["algsimp", "dce"]


def test_classification_uses_first_run_and_counting_point():
    classified = catalogue.classify(catalogue.parse_pipeline_log(SAMPLE_LOG), "test")
    assert classified.passes["algsimp"].kind == "action"
    assert classified.passes["algsimp"].ancestors == ("outer", "inner")
    assert classified.passes["inner"].kind == "pipeline"
    # cse first runs after the counting point (layout-assignment): not an action there.
    assert classified.passes["cse"].kind == "required"
    assert classified.passes["copy-insertion"].kind == "required"
    disabled = classified.disabled_for_single_pass("algsimp")
    assert "algsimp" not in disabled and "inner" not in disabled and "copy-insertion" not in disabled
    assert {"dce", "first", "layout-assignment", "cse"} <= set(disabled)


def test_installed_pipeline_is_discovered_and_classified():
    found = catalogue.load_catalogue()
    actions = found.action_passes()
    for expected in ("algsimp", "cse", "dce", "reshape-mover", "constant_folding", "call-inliner"):
        assert expected in actions
    assert found.passes["layout-assignment"].kind == "required"
    assert found.passes["copy-insertion"].kind == "required"
    assert found.passes["gather_simplifier"].kind == "excluded"
    assert found.passes["gather_simplifier"].description  # excluded passes carry their reason
    assert "simplification" in found.passes["algsimp"].ancestors
    # Action passes are listed in pipeline order.
    positions = [found.passes[name].position for name in actions]
    assert positions == sorted(positions)


def test_catalogue_is_cached_per_jaxlib_version_and_survives_a_damaged_cache(monkeypatch):
    found = catalogue.load_catalogue()
    path = os.path.join(cache_directory(), f"catalogue-jaxlib-{found.jaxlib_version}.json")
    with open(path) as handle:
        assert json.load(handle)["jaxlib_version"] == found.jaxlib_version
    with open(path, "w") as handle:
        handle.write("{ not json")
    monkeypatch.setattr(catalogue, "_loaded", None)  # as a new process would start
    again = catalogue.load_catalogue()
    assert again.action_passes() == found.action_passes()
    with open(path) as handle:
        assert json.load(handle)["format"] == catalogue.CATALOGUE_FORMAT
