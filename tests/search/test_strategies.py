"""Search baselines: budgets respected, fair counts, deterministic, XLA's order as a reference."""

from __future__ import annotations

import pytest

from xlabench.env.xla_order import xla_order
from xlabench.errors import UserInputError
from xlabench.graphs import resolve_graphs
from xlabench.search import beam_search, greedy_search, local_search, random_search
from xlabench.xla import HloModule, default_driver
from xlabench.xla.driver.execution import judge_sequence

ACTIONS = ["call-inliner", "algsimp", "cse", "dce", "simplify-while-loops", "tuple-simplifier"]


@pytest.fixture(scope="module")
def gru_module() -> HloModule:
    """A small suite graph: one GRU layer's inference (a while loop from lax.scan)."""
    graph = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")[0]
    return HloModule.from_text(graph.hlo_text(), source=graph.name)


def test_greedy_and_beam_improve_on_doing_nothing_within_budget(gru_module):
    driver = default_driver()
    unoptimized = driver.fair_op_count(gru_module)
    greedy = greedy_search(driver, gru_module, ACTIONS, budget=200, max_length=6)
    beam = beam_search(driver, gru_module, ACTIONS, budget=200, max_length=3, width=2)
    for result in (greedy, beam):
        assert result.op_count < unoptimized
        assert result.calls <= 200 and result.seconds > 0
        # The reported count is the sequence's fair count, reproducible from the sequence alone.
        module = gru_module
        for name in result.sequence:
            following = driver.apply_pass(module, name)
            assert following.fingerprint != module.fingerprint  # a pass that changes nothing is not taken
            module = following
        assert driver.fair_op_count(module, result.sequence) == result.op_count
    assert (
        beam_search(driver, gru_module, ACTIONS, budget=200, max_length=3, width=2).sequence == beam.sequence
    )
    # The depth beam reached: the levels it expanded, at least its sequence's length, at most max_length.
    assert len(beam.sequence) <= beam.depth <= 3 and greedy.depth is None
    shallow = beam_search(driver, gru_module, ACTIONS, budget=len(ACTIONS) + 2, max_length=3, width=2)
    assert shallow.depth == 1  # one level of len(ACTIONS) calls, then the budget is gone


def test_a_pass_that_changes_nothing_costs_one_call_and_is_not_taken(gru_module):
    driver = default_driver()
    # No cholesky, no rng on a GRU: both passes leave its module as it is.
    result = greedy_search(driver, gru_module, ["cholesky_expander", "rng-expander"], budget=50)
    assert (result.sequence, result.calls) == ([], 1 + 2)
    assert result.op_count == driver.fair_op_count(gru_module)


def test_random_search_is_seeded_and_a_tiny_budget_is_respected(gru_module):
    driver = default_driver()
    first = random_search(driver, gru_module, ACTIONS, budget=25, max_length=4, seed=3)
    again = random_search(driver, gru_module, ACTIONS, budget=25, max_length=4, seed=3)
    assert (first.sequence, first.op_count) == (again.sequence, again.op_count)
    assert first.calls <= 25
    with pytest.raises(UserInputError, match="budget"):
        greedy_search(driver, gru_module, ACTIONS, budget=0)


@pytest.mark.slow
def test_local_search_climbs_from_xlas_order_and_keeps_outputs_no_worse():
    driver = default_driver()
    graph = resolve_graphs("control_flow-cg-n16-b1-jacobi-f32")[0]
    module = driver.load(graph.hlo_text(), graph.name)
    actions = driver.catalogue.action_passes("all")
    start = module
    for name in xla_order(driver, module, actions):
        start = driver.apply_action(start, name)[0]
    from_xla = driver.fair_op_count(start, xla_order(driver, module, actions))
    result = local_search(driver, module, actions, budget=600)
    again = local_search(driver, module, actions, budget=600)
    assert (result.sequence, result.op_count) == (again.sequence, again.op_count)
    assert result.calls <= 600
    # On this CG loop an edit of XLA's order saves ops (103 -> 99 on jaxlib 0.10.2; XLA's own D is 100).
    assert result.op_count < from_xla
    after = module
    for name in result.sequence:
        after = driver.apply_action(after, name)[0]
    assert driver.fair_op_count(after, result.sequence) == result.op_count
    verdict, _ = judge_sequence(module, after, result.applied, driver=driver)
    assert verdict.problems == []


