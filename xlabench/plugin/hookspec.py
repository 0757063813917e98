"""Hooks the xlabench pytest plugin calls, for a user's `conftest.py` or plugin (pytest-benchmark's model).

Implement them as pytest hooks (`def pytest_xlabench_add_graphs(config): ...` in a conftest.py); they are
registered with pytest by `xlabench.plugin.plugin.pytest_addhooks`. docs/plugin.md, "Hooks".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pluggy
import pytest

if TYPE_CHECKING:
    from xlabench.baselines.baseline_diff import Tolerances
    from xlabench.graphs import Graph
    from xlabench.plugin.gates import Verdict

hookspec = pluggy.HookspecMarker("pytest")


@hookspec
def pytest_xlabench_add_graphs(config: pytest.Config) -> list[Graph] | None:
    """Graphs to gate besides the suite's (or `--xlabench-graphs`'), each with every policy.

    Return `Graph` records, e.g. `resolve_graphs("my_models/")` or `[load_user_file(path)]`. They are
    judged as a user's graphs are: every gate, and the baseline where one is stored. Called once per
    process, at collection.
    """


@hookspec(firstresult=True)
def pytest_xlabench_gate_tolerances(graph: Graph, policy: str, tolerances: Tolerances) -> Tolerances | None:
    """The tolerances one gate (graph x policy label) is judged with; None keeps `tolerances` (the
    session's, from the options). The first non-None answer is used, e.g.
    `dataclasses.replace(tolerances, op_count=0.10)` for a graph known to be hard."""


@hookspec
def pytest_xlabench_judged(verdict: Verdict, config: pytest.Config) -> None:
    """Receive each gate's verdict as it is judged (in the process that ran the gate: an xdist worker
    under `-n`): its graph, policy, counts, runtime ratio, failures. For a dashboard or a log."""
