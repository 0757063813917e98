"""The benchmark graph suite: model configs, lowering to HLO, storage, and the loader every stage uses."""

from xlabench.graphs.loader import Graph, resolve_graphs

__all__ = ["Graph", "resolve_graphs"]