def test_an_edit_first_moves_a_simplifier_ahead_of_the_pass_that_expanded_the_module():
    from xlabench.search.strategies import _edits

    sequence = ("call-inliner", "float-normalization-bf16", "dce", "algsimp:fixed-point", "cse")
    # Op counts after each prefix: float normalization adds 300 (converts), inlining 5; algsimp and cse
    # remove some, dce nothing.
    counts = [100, 105, 405, 405, 380, 300]
    edits = _edits(sequence, ["algsimp"], max_length=30, counts=counts)
    # The largest addition first: algsimp, the nearest pass after it that removed ops, moved ahead of it;
    # then ahead of the inliner.
    assert edits[:2] == [
        (1, ("call-inliner", "algsimp:fixed-point", "float-normalization-bf16", "dce", "cse")),
        (0, ("algsimp:fixed-point", "call-inliner", "float-normalization-bf16", "dce", "cse")),
    ]
    # Without the counts, the cheapest edits come first, from the end: a loop by its single run.
    assert _edits(sequence, ["algsimp"], max_length=30)[0] == (3, (*sequence[:3], "algsimp", "cse"))


def test_a_start_is_not_charged_again_and_no_edit_overruns_what_is_left():
    from pathlib import Path

    from xlabench.search import SearchResult

    driver = default_driver()
    module = driver.load((Path(__file__).parents[1] / "xla/data/redundant.hlo").read_text())
    sequence = ["algsimp", "cse"]
    after = module
    for name in sequence:
        after = driver.apply_action(after, name)[0]
    count = driver.fair_op_count(after, sequence)
    # A rollout found this sequence and paid for its transitions (its `calls`).
    start = SearchResult("policy", sequence, count, 3, 0.0, list(sequence), after)
    # Two calls cannot pay for an edit (a pass, the count and the output check): none is begun.
    stayed = local_search(driver, module, ["algsimp", "cse", "dce"], budget=2, start=start)
    assert (stayed.sequence, stayed.op_count, stayed.calls) == (sequence, count, 0)
    climbed = local_search(driver, module, ["algsimp", "cse", "dce"], budget=30, start=start)
    assert climbed.op_count <= count and climbed.calls <= 30


def test_an_edit_that_leaves_a_later_pass_nothing_to_do_is_taken_without_it():
    from pathlib import Path

    from xlabench.search import SearchResult

    driver = default_driver()
    text = (Path(__file__).parents[1] / "xla/data/redundant.hlo").read_text().replace("f32", "bf16")
    module = driver.load(text)
    # Float normalization adds converts; algsimp ahead of it folds log(exp(y)) in bf16, after which the
    # algsimp at the end has nothing left to do: the edit is kept without it.
    sequence = ["float-normalization-bf16", "reshape-mover", "algsimp"]
    after = module
    for name in sequence:
        following = driver.apply_action(after, name)[0]
        assert following.fingerprint != after.fingerprint, name
        after = following
    count = driver.fair_op_count(after, sequence)
    start = SearchResult("policy", sequence, count, 3, 0.0, list(sequence), after)
    actions = ["algsimp", "cse", "float-normalization-bf16"]
    found = local_search(driver, module, actions, budget=60, start=start)
    assert found.op_count <= 9 < count and found.calls <= 60
    # Every pass of what it found changes the module where it runs, and the count is the sequence's.
    replayed = module
    for name in found.applied:
        following = driver.apply_action(replayed, name)[0]
        assert following.fingerprint != replayed.fingerprint, name
        replayed = following
    assert driver.fair_op_count(replayed, found.applied) == found.op_count
