"""The pytest plugin: every graph x every policy gated against XLA's default pipeline and `baselines/`."""
