"""The pytest plugin: graphs x policies gated against XLA's default pipeline and `baselines/`, in tiers."""
