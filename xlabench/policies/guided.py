"""Policy-guided search (`search:guided`): a policy's rollout, then local search from where it ended.

CompilerGym's leaderboard row "PPO + guided search", for users who will spend a few hundred compiler
calls on one graph: the policy's greedy rollout costs a call a pass (about 15 on the suite) and lands
near XLA's count; the rest of the budget climbs from its sequence with `local_search`'s edits, each
kept only if it lowers R and the outputs stay numerically no worse than XLA's default executable's.
"""

from __future__ import annotations

import threading
import time

from xlabench.graphs import Graph
from xlabench.policies.policy import Policy, rollout
from xlabench.search import SearchResult
from xlabench.search.strategies import DEFAULT_MAX_LENGTH, local_search
from xlabench.xla import PassDriver

DEFAULT_GUIDED_BUDGET = 200


def guided_search(
    policy: Policy,
    driver: PassDriver,
    graph: Graph,
    budget: int = DEFAULT_GUIDED_BUDGET,
    max_length: int = DEFAULT_MAX_LENGTH,
    cancel: threading.Event | None = None,
) -> SearchResult:
    """The policy's rollout on `graph`, improved by local search within `budget` compiler calls in all."""
    started = time.perf_counter()
    found = rollout(policy, driver, graph)
    left = budget - found.calls
    if left < 2 or found.module is None:
        return SearchResult("guided", found.sequence, found.op_count, found.calls,
                            time.perf_counter() - started, found.applied, found.module)  # fmt: skip
    module = driver.load(graph.hlo_text(), graph.name)
    actions = [name for name in policy.actions if driver.has_pass(name)]
    climbed = local_search(driver, module, actions, left, max_length, cancel, start=found)
    return SearchResult(
        "guided",
        climbed.sequence,
        climbed.op_count,
        found.calls + climbed.calls,
        time.perf_counter() - started,
        climbed.applied,
        climbed.module,
    )
