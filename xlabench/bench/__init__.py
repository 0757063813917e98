"""Figures of the pass driver and the environment, as library functions: speed, robustness, fidelity.

What `xlabench bench ...` prints. They measure rather than assert: machines are noisy, so timings are
interleaved in one run and reported as medians and ratios (docs/measurements.md keeps dated figures).
"""
