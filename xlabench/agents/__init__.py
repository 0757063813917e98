"""Agents that learn to order XLA's passes: PPO and the paper's comparison, on stable-baselines3."""

from xlabench.agents.train import ALGORITHMS, HYPERPARAMETERS, TrainingRun, train

__all__ = ["ALGORITHMS", "HYPERPARAMETERS", "TrainingRun", "train"]
