"""The compiler boundary: real XLA passes from the installed jaxlib, applied one at a time, isolated.

Public API: `HloModule`, `PassDriver` (and the default-driver shortcuts `apply_pass`,
`run_default_pipeline`, `run_required_passes`), `load_catalogue`, `Features`. Only
`xlabench.xla.compiler` imports jaxlib internals, and only inside worker processes.
"""

from xlabench.xla.catalogue import PassCatalogue, PassInfo, load_catalogue
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
    "run_required_passes",
]
