"""Search baselines over XLA pass sequences, scored by the fair count (see `strategies`)."""

from xlabench.search.strategies import (
    STRATEGIES,
    SearchResult,
    beam_search,
    greedy_search,
    local_search,
    random_search,
    replay_search,
)

__all__ = [
    "STRATEGIES",
    "SearchResult",
    "beam_search",
    "greedy_search",
    "local_search",
    "random_search",
    "replay_search",
]
