"""XLA's order as the environment shows it: the cursor, the next action, and an episode that follows it."""

from __future__ import annotations

import numpy as np
import pytest

from xlabench.agents.imitation import followed_order
from xlabench.env import PassOrderingEnv
from xlabench.env.xla_order import OrderCursor, xla_order, xla_order_and_claims
from xlabench.graphs import resolve_graphs
from xlabench.xla import default_driver
from xlabench.xla.compilers.pass_catalogue import base_pass

ORDER = ("flatten-call-graph", "dce", "algsimp:fixed-point", "cse", "dce")
ACTIONS = ["flatten-call-graph", "dce", "algsimp:fixed-point", "algsimp", "cse", "reshape-mover"]


def nothing_useless(action: str) -> bool:
    return False


def test_taking_xla_s_next_pass_moves_the_cursor_and_anything_else_does_not() -> None:
    cursor = OrderCursor(ORDER)
    assert cursor.observed(ACTIONS, nothing_useless) == (ACTIONS.index("flatten-call-graph"), 0, 5)
    cursor.step("flatten-call-graph", nothing_useless)
    # A pass the order has later (cse), or not at all (reshape-mover), leaves the cursor where it is:
    # XLA's next pass stays dce, not the one after cse.
    for other in ("cse", "reshape-mover", "algsimp:fixed-point"):
        cursor.step(other, nothing_useless)
        assert cursor.observed(ACTIONS, nothing_useless) == (ACTIONS.index("dce"), 1, 5)
    cursor.step("dce", nothing_useless)
    # A single run is its pass's fixed-point variant's run.
    cursor.step("algsimp", nothing_useless)
    assert cursor.observed(ACTIONS, nothing_useless)[:2] == (ACTIONS.index("cse"), 3)
    cursor.step("cse", nothing_useless)
    cursor.step("dce", nothing_useless)
    assert cursor.observed(ACTIONS, nothing_useless) == (len(ACTIONS), 5, 5)  # stop


def test_an_entry_that_can_do_nothing_here_is_passed_over() -> None:
    cursor = OrderCursor(ORDER)
    cursor.step("flatten-call-graph", nothing_useless)

    def dce_useless(action: str) -> bool:
        return action == "dce"

    # dce known to change nothing on this module: XLA's next move is algsimp; taking it passes both.
    assert cursor.observed(ACTIONS, dce_useless)[:2] == (ACTIONS.index("algsimp:fixed-point"), 2)
    cursor.step("algsimp:fixed-point", dce_useless)
    assert cursor.observed(ACTIONS, nothing_useless)[:2] == (ACTIONS.index("cse"), 3)
    # Every entry left useless: stop.
    assert cursor.observed(ACTIONS, lambda action: True) == (len(ACTIONS), 5, 5)


def test_a_claim_is_never_passed_over_though_it_changes_nothing() -> None:
    order = ("flatten-call-graph", "reduce-window-rewriter", "algsimp:fixed-point")
    cursor = OrderCursor(order, claims=frozenset({"reduce-window-rewriter"}))
    cursor.step("flatten-call-graph", nothing_useless)
    actions = [*ACTIONS, "reduce-window-rewriter"]
    # Known to change nothing here, and still XLA's next move: the count runs it again unless applied.
    assert cursor.observed(actions, lambda action: True)[:2] == (actions.index("reduce-window-rewriter"), 1)
    cursor.step("reduce-window-rewriter", lambda action: True)
    assert cursor.observed(actions, nothing_useless)[:2] == (actions.index("algsimp:fixed-point"), 2)


@pytest.mark.slow
def test_xla_s_order_followed_lands_on_xla_s_count_where_it_must_claim_passes() -> None:
    # A GRU training step: tree_reduction_rewriter's reduce-windows, which XLA never hands to
    # reduce-window-rewriter/resizer (they run before it), gain a reshape pair each when the count
    # runs those passes on the final module; XLA's order claims them at XLA's place instead.
    [graph] = resolve_graphs("recurrent-gru-train-l2-h96-s24-b8-bf16")
    driver = default_driver()
    env = PassOrderingEnv(graphs=[graph], driver=driver, max_steps=128, rewards=False, observe_xla_order=True)
    observation, _ = env.reset(options={"graph": graph.name})
    order, claims = xla_order_and_claims(driver, env.module, env.actions)
    assert claims == {"reduce-window-rewriter", "reduce-window-resizer"} and env.xla_claims == claims
    default = env.graph_start(graph.name).default_op_count
    played = followed_order(env, observation)
    assert claims <= set(played)
    assert driver.fair_op_count(env.module, env.sequence) <= default
    # Without the claims the same passes count above XLA's own count.
    assert driver.fair_op_count(env.module, [name for name in env.sequence if name not in claims]) > default


def test_where_xla_s_order_does_nothing_through_the_import_the_order_is_the_replay_s() -> None:
    # A TensorFlow cluster whose conditional has constant branches: XLA's constant_folding folds its
    # in-memory module to one op, the imported module not at all (12 ops); the replay of XLA's
    # pipeline folds it with simplify-conditional.
    [graph] = resolve_graphs("tf-cluster-conditional-const-branches")
    driver = default_driver()
    env = PassOrderingEnv(graphs=[graph], driver=driver, max_steps=64, rewards=False, observe_xla_order=True)
    observation, _ = env.reset(options={"graph": graph.name})
    in_memory = [name for _, name in driver.default_pipeline_changes(env.module)]
    assert "constant_folding" in in_memory and "simplify-conditional" not in in_memory
    assert [base_pass(name) for name in env.xla_order] == ["simplify-conditional"]
    followed_order(env, observation)
    assert driver.fair_op_count(env.module, env.sequence) == env.graph_start(graph.name).default_op_count == 1


