"""Modules and passes as the environment sees them: `HloModule`, `PassDriver` and what they use.

The module record (`hlo_module`) and its features (`features`); the driver (`pass_driver`) over one
compiler's session (`compiler_session`, `module_loader`); sequences of passes (`pass_sequences`);
constants printed without values (`elided_constants`); executing and judging outputs (`execution`);
what `xlabench stats` measures of a module (`module_stats`).
"""
