"""Tests of the benchmark graph suite (xlabench.graphs and xlabench.models)."""
