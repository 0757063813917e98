"""The worker serves only the functions of the compiler registry."""

from __future__ import annotations

import re

import pytest

from xlabench.xla.compilers.worker_handle import RefusedCall, Worker


def test_a_worker_runs_only_registered_functions():
    worker = Worker()
    try:
        # A module-level helper of the worker's code is not callable by name: only the registry is.
        for name in ("parse", "os", "__import__", "no_such_function"):
            with pytest.raises(RefusedCall, match=f"no compiler function '{re.escape(name)}'"):
                worker.call(name, {}, timeout=120)
        assert worker.alive()  # a refusal is an answer: the worker goes on serving
        assert worker.call("jaxlib_version", {}, timeout=120)
    finally:
        worker.close()
