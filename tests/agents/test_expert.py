"""The expert a warm start imitates: XLA's effective order, where a policy resumes it, how it is improved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from xlabench.agents.expert import (
    expert_action,
    expert_order,
    following_where_free,
    improve_order,
    passes_worth_trying,
    previous_start,
    with_single_runs,
    with_tries,
)
from xlabench.agents.imitation import followed_order
from xlabench.agents.train import ENVIRONMENT
from xlabench.env import PassOrderingEnv
from xlabench.graphs import resolve_graphs
from xlabench.xla import HloModule, default_driver
from xlabench.xla.compilers.pass_catalogue import base_pass
from xlabench.xla.driver.execution import judge_sequence


def test_the_expert_resumes_xlas_order_after_a_wrong_step():
    actions = ["a", "b", "c", "d"]
    order = ["a", "b", "c", "b"]
    allowed = np.ones(5, dtype=bool)
    assert expert_action(order, [], allowed, actions) == 0
    assert expert_action(order, ["a", "b"], allowed, actions) == 2
    assert expert_action(order, ["b"], allowed, actions) == 0  # a was left out: do it now
    assert expert_action(order, ["a", "c"], allowed, actions) == 1  # b left out before c
    assert expert_action(order, ["a", "b", "c"], allowed, actions) == 1  # b again, after c
    assert expert_action(order, ["a", "d", "b", "c", "b"], allowed, actions) == 4  # all done: stop
    no_b = allowed.copy()
    no_b[1] = False  # b known to change nothing here: skip it
    assert expert_action(order, ["a"], no_b, actions) == 2


def test_tries_go_in_at_their_place_in_the_pipeline():
    actions = ["flatten", "normalize", "algsimp", "gather", "tree", "reshape", "scatter", "cse"]

    class Catalogue:
        def unmet_requirement(self, name, sequence):
            return "normalize" if name == "scatter" and "normalize" not in sequence else None

    orders = {
        "moe": ["normalize", "algsimp", "gather", "scatter", "cse"],
        "vit": ["algsimp", "tree", "reshape", "cse"],
        "gnn": ["flatten", "algsimp", "gather", "reshape", "algsimp", "scatter", "cse"],
    }
    assert passes_worth_trying(orders, 0.5) == ["algsimp", "cse", "gather", "reshape", "scatter"]
    tries = ["gather", "tree", "reshape", "scatter"]
    # Before the first pass that comes later in the pipeline; a second algsimp round is left as it is.
    assert with_tries(orders["moe"], tries, actions, Catalogue()) == [
        "normalize",
        "algsimp",
        "gather",
        "tree",
        "reshape",
        "scatter",
        "cse",
    ]
    assert with_tries(orders["gnn"], tries, actions, Catalogue()) == [
        "flatten",
        "algsimp",
        "gather",
        "tree",
        "reshape",
        "algsimp",
        "scatter",
        "cse",
    ]
    # scatter needs normalize earlier: not tried where the order lacks it.
    assert with_tries(orders["vit"], tries, actions, Catalogue()) == [
        "algsimp",
        "gather",
        "tree",
        "reshape",
        "cse",
    ]


def test_a_variant_that_changed_the_module_once_is_taken_as_its_single_run(small_graph):
    driver = default_driver()
    environment = ENVIRONMENT.replace(action_set="fixed-point-and-single")
    env = PassOrderingEnv(graphs=resolve_graphs(small_graph), driver=driver, **environment.to_json())

    def play(order: list[str]) -> tuple[str, list[int]]:
        env.reset(seed=0, options={"graph": small_graph})
        calls = [env.step(env.actions.index(name))[4]["calls"] for name in order]
        return env.module.fingerprint, calls

    env.reset(seed=0, options={"graph": small_graph})
    order = expert_order(driver, env)
    # Two more that change nothing: algsimp (single elsewhere in the order), reshape-mover (never).
    order += ["algsimp:fixed-point", "reshape-mover:fixed-point"]
    module, calls = play(order)
    cheap = with_single_runs({small_graph: order}, env)[small_graph]
    expected = [base_pass(name) if runs == 2 else name for name, runs in zip(order, calls, strict=True)]
    assert expected != order  # the GRU's algsimp, gather and tree-reduction loops change it once
    assert cheap == [*expected[:-2], "algsimp", "reshape-mover:fixed-point"]
    cheap_module, cheap_calls = play(cheap)
    assert cheap_module == module
    assert sum(cheap_calls) == sum(calls) - sum(runs == 2 for runs in calls)
    # Without single runs to choose, the orders stay as they are.
    variants_only = ENVIRONMENT.replace(action_set="fixed-point")
    fixed = PassOrderingEnv(graphs=resolve_graphs(small_graph), driver=driver, **variants_only.to_json())
    assert with_single_runs({small_graph: order}, fixed)[small_graph] == order


def test_improving_an_order_keeps_only_edits_that_lower_the_count():
    driver = default_driver()
    # log(exp(y)), negate(negate(y)) and a duplicated multiply: algsimp, then cse, is better.
    module = driver.load(HloModule.from_file(Path(__file__).parents[1] / "xla/data/redundant.hlo").text)
    start = driver.fair_op_count(driver.apply_pass(module, "algsimp"), ["algsimp"])
    order, count = improve_order(driver, module, ["algsimp"], ["algsimp", "cse"], budget=20, max_length=5)
    assert order == ["algsimp", "cse"] and count < start
    # Dropping either pass, or appending one more, would not lower the count: that is where it stops.
    assert improve_order(driver, module, order, ["algsimp", "cse"], budget=20, max_length=5) == (order, count)
    # No budget for even one count: the order stands.
    assert improve_order(driver, module, ["algsimp"], ["cse"], budget=0, max_length=5)[0] == ["algsimp"]


def test_improving_an_order_may_insert_a_pass_before_one_of_its_passes():
    driver = default_driver()
    module = driver.load(HloModule.from_file(Path(__file__).parents[1] / "xla/data/redundant.hlo").text)
    count = driver.fair_op_count(driver.apply_pass(module, "cse"), ["cse"])
    # Nothing to append: algsimp can only come in before cse, and that lowers the count.
    order, improved = improve_order(driver, module, ["cse"], [], 20, max_length=5, insertions=["algsimp"])
    assert order == ["algsimp", "cse"] and improved < count


def test_improving_an_order_judges_an_edit_ahead_of_float_normalization_by_its_numerics():
    driver = default_driver()
    text = (Path(__file__).parents[1] / "xla/data/redundant.hlo").read_text().replace("f32", "bf16")
    module = driver.load(text)
    order = ["cse", "float-normalization-bf16"]
    # In bf16, algsimp before float normalization folds log(exp(y)) to y in the narrow type: fewer ops,
    # and against the module lifted to f32 no worse than XLA's default order -- so it is kept.
    improved, count = improve_order(driver, module, order, [], 20, max_length=5, insertions=["algsimp"])
    assert improved.index("algsimp") < improved.index(
        "float-normalization-bf16"
    ) and count < driver.fair_op_count(
        driver.apply_pass(driver.apply_pass(module, "cse"), "float-normalization-bf16"), order
    )
    after = module
    for name in improved:
        after = driver.apply_pass(after, name)
    assert judge_sequence(module, after, improved, driver=driver)[0].problems == []


def test_the_version_before_is_where_the_warm_start_starts_only_where_it_beats_xlas_order():
    driver = default_driver()
    [graph] = resolve_graphs("tensorflow-cnn-infer-l1-d16-b8-f32")
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    observation, _ = env.reset(options={"graph": graph.name})
    order = followed_order(env, observation)
    count = driver.fair_op_count(env.module, order)
    module = env.graph_start(graph.name).module
    # XLA's pipeline adds ops to this frozen CNN (I 34, D 37); general@v2.0 inlined calls, no more.
    previous = ["call-inliner"]
    after = module
    for name in previous:
        after = driver.apply_pass(after, name)
    fewest = driver.fair_op_count(after, previous)
    assert fewest < count
    # What is shown is XLA's order without passes the version before never ran, as few as reach its count.
    start = previous_start(driver, module, order, count, previous, env)
    dropped = {base_pass(name) for name in order} - {base_pass(name) for name in start}
    assert dropped and not dropped & {base_pass(name) for name in previous}
    assert start == [name for name in order if base_pass(name) not in dropped]
    shown = module
    for name in start:
        shown = driver.apply_action(shown, name)[0]
    assert driver.fair_op_count(shown, start) <= fewest
    # Not where it counts no lower, nor where the environment has no such action.
    assert previous_start(driver, module, order, fewest, previous, env) == order
    assert previous_start(driver, module, order, count, [*previous, "no-such-pass"], env) == order


def _departures(driver, graph, sequence: list[str]) -> int:
    """How often `sequence`, played in a fresh environment, takes another pass than XLA's next."""
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    observation, _ = env.reset(seed=0, options={"graph": graph.name})
    departures = 0
    for name in sequence:
        action = env.actions.index(name)
        departures += int(np.argmax(observation["xla_next"])) != action
        observation, *_ = env.step(action)
    return departures


