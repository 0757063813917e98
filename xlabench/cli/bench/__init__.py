"""`xlabench bench ...`: benchmark commands that print figures (speed, fidelity, robustness), never assert."""
