"""Where an episode starts: a graph's raw module and the counts it is measured against."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from xlabench.graphs import Graph
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.driver.features import Features

COST_FIELDS = ("flops", "transcendentals", "bytes_accessed")


@dataclass(frozen=True)
class GraphStart:
    """What an episode on one graph starts from and is measured against."""

    graph: Graph
    module: HloModule  # the raw module, canonical form
    initial_op_count: int  # I
    default_op_count: int  # D: XLA's default pipeline, counted at the counting point
    unoptimized_op_count: int | None  # R0: the raw module's fair count (None: not counted, no rewards)
    cost: np.ndarray  # the raw module's cost analysis, in COST_FIELDS order


class GraphStarts:
    """Each graph's `GraphStart`, computed the first time an episode starts on it."""

    def __init__(self, driver: PassDriver, graphs: dict[str, Graph], count_unoptimized: bool) -> None:
        self.driver = driver
        self.graphs = graphs
        self.count_unoptimized = count_unoptimized  # R0 costs a required-only compile: rewards only
        self._starts: dict[str, GraphStart] = {}

    def get(self, name: str) -> GraphStart:
        """I, D, R0 and the raw module of graph `name`."""
        known = self._starts.get(name)
        if known is None:
            graph = self.graphs[name]
            module = self.driver.load(graph.hlo_text(), graph.name)
            features = self.driver.features(module)
            known = GraphStart(
                graph=graph,
                module=module,
                initial_op_count=features.op_count,
                default_op_count=self.driver.features(self.driver.run_default_pipeline(module)).op_count,
                unoptimized_op_count=self.driver.fair_op_count(module) if self.count_unoptimized else None,
                cost=cost_vector(features),
            )
            self._starts[name] = known
        return known


def cost_vector(features: Features) -> np.ndarray:
    """XLA's cost analysis of a module, in COST_FIELDS order."""
    return np.array([getattr(features.cost, name) for name in COST_FIELDS], dtype=np.float64)
