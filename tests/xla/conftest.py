"""Fixtures for the driver tests: small real HLO modules and a driver on a private cache."""

from __future__ import annotations

from pathlib import Path

import pytest

from xlabench.xla import HloModule, PassDriver
from xlabench.xla.caches.transition_cache import TransitionCache

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def data_directory() -> Path:
    """The directory of the small HLO files used by these tests."""
    return DATA


@pytest.fixture(scope="session")
def redundant_module() -> HloModule:
    """Hand-written module with log(exp(y)), negate(negate(y)) and a duplicated multiply."""
    return HloModule.from_file(DATA / "redundant.hlo")


@pytest.fixture(scope="session")
def mixed_module() -> HloModule:
    """JAX-lowered module with a while loop, a scan, a conditional, gather, scatter, a bf16 convolution."""
    return HloModule.from_file(DATA / "mixed.hlo")


@pytest.fixture(scope="session")
def bf16_branches_module() -> HloModule:
    """JAX-lowered gradient through a lax.cond whose branches multiply (transposed) bf16 matrices."""
    return HloModule.from_file(DATA / "bf16_branches.hlo")


@pytest.fixture(scope="session")
def grouped_bf16_conv_module() -> HloModule:
    """JAX-lowered bf16 convolution with feature_group_count=2."""
    return HloModule.from_file(DATA / "grouped_bf16_conv.hlo")


@pytest.fixture(scope="session")
def donated_step_module() -> HloModule:
    """JAX-lowered training step with `donate_argnums=0`: its parameters alias its outputs."""
    return HloModule.from_file(DATA / "donated_step.hlo")


@pytest.fixture(scope="session")
def attention_bf16_module() -> HloModule:
    """JAX-lowered bf16 attention block (4 heads, softmax in f32, gelu, residual): 1,024 outputs."""
    return HloModule.from_file(DATA / "attention_bf16.hlo")


@pytest.fixture(scope="session")
def spin_module() -> HloModule:
    """A while loop whose condition is always true: compiling it is quick, running it never ends."""
    return HloModule.from_file(DATA / "spin.hlo")


@pytest.fixture
def fresh_driver(tmp_path: Path) -> PassDriver:
    """A driver with its own empty transition cache and crash directory."""
    return PassDriver(
        cache=TransitionCache(str(tmp_path / "transitions.sqlite")), crash_directory=str(tmp_path / "crashes")
    )


@pytest.fixture
def uncached_driver(tmp_path: Path) -> PassDriver:
    """A driver that runs the compiler for every call."""
    return PassDriver(use_cache=False, crash_directory=str(tmp_path / "crashes"))


@pytest.fixture(scope="session")
def shared_calls_module() -> HloModule:
    """A small suite graph (ResNet inference) whose computations have several call sites."""
    from xlabench.graphs import resolve_graphs

    graph = resolve_graphs("resnet-infer-n111-w16-i32-b4-f32")[0]
    return HloModule.from_text(graph.hlo_text(), source=graph.name)
