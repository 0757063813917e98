"""JAX model families whose lowered training and inference steps make up the benchmark graph suite."""
