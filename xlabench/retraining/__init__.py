"""Making a new policy version: train, choose a seed, evaluate on held-out graphs, write or refuse."""
