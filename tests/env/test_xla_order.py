"""XLA's order as the environment shows it: the cursor, the next action, and an episode that follows it."""

from __future__ import annotations

import numpy as np

from xlabench.env import PassOrderingEnv
from xlabench.env.xla_order import cursor, next_action, xla_order
from xlabench.graphs import resolve_graphs
from xlabench.xla import default_driver

ORDER = ("flatten-call-graph", "dce", "algsimp:fixed-point", "cse", "dce")
ACTIONS = ["flatten-call-graph", "dce", "algsimp:fixed-point", "algsimp", "cse", "reshape-mover"]


def test_the_cursor_moves_past_the_last_pass_matched_in_order() -> None:
    assert cursor(ORDER, []) == 0
    assert cursor(ORDER, ["flatten-call-graph", "dce"]) == 2
    # A pass the order does not have leaves the cursor where it is; one far ahead skips what lies between.
    assert cursor(ORDER, ["reshape-mover"]) == 0
    assert cursor(ORDER, ["cse"]) == 4
    # A skipped pass stays skipped: dce after cse is the order's last dce, not its first.
    assert cursor(ORDER, ["cse", "dce"]) == 5


def test_a_single_run_matches_its_pass_s_fixed_point_variant() -> None:
    assert cursor(ORDER, ["flatten-call-graph", "dce", "algsimp"]) == 3


def test_the_next_action_is_the_order_s_pass_at_the_cursor_then_stop() -> None:
    assert next_action(ORDER, [], ACTIONS) == ACTIONS.index("flatten-call-graph")
    assert next_action(ORDER, ["flatten-call-graph", "dce"], ACTIONS) == ACTIONS.index("algsimp:fixed-point")
    assert next_action(ORDER, list(ORDER), ACTIONS) == len(ACTIONS)  # the stop action


def test_following_xla_next_plays_xla_s_order_and_stops() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    driver = default_driver()
    env = PassOrderingEnv(graphs=[graph], driver=driver, max_steps=64, rewards=False, observe_xla_order=True)
    observation, _ = env.reset(options={"graph": graph.name})
    order = env.xla_order
    assert order == xla_order(driver, env.module, env.actions) and len(order) >= 3
    played, done = [], False
    while not done:
        assert observation["xla_progress"][0] == len(played) / len(order)
        action = int(np.argmax(observation["xla_next"]))
        assert observation["xla_next"].sum() == 1.0
        observation, _, terminated, truncated, _ = env.step(action)
        played.append(action)
        done = terminated or truncated
    assert [env.actions[a] for a in played[:-1]] == list(order) and played[-1] == env.stop_action
    assert env.observation_space.contains(observation)


def test_xla_s_order_is_one_compile_a_module_then_the_cache_s() -> None:
    [graph] = resolve_graphs("recurrent-gru-infer-l1-h128-s16-b8-f32")
    driver = default_driver()
    module = driver.load(graph.hlo_text(), graph.name)
    first = driver.default_pipeline_changes(module)
    cached = driver.calls["cached"]
    assert driver.default_pipeline_changes(module) == first
    assert driver.calls["cached"] == cached + 1
