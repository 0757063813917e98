"""Smoke tests of `xlabench bench driver|fuzz|passes` on one small graph: each runs and prints its figures."""

from __future__ import annotations

import json

import pytest

from xlabench.cli import main

GRAPH = "recurrent-gru-infer-l1-h128-s16-b8-f32"


def _json_of(arguments: list[str], capsys) -> dict:
    assert main(arguments) == 0
    return json.loads(capsys.readouterr().out)


def test_bench_driver_prints_the_step_against_a_full_compile(capsys):
    report = _json_of(
        ["bench", "driver", GRAPH, "--rounds", "1", "--actions", "simplification", "--json"], capsys
    )
    assert report["graph"] == GRAPH and report["op_count"] > 0
    assert report["median_apply_pass_seconds"] > 0 and report["median_full_compile_seconds"] > 0
    assert report["ratio"] == report["median_apply_pass_seconds"] / report["median_full_compile_seconds"]
    # The compile a step stops (every pass off) is a compile: it costs a part of the full one.
    floor, full = report["median_stopped_compile_seconds"], report["median_full_compile_seconds"]
    assert 0 < floor < full and report["floor_ratio"] == floor / full
    assert "algsimp" in report["per_pass_median_seconds"]


def test_bench_fuzz_applies_random_passes_and_counts_crashes(capsys):
    arguments = ["bench", "fuzz", GRAPH, "--singles", "4", "--sequences", "2", "--length", "3",
                 "--workers", "1", "--json"]  # fmt: skip
    report = _json_of(arguments, capsys)
    assert report["modules"] == [GRAPH] and report["actions"] > 0
    assert len(report["passes_never_applied"]) < report["actions"]  # some passes did run


@pytest.mark.slow
def test_bench_passes_classifies_the_passes_it_runs(capsys):
    report = _json_of(
        ["bench", "passes", GRAPH, "--passes", "algsimp", "cse", "--workers", "1", "--json"], capsys
    )
    assert report["graphs"] == 1 and sorted(report["clean"]) == ["algsimp", "cse"] and report["failing"] == []