def test_a_found_sequence_is_shown_following_xla_wherever_that_costs_nothing():
    driver = default_driver()
    [graph] = resolve_graphs("tensorflow-cnn-infer-l1-d16-b8-f32")
    env = PassOrderingEnv(graphs=[graph], driver=driver, **ENVIRONMENT.to_json())
    module = env.graph_start(graph.name).module
    found = ["call-inliner"]  # 34 ops where XLA's pipeline ends on 37 (general@v2.0's sequence)
    shown = following_where_free(driver, env, graph.name, found)

    def count(sequence: list[str]) -> tuple[int, HloModule]:
        result = module
        for name in sequence:
            result, _ = driver.apply_action(result, name)
        return driver.fair_op_count(result, sequence), result

    assert count(shown)[0] <= count(found)[0]
    remaining = iter(shown)
    assert all(name in remaining for name in found)  # the sequence's own passes, in its order
    # XLA's first pass (flatten-call-graph) costs nothing here and is taken; its next ones cost ops.
    assert len(shown) > len(found)
    assert _departures(driver, graph, shown) <= _departures(driver, graph, found)
    assert judge_sequence(module, count(shown)[1], shown, driver=driver)[0].problems == []
    # A sequence with a pass the driver refuses is shown as it is.
    assert following_where_free(driver, env, graph.name, [*found, "no-such-pass"]) == [*found, "no-such-pass"]


@pytest.mark.slow
def test_an_edit_upstream_of_a_pass_it_leaves_with_nothing_to_do_is_still_judged():
    # On a conjugate-gradient loop, dropping while-loop-invariant-code-motion leaves a later pass of
    # XLA's order with nothing to do; judged by its count, the edit lands on XLA's own count (140)
    # where appending passes alone stops 4 ops above it.
    driver = default_driver()
    [graph] = resolve_graphs("control_flow-cg-n16-b4-plain-bf16")
    env = PassOrderingEnv(
        graphs=[graph], action_set=ENVIRONMENT.action_set, driver=driver, max_steps=128, rewards=False,
        observe_xla_order=True,
    )  # fmt: skip
    observation, _ = env.reset(options={"graph": graph.name})
    order = followed_order(env, observation)
    start = env.graph_start(graph.name)
    improved, count = improve_order(driver, start.module, order, sorted(set(order)), 100, 127)
    assert "while-loop-invariant-code-motion:fixed-point" in order
    assert "while-loop-invariant-code-motion:fixed-point" not in improved
    assert count <= start.default_op_count < driver.fair_op_count(env.module, order)
