"""Stored baselines: each policy's per-graph results (`baselines/<policy>/`), and `xlabench baselines`."""
