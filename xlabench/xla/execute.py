"""Executables: compile a module for the CPU, run it on deterministic random inputs, compare, time.

Two ways to compile a module, so that runtime reflects what a pass sequence did:
- `default`: XLA's full default pipeline (every pass on), as a user's program would be compiled;
- `required_only`: the module as it stands (e.g. after a sequence), taken through the required passes
  to the counting point exactly as it is counted, then compiled by XLA from layout assignment on
  (post-layout cleanup included).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from xlabench.xla.driver import PassDriver, default_driver
from xlabench.xla.module import HloModule

# (relative, absolute) tolerance per dtype for outputs of two compiles of one program; the absolute
# part is scaled by the largest magnitude in the expected buffer.
# Reassociation by a pass changes rounding: low-precision floats get a wide band, integers none.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-9, 1e-12),
    "float32": (2e-3, 1e-4),
    "float16": (3e-2, 1e-3),
    "bfloat16": (6e-2, 1e-2),
    "complex64": (2e-3, 1e-4),
    "complex128": (1e-9, 1e-12),
}


@dataclass(frozen=True)
class Execution:
    """Outputs of one compiled module on one set of inputs, and how long things took."""

    outputs: list[np.ndarray]
    compile_seconds: float  # getting the executable: compiling it, or loading it from the executable cache
    run_seconds: list[float]
    # Opcode counts of the module XLA generated code for, after every pass it ran.
    optimized_histogram: dict[str, int]
    from_executable_cache: bool = False  # loaded, not compiled (`xlabench.xla.executable_cache`)

    @property
    def median_run_seconds(self) -> float:
        """Median wall time of the timed runs (NaN when none were timed)."""
        return statistics.median(self.run_seconds) if self.run_seconds else float("nan")


def _numpy_dtype(name: str) -> np.dtype:
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)


def random_inputs(
    module: HloModule, seed: int = 0, driver: PassDriver | None = None, non_negative: bool = False
) -> list[np.ndarray]:
    """Deterministic inputs for the entry parameters: normal floats (their absolute values with
    `non_negative`), small non-negative integers."""
    driver = driver or default_driver()
    specs = driver.call_compiler("parameter_specs", None, module)
    generator = np.random.default_rng(seed)
    inputs = []
    for shape, dtype_name in specs:
        dtype = _numpy_dtype(dtype_name)
        if dtype == np.bool_:
            value = generator.random(shape) < 0.5
        elif np.issubdtype(dtype, np.integer):
            # Small values keep indices in range and loop bounds short.
            value = generator.integers(0, 8, size=shape).astype(dtype)
        elif np.issubdtype(dtype, np.complexfloating):
            value = (generator.standard_normal(shape) + 1j * generator.standard_normal(shape)).astype(dtype)
        else:
            value = generator.standard_normal(shape)
            value = (np.abs(value) if non_negative else value).astype(np.float32).astype(dtype)
        inputs.append(np.asarray(value, dtype=dtype))
    return inputs


def execute(
    module: HloModule,
    inputs: list[np.ndarray],
    required_only: bool = False,
    repeats: int = 0,
    warmup: int = 0,
    driver: PassDriver | None = None,
    applied: Iterable[str] = (),
) -> Execution:
    """Compile `module` (default pipeline, or required passes only) and run it on `inputs`.

    With `required_only`, the executable is built from the module that is counted: the required
    passes are applied up to the counting point (`PassDriver.run_required_passes`, with `applied`
    the pass instances of the sequence that produced `module`), and from there XLA compiles as it
    always does -- layout assignment, then its post-layout algsimp/cse/dce cleanup, fusion, code
    generation -- with the passes before the counting point off (see
    `PassCatalogue.disabled_before_counting_point`).
    """
    driver = driver or default_driver()
    module, disabled = _sequence_program(driver, module, applied) if required_only else (module, [])
    result = driver.call_compiler(
        "compile_and_run",
        "@required-passes" if required_only else "@default-pipeline",
        module,
        disabled_passes=disabled,
        inputs=inputs,
        repeats=repeats,
        warmup=warmup,
    )
    return _execution(result)


def execute_against_default(
    result: HloModule,
    applied: Iterable[str],
    original: HloModule,
    inputs: list[np.ndarray],
    repeats: int = 20,
    warmup: int = 3,
    driver: PassDriver | None = None,
    min_seconds: float = 0.0,
) -> tuple[Execution, Execution]:
    """A sequence's executable and XLA's default executable of the original, timed in turn.

    `result` is the module after the sequence (`applied` its pass instances); it is compiled as in
    `execute(..., required_only=True)`, the original with XLA's default pipeline. Both are compiled
    in one worker and their timed runs alternate, so their median ratio is what the sequence did
    to runtime, not what the machine did in between. Runs continue past `repeats` until each
    executable has run `min_seconds` in all.
    """
    driver = driver or default_driver()
    counted, disabled = _sequence_program(driver, result, applied)
    answers = driver.call_compiler(
        "compile_and_run_interleaved",
        "@required-passes",
        counted,
        disabled_passes=disabled,
        inputs=inputs,
        repeats=repeats,
        warmup=warmup,
        others=[(original.text, [])],
        min_seconds=min_seconds,
    )
    return _execution(answers[0]), _execution(answers[1])


def sequence_output_problems(
    original: HloModule,
    result: HloModule,
    applied: Iterable[str],
    seed: int = 0,
    driver: PassDriver | None = None,
) -> list[str]:
    """How a sequence's executable's outputs differ from XLA's default executable of the original.

    Both run on `random_inputs(original, seed, non_negative=True)`: a parameter that is a variance
    or a scale then stays in its domain. (With normal inputs, ResNet inference takes square roots of
    negative variances, and XLA's default pipeline turns the NaNs into 0 where the module without its
    simplifications keeps them: two correct compiles disagree on arithmetic XLA assumes finite.)
    Empty when every output buffer matches within the dtype-aware tolerance (`compare_outputs`).
    """
    driver = driver or default_driver()
    inputs = random_inputs(original, seed=seed, driver=driver, non_negative=True)
    sequence_run, default_run = execute_against_default(
        result, applied, original, inputs, repeats=0, warmup=0, driver=driver
    )
    return compare_outputs(default_run.outputs, sequence_run.outputs)


def _sequence_program(
    driver: PassDriver, module: HloModule, applied: Iterable[str]
) -> tuple[HloModule, list[str]]:
    """What a sequence's executable is compiled from: the counted module, and the passes kept off."""
    return driver.run_required_passes(module, applied), driver.catalogue.disabled_before_counting_point()


