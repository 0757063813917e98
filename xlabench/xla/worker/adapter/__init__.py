"""The one place that touches jaxlib internals: the few entry points xlabench needs, per release.

Imported only inside compiler worker processes (by the modules `xlabench.xla.worker.registry` registers).
jaxlib moves its internals between releases (0.10.2 moved the HLO bindings from `_jax` to
`xla_client.hlo` and added `HloComputation.instructions`): where each release keeps what xlabench
calls is settled in one module, `bindings`, and the entry points here use only what it found;
everything xlabench reads of a module is read from its printed text, which is stable. A release
outside `SUPPORTED_JAXLIB`, or one that lacks an entry point, is refused at import with one line
(`UnsupportedCompiler`): an API difference is never mistaken for a bad module. JAX's public API
lowers the probe module that shows the pipeline (`probe`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import jaxlib

from xlabench.xla.shared.releases import UnsupportedCompiler
from xlabench.xla.worker.adapter.bindings import API_RELEASE, hlo, jax_bindings, mlir, xla_client
from xlabench.xla.worker.adapter.probe import probe_module_text

__all__ = [
    "api_release",
    "client",
    "compile_stablehlo",
    "cost_analysis",
    "deserialize_executable",
    "execute",
    "from_stablehlo",
    "jaxlib_version",
    "module_from_proto",
    "module_name",
    "module_text",
    "optimized_module",
    "parse_module",
    "print_options",
    "probe_module_text",
    "put_on_device",
    "serialize_executable",
    "to_stablehlo",
]

_Function = TypeVar("_Function", bound=Callable[..., Any])


def _entry_point(function: _Function) -> _Function:
    """A missing attribute or a changed signature of jaxlib's is this release's API, never the module's."""

    @functools.wraps(function)
    def call(*arguments: Any, **keywords: Any) -> Any:
        try:
            return function(*arguments, **keywords)
        except AttributeError as error:
            problem = error
        except TypeError as error:
            if "incompatible function arguments" not in str(error):
                raise  # nanobind's word for a changed signature; anything else is not the API's
            problem = error
        first = (str(problem).strip().splitlines() or [""])[0]
        raise UnsupportedCompiler(
            f"jaxlib {jaxlib.__version__}: xlabench's adapter does not fit it ({function.__name__}: {first})"
        ) from None

    return call  # type: ignore[return-value]


@_entry_point
def jaxlib_version() -> str:
    """The version of the jaxlib in this process."""
    return jaxlib.__version__


def api_release() -> str:
    """The supported release whose API this jaxlib has ("0.10.2", or "0.8.0 to 0.10.1")."""
    return API_RELEASE


@_entry_point
def client() -> Any:
    """jax's CPU client, so arrays made by jax.device_put belong to it."""
    from jax._src import xla_bridge

    return xla_bridge.get_backend("cpu")


@_entry_point
def print_options(large_constants: bool = True) -> Any:
    """Print options for a lossless, re-parsable module without metadata."""
    options = hlo.HloPrintOptions()
    options.print_metadata = False
    options.print_large_constants = large_constants
    return options


@_entry_point
def parse_module(text: str) -> Any:
    """XLA's HloModule of HLO text (raises jaxlib's error on malformed text)."""
    return hlo.hlo_module_from_text(text)


@_entry_point
def module_from_proto(data: bytes) -> Any:
    """XLA's HloModule of a serialized HloModuleProto (e.g. TensorFlow's `stage="hlo_serialized"`)."""
    return xla_client.XlaComputation(data).get_hlo_module()


@_entry_point
def module_name(module: Any) -> str:
    """The module's name."""
    return module.name


@_entry_point
def module_text(module: Any, options: Any) -> str:
    """The module printed with `options`."""
    return module.to_string(options)


@_entry_point
def to_stablehlo(module: Any) -> Any:
    """The module exported to StableHLO, as every compile starts."""
    return mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())


@_entry_point
def from_stablehlo(stablehlo: Any) -> Any:
    """A StableHLO module imported back into an HloModule."""
    computation = mlir.mlir_module_to_xla_computation(stablehlo, use_tuple_args=False, return_tuple=False)
    return computation.get_hlo_module()


def _first_device_and_options(overrides: dict[str, Any]) -> tuple[Any, Any]:
    """The first CPU device (as a device list) and compile options carrying DebugOptions overrides."""
    options = xla_client.CompileOptions()
    options.env_option_overrides = list(overrides.items())
    return xla_client.DeviceList(tuple(client().devices()[:1])), options


@_entry_point
def compile_stablehlo(stablehlo: Any, overrides: dict[str, Any]) -> Any:
    """Compile for the first CPU device with DebugOptions overrides; the loaded executable."""
    return client().compile_and_load(stablehlo, *_first_device_and_options(overrides))


@_entry_point
def cost_analysis(module: Any) -> dict[str, float]:
    """XLA's HloCostAnalysis properties of the module."""
    return dict(jax_bindings.hlo_module_cost_analysis(client(), module))


@_entry_point
def serialize_executable(executable: Any) -> bytes:
    """The loaded executable as bytes (its generated code), for the executable cache."""
    return bytes(client().serialize_executable(executable))


@_entry_point
def deserialize_executable(data: bytes, overrides: dict[str, Any]) -> Any:
    """A loaded executable on the first CPU device from `serialize_executable`'s bytes."""
    return client().deserialize_executable(data, *_first_device_and_options(overrides))


@_entry_point
def optimized_module(executable: Any) -> Any:
    """The module XLA generated code for (after every pass)."""
    return executable.hlo_modules()[0]


@_entry_point
def put_on_device(value: Any) -> Any:
    """A device buffer of a numpy array on the first CPU device, of the array's own dtype."""
    import jax

    # Outside x64 mode jax narrows 64-bit arrays (s64 -> s32, u64 -> u32, f64 -> f32), and a module with
    # such parameters (torch-xla's indices and RNG seeds, f64 solvers) would be given the wrong buffers.
    enable_x64 = jax.enable_x64 if hasattr(jax, "enable_x64") else jax.experimental.enable_x64
    with enable_x64(True):
        return jax.device_put(value, client().devices()[0])


@_entry_point
def execute(executable: Any, buffers: list[Any]) -> list[Any]:
    """Run the executable once on device buffers; its output arrays, ready."""
    results = executable.execute_sharded(buffers)
    arrays = [group[0] for group in results.disassemble_into_single_device_arrays()]
    for array in arrays:
        array.block_until_ready()
    return arrays
