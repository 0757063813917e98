"""The executable cache: a program compiled once is loaded, not compiled, and runs the same."""

from __future__ import annotations

import numpy as np
import pytest

from xlabench.xla import PassDriver
from xlabench.xla.caches.transition_cache import TransitionCache
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.driver.execution import compare_outputs, execute, random_inputs


@pytest.fixture
def cached_driver(tmp_path, monkeypatch):
    """A driver whose workers keep executables under tmp_path (workers read the folder when they start)."""
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("XLABENCH_EXECUTABLE_CACHE", "1")
    pool = CompilerPool()
    yield PassDriver(pool=pool, cache=TransitionCache(str(tmp_path / "transitions.sqlite")))
    pool.close()


def _executables(tmp_path):
    return sorted(tmp_path.glob("executables-jaxlib-*/*.executable"))


def test_a_compiled_program_is_stored_once_and_loaded_with_the_same_outputs(
    cached_driver, tmp_path, mixed_module
):
    inputs = random_inputs(mixed_module)
    first = execute(mixed_module, inputs, driver=cached_driver, repeats=2)
    stored = _executables(tmp_path)
    assert not first.from_executable_cache and len(stored) == 1 and stored[0].stat().st_size > 0
    again = execute(mixed_module, inputs, driver=cached_driver, repeats=2)
    assert again.from_executable_cache and _executables(tmp_path) == stored
    assert again.optimized_histogram == first.optimized_histogram
    pairs = zip(first.outputs, again.outputs, strict=True)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in pairs)
    # Other compile options are another program.
    disabled = execute(mixed_module, inputs, driver=cached_driver, required_only=True)
    assert not disabled.from_executable_cache and len(_executables(tmp_path)) == 2
    assert compare_outputs(first.outputs, disabled.outputs) == []


@pytest.mark.parametrize("damage", ["garbage", "truncated"])
def test_a_damaged_file_is_compiled_again_and_replaced(cached_driver, tmp_path, mixed_module, damage):
    inputs = random_inputs(mixed_module)
    first = execute(mixed_module, inputs, driver=cached_driver)
    [stored] = _executables(tmp_path)
    size = stored.stat().st_size
    content = stored.read_bytes()
    stored.write_bytes(b"not an executable" if damage == "garbage" else content[: size // 2])
    again = execute(mixed_module, inputs, driver=cached_driver)
    assert not again.from_executable_cache and compare_outputs(first.outputs, again.outputs) == []
    assert stored.stat().st_size == size
    assert execute(mixed_module, inputs, driver=cached_driver).from_executable_cache


def test_the_cache_can_be_turned_off(tmp_path, monkeypatch, mixed_module):
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("XLABENCH_EXECUTABLE_CACHE", "0")
    pool = CompilerPool()
    try:
        driver = PassDriver(pool=pool, cache=TransitionCache(str(tmp_path / "transitions.sqlite")))
        for _ in range(2):
            assert not execute(mixed_module, random_inputs(mixed_module), driver=driver).from_executable_cache
    finally:
        pool.close()
    assert _executables(tmp_path) == []
