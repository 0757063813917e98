"""The compiler boundary: real XLA passes from a jaxlib release, applied one at a time, isolated.

Public API: `HloModule`, `PassDriver` (and the default-driver shortcuts `apply_pass`,
`run_default_pipeline`, `run_required_passes`), `load_catalogue`, `Features`; `Compiler` and
`resolve_compiler` name the release (the installed one, or one added beside it). Only
`xlabench.xla.adapter` imports jaxlib internals, and only inside worker processes.
"""

from xlabench.xla.catalogue import PassCatalogue, PassInfo, load_catalogue
from xlabench.xla.compilers import Compiler, resolve_compiler
from xlabench.xla.driver import (
    PassDriver,
    Step,
    apply_pass,
    default_driver,
    run_default_pipeline,
    run_required_passes,
)
from xlabench.xla.features import Features
from xlabench.xla.module import HloModule

__all__ = [
    "Compiler",
    "Features",
    "HloModule",
    "PassCatalogue",
    "PassDriver",
    "PassInfo",
    "Step",
    "apply_pass",
    "default_driver",
    "load_catalogue",
    "run_default_pipeline",
    "resolve_compiler",
    "run_required_passes",
]
