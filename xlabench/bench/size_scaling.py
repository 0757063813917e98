"""What a step of the driver costs as modules grow, next to XLA's full compile.

Modules are GPT-2 forward passes of more and more layers (lowered by jax in a subprocess), from
~1,000 to ~50,000 ops. For each: loading it (XLA's parse and canonical form, fingerprint, features),
the median single-pass application over an action set, XLA's default pipeline to the counting point,
and a full compile, all in one run. A step must stay a fixed fraction of a full compile, or less, as
modules grow: fingerprinting, the canonical form and cache keys must not grow faster than XLA does.
(Training steps are not used: XLA's own full compile of a 70-layer GPT-2 training step, ~33,000
ops, took more than 22 GB on this project's 24 GB machine.)
"""

from __future__ import annotations

import multiprocessing
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from xlabench.bench.driver_speed import time_each_pass
from xlabench.errors import UserInputError
from xlabench.files import write_atomically
from xlabench.graphs.build import lower_program
from xlabench.settings import Settings, current
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS
from xlabench.xla.driver.pass_driver import PassDriver

DEFAULT_SIZES = (1000, 5000, 20000, 50000)
# The stack's shape: small layers, so size comes from depth as in a deep model.
STACK_CONFIG = {"width": 64, "heads": 2, "seq": 32, "batch": 2, "vocab": 512, "dtype": "f32"}


@dataclass(frozen=True)
class ScalingRow:
    """One module size and what each kind of compiler work cost on it (seconds)."""

    layers: int
    op_count: int
    text_bytes: int
    load_seconds: float
    median_step_seconds: float
    steps: int
    default_pipeline_seconds: float
    full_compile_seconds: float

    @property
    def step_ms_per_thousand_ops(self) -> float:
        """Median step time per 1,000 ops: flat when a step's cost is linear in size."""
        return 1000 * self.median_step_seconds / (self.op_count / 1000)

    @property
    def ratio(self) -> float:
        """Median step over full compile."""
        return self.median_step_seconds / self.full_compile_seconds


def lower_stack(layers: int) -> str:
    """HLO text of a GPT-2 forward pass with `layers` blocks (imports jax: run it in a subprocess)."""
    from xlabench.models import gpt2

    program = gpt2.make_inference_program({**STACK_CONFIG, "layers": layers})
    return lower_program(program, f"gpt2-stack-l{layers}")


def measure_scaling(
    sizes: list[int],
    action_set: str,
    keep: Path | None = None,
    on_row: Callable[[ScalingRow], None] = lambda row: None,
    settings: Settings | None = None,
) -> list[ScalingRow]:
    """Generate one GPT-2 stack per target op count, then time loading, single passes, the default
    pipeline and a full compile on each (`keep`: also write the modules there); `on_row` hears each.
    `settings` (default: those in effect) name the compiler; the lowering process needs none (jax only)."""
    driver = PassDriver(use_cache=False, settings=settings or current())
    if action_set not in ACTION_SETS:
        raise UserInputError(f"--actions {action_set}: unknown action set ({', '.join(ACTION_SETS)})")
    actions = driver.catalogue.action_passes(action_set)
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as lowering:
        # Ops a layer, from a one- and a two-layer stack: the depth each target size needs.
        one, two = (driver.features(driver.load(text)).op_count for text in lowering.map(lower_stack, [1, 2]))
        per_layer, base = max(1, two - one), 2 * one - two
        depths = [max(1, round((size - base) / per_layer)) for size in sizes]
        texts = list(lowering.map(lower_stack, depths))
    rows = []
    for layers, text in zip(depths, texts, strict=True):
        if keep:
            keep.mkdir(parents=True, exist_ok=True)
            write_atomically(keep / f"gpt2-stack-l{layers}.hlo", text.encode())
        rows.append(_measure(driver, layers, text, actions))
        on_row(rows[-1])
    return rows


def _measure(driver: PassDriver, layers: int, text: str, actions: list[str]) -> ScalingRow:
    started = time.perf_counter()
    module = driver.load(text, f"gpt2-stack-l{layers}")
    op_count = driver.features(module).op_count
    load_seconds = time.perf_counter() - started
    steps = list(time_each_pass(driver, module, actions).values())
    started = time.perf_counter()
    driver.run_default_pipeline(module)
    default_seconds = time.perf_counter() - started
    return ScalingRow(
        layers=layers,
        op_count=op_count,
        text_bytes=len(text.encode()),
        load_seconds=load_seconds,
        median_step_seconds=statistics.median(steps) if steps else float("nan"),
        steps=len(steps),
        default_pipeline_seconds=default_seconds,
        full_compile_seconds=driver.full_compile_seconds(module),
    )
