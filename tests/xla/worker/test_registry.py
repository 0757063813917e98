"""The worker's registry: every function a caller asks for by name is registered, and only those."""

from __future__ import annotations

import re
from pathlib import Path

from xlabench.xla.worker.registry import REGISTRY

PACKAGE = Path(__file__).parents[3] / "xlabench"


def test_every_function_called_by_name_is_registered():
    # Names passed to `call_compiler`, `pool.call`, `worker.call` and `call_once` across the package.
    called = set()
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        called |= set(re.findall(r"(?:call_compiler|\.call|call_once)\(\s*\"(\w+)\"", text))
    assert called and called <= set(REGISTRY), sorted(called - set(REGISTRY))


def test_the_registry_holds_only_public_functions():
    assert all(callable(function) and not name.startswith("_") for name, function in REGISTRY.items())
