"""Evaluation of pass-ordering strategies against XLA's default pipeline (`xlabench eval`)."""

from xlabench.eval.evaluate import evaluate_graph, resolve_strategy
from xlabench.eval.evaluation_records import EvaluationRow, Summary, summarize

__all__ = ["EvaluationRow", "Summary", "evaluate_graph", "resolve_strategy", "summarize"]