def test_with_skip_taking_exactly_the_entry_after_xla_s_next_leaves_that_pass_out() -> None:
    order = ("flatten-call-graph", "dce", "algsimp:fixed-point", "cse", "reshape-mover")
    cursor = OrderCursor(order, skip=1)
    cursor.step("flatten-call-graph", nothing_useless)
    # Two entries ahead (cse), or the single run of the entry after (algsimp), leave nothing out: a
    # single run where XLA iterates is the policy's own move, not XLA's pass.
    for other in ("cse", "algsimp"):
        cursor.step(other, nothing_useless)
        assert cursor.observed(ACTIONS, nothing_useless)[:2] == (ACTIONS.index("dce"), 1)
    # algsimp:fixed-point as XLA runs it, where XLA's next is dce: dce is left out, cse is next.
    cursor.step("algsimp:fixed-point", nothing_useless)
    assert cursor.observed(ACTIONS, nothing_useless)[:2] == (ACTIONS.index("cse"), 3)
    # Entries useless here still count: cse is two entries past dce, though algsimp can do nothing now.
    cursor = OrderCursor(order, skip=1)
    cursor.step("flatten-call-graph", nothing_useless)
    cursor.step("cse", lambda action: action == "algsimp:fixed-point")
    assert cursor.observed(ACTIONS, nothing_useless)[:2] == (ACTIONS.index("dce"), 1)


def test_with_skip_a_claim_is_never_left_out() -> None:
    order = ("flatten-call-graph", "reduce-window-rewriter", "algsimp:fixed-point")
    actions = [*ACTIONS, "reduce-window-rewriter"]
    cursor = OrderCursor(order, claims=frozenset({"reduce-window-rewriter"}), skip=1)
    cursor.step("flatten-call-graph", nothing_useless)
    cursor.step("algsimp:fixed-point", nothing_useless)
    assert cursor.observed(actions, nothing_useless)[:2] == (actions.index("reduce-window-rewriter"), 1)


def test_following_xla_next_plays_xla_s_order_and_stops() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    driver = default_driver()
    env = PassOrderingEnv(graphs=[graph], driver=driver, max_steps=64, rewards=False, observe_xla_order=True)
    observation, _ = env.reset(options={"graph": graph.name})
    order = env.xla_order
    assert order == xla_order(driver, env.module, env.actions) and len(order) >= 3
    played, done = [], False
    while not done:
        assert 0.0 <= observation["xla_progress"][0] <= 1.0
        action = int(np.argmax(observation["xla_next"]))
        assert observation["xla_next"].sum() == 1.0
        observation, _, terminated, truncated, _ = env.step(action)
        played.append(action)
        done = terminated or truncated
    # In a fresh environment nothing is known useless yet: following xla_next plays the order itself.
    assert [env.actions[a] for a in played[:-1]] == list(order) and played[-1] == env.stop_action
    assert env.observation_space.contains(observation)


def test_leaving_a_pass_of_xla_s_order_out_moves_the_cursor_only_with_skip() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    driver = default_driver()
    shown = {}
    for skip in (0, 1):
        env = PassOrderingEnv(
            graphs=[graph],
            driver=driver,
            max_steps=64,
            rewards=False,
            observe_xla_order=True,
            xla_order_skip=skip,
        )
        observation, _ = env.reset(options={"graph": graph.name})
        order = env.xla_order
        # Follow XLA's order to its first entry whose next entry is another action, then take that one.
        index = next(i for i in range(1, len(order) - 1) if order[i + 1] != order[i])
        for name in order[:index]:
            observation, *_ = env.step(env.actions.index(name))
        assert env.actions[int(np.argmax(observation["xla_next"]))] == order[index]
        observation, *_ = env.step(env.actions.index(order[index + 1]))
        shown[skip] = (int(np.argmax(observation["xla_next"])), float(observation["xla_progress"][0]))
        left_out = env.actions.index(order[index])
        progress_past = (index + 2) / len(order)
    assert shown[0] == (left_out, pytest.approx(index / len(order)))  # waits at the pass left out
    assert shown[1][0] != left_out and shown[1][1] >= progress_past - 1e-6


def test_a_second_episode_passes_over_what_the_first_found_useless_and_ends_alike() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    env = PassOrderingEnv(graphs=[graph], max_steps=64, rewards=False, observe_xla_order=True)
    for episode in range(2):
        observation, _ = env.reset(options={"graph": graph.name})
        done, steps = False, 0
        while not done:
            action = int(np.argmax(observation["xla_next"]))
            if action != env.stop_action:
                assert env.action_masks()[action], (episode, env.actions[action])  # never a masked move
            observation, _, terminated, truncated, _ = env.step(action)
            steps += 1
            done = terminated or truncated
        assert terminated and not truncated
        if episode == 0:
            first_count, first_steps = env.fair_op_count, steps
    assert env.fair_op_count == first_count and steps <= first_steps


def test_xla_s_order_is_one_compile_a_module_then_the_cache_s() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    driver = default_driver()
    module = driver.load(graph.hlo_text(), graph.name)
    first = driver.default_pipeline_changes(module)
    cached = driver.calls["cached"]
    assert driver.default_pipeline_changes(module) == first
    assert driver.calls["cached"] == cached + 1