def _execution(answer: dict) -> Execution:
    return Execution(
        answer["outputs"],
        answer["compile_seconds"],
        answer["run_seconds"],
        answer["optimized_histogram"],
        answer.get("from_executable_cache", False),
    )


def run_on_random_inputs(module: HloModule, seed: int = 0) -> list[np.ndarray]:
    """Compile with XLA's default pipeline and run on `random_inputs(module, seed)`."""
    return execute(module, random_inputs(module, seed)).outputs


def compare_outputs(expected: list[np.ndarray], actual: list[np.ndarray]) -> list[str]:
    """Describe every output buffer that differs (dtype-aware tolerance); empty when all match."""
    if len(expected) != len(actual):
        return [f"{len(actual)} outputs, expected {len(expected)}"]
    problems = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=True)):
        if want.shape != got.shape or want.dtype != got.dtype:
            problems.append(
                f"output {index}: {got.dtype}{list(got.shape)}, expected {want.dtype}{list(want.shape)}"
            )
            continue
        name = want.dtype.name
        if name not in TOLERANCES:
            if not np.array_equal(want, got):
                problems.append(f"output {index} ({name}): {int(np.sum(want != got))} elements differ")
            continue
        relative, absolute = TOLERANCES[name]
        wide = np.complex128 if "complex" in name else np.float64
        want64, got64 = want.astype(wide), got.astype(wide)
        finite = np.isfinite(want64)
        scale = float(np.max(np.abs(want64[finite]))) if finite.any() else 1.0
        close = np.isclose(got64, want64, rtol=relative, atol=absolute * max(1.0, scale), equal_nan=True)
        if not close.all():
            worst = float(np.max(np.abs(got64 - want64)[~close])) if (~close).any() else 0.0
            problems.append(
                f"output {index} ({name}{list(want.shape)}): {int((~close).sum())} of {want.size} elements "
                f"differ, largest difference {worst:.3g}"
            )
    return problems
