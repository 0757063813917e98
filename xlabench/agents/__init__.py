"""Agents that learn to order XLA's passes: PPO and the paper's comparison, on stable-baselines3."""
