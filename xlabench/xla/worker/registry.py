"""What a compiler worker may run: the registry of functions, by name, a caller can ask for.

Runs only inside isolated worker processes (`python -m xlabench.xla.worker`). The pool
(`xlabench.xla.compilers.worker_pool`) names a function of `REGISTRY` and its arguments; a name not in
it is refused, so a request can never reach any other code of the worker. The jobs live beside it:
module text in and out of XLA (`module_text`), stopped compiles and their dumps (`stopped_compiles`),
single-pass compiles and pipeline runs (`pass_runs`), features and cost (`module_analysis`),
executables and timing (`executable_timing`); jaxlib itself only in `adapter`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from xlabench.xla.worker import (
    adapter,
    executable_timing,
    module_analysis,
    module_text,
    pass_runs,
    stopped_compiles,
)


def jaxlib_version() -> str:
    """Return the version of the jaxlib that provides the compiler."""
    return adapter.jaxlib_version()


def discover_pipeline() -> str:
    """Fully compile the probe module; with TF_CPP_VMODULE=hlo_pass_pipeline=1 stderr shows the pipeline."""
    module_text.compile_text(adapter.probe_module_text(), {})
    return jaxlib_version()


def probe_build() -> dict[str, str]:
    """Compile the probe module (XLA's options in effect, jax lowering it): the jaxlib version and the
    supported release whose API it has. What `xlabench compilers add` asks a new compiler."""
    module_text.compile_text(adapter.probe_module_text(), {})
    return {"jaxlib": jaxlib_version(), "api": adapter.api_release()}


# Every function a worker serves, under the name a caller asks for it by.
REGISTRY: dict[str, Callable[..., Any]] = {
    "jaxlib_version": jaxlib_version,
    "discover_pipeline": discover_pipeline,
    "probe_build": probe_build,
    "describe": module_analysis.describe,
    "features": module_analysis.features,
    "parameter_specs": module_analysis.parameter_specs,
    "full_text": module_text.full_text,
    "run_pass": pass_runs.run_pass,
    "run_pipeline_to_point": pass_runs.run_pipeline_to_point,
    "pipeline_changes": pass_runs.pipeline_changes,
    "pipeline_fingerprints": pass_runs.pipeline_fingerprints,
    "pipeline_states": pass_runs.pipeline_states,
    "stopped_compile_seconds": stopped_compiles.stopped_compile_seconds,
    "full_compile_seconds": executable_timing.full_compile_seconds,
    "compile_and_run": executable_timing.compile_and_run,
    "compile_and_run_interleaved": executable_timing.compile_and_run_interleaved,
}
