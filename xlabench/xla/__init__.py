"""The compiler boundary: real XLA passes from a jaxlib release, applied one at a time, isolated.

Public API: `HloModule`, `PassDriver` (and the default-driver shortcuts `apply_pass`,
`run_default_pipeline`, `run_required_passes`), `load_catalogue`, `Features`; `Compiler` and
`resolve_compiler` name the release (the installed one, or one added beside it).

The folders show the process boundary. `worker/` runs only inside compiler worker processes and is
the only code that imports jaxlib internals (`worker/adapter`); `shared/` is plain Python both sides
use; `compilers/`, `caches/`, `driver/` and `diagnosis/` are the caller's side. The names below are
imported on first use, so a worker process, which imports this package on its way to `worker/`,
loads none of the caller's side.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xlabench.xla.compilers.named_compilers import Compiler, resolve_compiler
    from xlabench.xla.compilers.pass_catalogue import PassCatalogue, PassInfo, load_catalogue
    from xlabench.xla.driver.features import Features
    from xlabench.xla.driver.hlo_module import HloModule
    from xlabench.xla.driver.pass_driver import (
        PassDriver,
        Step,
        apply_pass,
        default_driver,
        run_default_pipeline,
        run_required_passes,
    )

# Each public name, and the module that defines it.
_DEFINED_IN = {
    "Compiler": "xlabench.xla.compilers.named_compilers",
    "resolve_compiler": "xlabench.xla.compilers.named_compilers",
    "PassCatalogue": "xlabench.xla.compilers.pass_catalogue",
    "PassInfo": "xlabench.xla.compilers.pass_catalogue",
    "load_catalogue": "xlabench.xla.compilers.pass_catalogue",
    "Features": "xlabench.xla.driver.features",
    "HloModule": "xlabench.xla.driver.hlo_module",
    "PassDriver": "xlabench.xla.driver.pass_driver",
    "Step": "xlabench.xla.driver.pass_driver",
    "apply_pass": "xlabench.xla.driver.pass_driver",
    "default_driver": "xlabench.xla.driver.pass_driver",
    "run_default_pipeline": "xlabench.xla.driver.pass_driver",
    "run_required_passes": "xlabench.xla.driver.pass_driver",
}

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
    "resolve_compiler",
    "run_default_pipeline",
    "run_required_passes",
]
assert sorted(__all__) == sorted(_DEFINED_IN)


def __getattr__(name: str) -> Any:
    """Import a public name's module on first use (PEP 562)."""
    if name not in _DEFINED_IN:
        raise AttributeError(f"module 'xlabench.xla' has no attribute {name!r}")
    value = getattr(importlib.import_module(_DEFINED_IN[name]), name)
    globals()[name] = value
    return value
