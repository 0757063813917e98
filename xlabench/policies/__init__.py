"""Trained policies as versioned, verified artifacts, and their greedy rollouts."""
