"""Evaluation of pass-ordering strategies against XLA's default pipeline (`xlabench eval`)."""

from xlabench.eval.evaluate import evaluate_graph, resolve_strategy, summarize

__all__ = ["evaluate_graph", "resolve_strategy", "summarize"]
