"""xlabench: benchmark and regression suite for RL-driven pass ordering in XLA."""

__version__ = "0.1.0"
