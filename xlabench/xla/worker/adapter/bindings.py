"""Where this jaxlib release keeps what xlabench's adapter calls: the per-release differences, in one place.

The release is checked first (`xlabench.xla.shared.releases`), before jax's internals are touched; then each
namespace is looked up by what the release has, and a release that lacks a name the adapter calls is
refused at import (`UnsupportedCompiler`), never mistaken for a bad module later.
"""

from __future__ import annotations

import jaxlib

from xlabench.settings import worker_start
from xlabench.xla.shared.releases import UnsupportedCompiler, check_supported

# Before jax's internals are touched; a registered build is judged by its API below instead.
check_supported(jaxlib.__version__, accept_build=worker_start().accept_build)

from jax._src.lib import _jax as jax_bindings  # noqa: E402
from jax._src.lib import xla_client  # noqa: E402

# HLO bindings: `xla_client.hlo` from 0.10.2 on, `_jax` itself before.
hlo = getattr(xla_client, "hlo", None) or jax_bindings
mlir = getattr(jax_bindings, "mlir", None) or getattr(getattr(xla_client, "_xla", None), "mlir", None)
_REQUIRED = {
    "HloPrintOptions": hlo,
    "hlo_module_from_text": hlo,
    "hlo_module_cost_analysis": jax_bindings,
    "hlo_to_stablehlo": mlir,
    "mlir_module_to_xla_computation": mlir,
    "CompileOptions": xla_client,
    "DeviceList": xla_client,
}
# Which supported release's API this jaxlib has (what a build is accepted as).
API_RELEASE = "0.10.2" if getattr(xla_client, "hlo", None) is not None else "0.8.0 to 0.10.1"
_missing = [name for name, namespace in _REQUIRED.items() if not hasattr(namespace, name)]
if _missing:
    raise UnsupportedCompiler(
        f"jaxlib {jaxlib.__version__} lacks what xlabench's adapter uses ({', '.join(_missing)})"
    )
