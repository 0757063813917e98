"""Executables: compile a module for the CPU, run it on deterministic random inputs, compare, time.

Two ways to compile a module, so that runtime reflects what a pass sequence did:
- `default`: XLA's full default pipeline (every pass on), as a user's program would be compiled;
- `required_only`: the module as it stands (e.g. after a sequence), taken through the required passes
  to the counting point exactly as it is counted, then compiled by XLA from layout assignment on
  (post-layout cleanup included).
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from xlabench.errors import CompilerError, UserInputError
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver, default_driver
from xlabench.xla.shared.element_types import numpy_dtype

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
    from_executable_cache: bool = False  # loaded, not compiled (`xlabench.xla.worker.executable_cache`)

    @property
    def median_run_seconds(self) -> float:
        """Median wall time of the timed runs (NaN when none were timed)."""
        return statistics.median(self.run_seconds) if self.run_seconds else float("nan")


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
        dtype = numpy_dtype(dtype_name)
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


def judge_sequence(
    original: HloModule,
    result: HloModule,
    applied: Iterable[str],
    seed: int = 0,
    driver: PassDriver | None = None,
    non_negative: bool = True,
) -> tuple[OutputsVerdict, list[np.ndarray]]:
    """A sequence's executable against XLA's default executable of the original: `judge_outputs`' verdict
    and the default's outputs, both run on `random_inputs(original, seed, non_negative=...)`.

    Non-negative inputs by default: a parameter that is a variance or a scale then stays in its domain.
    (With normal inputs, ResNet inference takes square roots of negative variances, and XLA's default
    pipeline turns the NaNs into 0 where the module without its simplifications keeps them: two correct
    compiles disagree on arithmetic XLA assumes finite.) With signed inputs, a failure whose outputs are
    not finite where the default's are is checked against the unsimplified program: not finite there
    either, the verdict is `outside_domain`, without problems.
    """
    driver = driver or default_driver()
    inputs = random_inputs(original, seed=seed, driver=driver, non_negative=non_negative)
    sequence_run, default_run = execute_against_default(
        result, applied, original, inputs, repeats=0, warmup=0, driver=driver
    )
    verdict = judge_outputs(original, inputs, default_run.outputs, sequence_run.outputs, driver)
    return verdict, default_run.outputs


def judge_against_unoptimized(
    original: HloModule,
    result: HloModule,
    applied: Iterable[str],
    seed: int = 0,
    driver: PassDriver | None = None,
    non_negative: bool = True,
) -> OutputsVerdict:
    """A sequence's executable against the unoptimized program's (the empty sequence), on the inputs
    `judge_sequence` draws: for a module whose unoptimized program is itself less accurate than XLA's
    default (bf16, where XLA's algsimp removes rounding round trips), what a pass must not make worse."""
    driver = driver or default_driver()
    inputs = random_inputs(original, seed=seed, driver=driver, non_negative=non_negative)
    unoptimized = _run_sequence(driver, original, original, [], inputs)
    return judge_outputs(
        original, inputs, unoptimized, _run_sequence(driver, original, result, applied, inputs), driver
    )


def _run_sequence(
    driver: PassDriver,
    original: HloModule,
    result: HloModule,
    applied: Iterable[str],
    inputs: list[np.ndarray],
) -> list[np.ndarray]:
    """The outputs of a sequence's executable on `inputs` (XLA's default is compiled beside it, untimed)."""
    sequence_run, _ = execute_against_default(
        result, applied, original, inputs, repeats=0, warmup=0, driver=driver
    )
    return sequence_run.outputs


def _non_finite_where_finite(outputs: list[np.ndarray], finite_in: list[np.ndarray]) -> bool:
    """Whether some float output is NaN or inf at an element where the other outputs' is finite."""
    for output, other in zip(outputs, finite_in, strict=False):
        if _is_float(output) and output.shape == other.shape:
            mine, theirs = output.astype(np.float64), other.astype(np.float64)
            if (~np.isfinite(mine) & np.isfinite(theirs)).any():
                return True
    return False


def nan_share(outputs: list[np.ndarray]) -> float:
    """The share of NaN elements over every float output (0 when there are none)."""
    floats = [output.astype(np.float64) for output in outputs if _is_float(output)]
    total = sum(output.size for output in floats)
    return sum(int(np.isnan(output).sum()) for output in floats) / total if total else 0.0


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


def compare_outputs(expected: list[np.ndarray], actual: list[np.ndarray], first_index: int = 0) -> list[str]:
    """Describe every output buffer that differs (dtype-aware tolerance); empty when all match.
    Outputs are numbered from `first_index` (a caller comparing one output of many passes its index)."""
    if len(expected) != len(actual):
        return [f"{len(actual)} outputs, expected {len(expected)}"]
    problems = []
    for index, (want, got) in enumerate(zip(expected, actual, strict=True), start=first_index):
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


# Element types narrower than f32: a module with any of them is judged against itself lifted to f32.
_LOW_PRECISION_TYPE = re.compile(r"\b(?:bf16|f16|f8e[0-9a-z]+|f4e[0-9a-z]+)(?=\[)")
# A sequence's outputs fail on low-precision arithmetic when, on some output, their error against the
# f32 reference exceeds XLA's default's by more than this (rms, max), beyond a floor relative to the
# reference's own scale (rms, max). Measured on the suite's bf16 graphs: docs/measurements.md.
NUMERICS_SLACK = (0.25, 1.0)
NUMERICS_FLOOR = (1e-3, 1e-2)


def low_precision(text: str) -> bool:
    """Whether module text computes in a floating-point type narrower than f32 (bf16, f16, f8, f4)."""
    return _LOW_PRECISION_TYPE.search(text) is not None


def lifted_to_f32(text: str) -> str:
    """The same program with every narrower floating-point type replaced by f32: the reference."""
    return _LOW_PRECISION_TYPE.sub("f32", text)


@dataclass(frozen=True)
class OutputError:
    """One output's error against the f32 reference: the sequence's and XLA's default's."""

    index: int
    rms_sequence: float
    rms_default: float
    max_sequence: float
    max_default: float
    # An integer or boolean output (an argmax, a count): elements unlike the reference's, of how many.
    # rms/max then hold the shares of such elements.
    elements: int | None = None

    def describe(self) -> str:
        """One line: both errors."""
        if self.elements is not None:
            unlike = round(self.max_sequence * self.elements), round(self.max_default * self.elements)
            return (
                f"output {self.index}: {unlike[0]} of {self.elements} elements unlike the f32 reference's "
                f"(XLA's default: {unlike[1]})"
            )
        return (
            f"output {self.index}: error vs f32 reference rms {self.rms_sequence:.3g} (XLA's default "
            f"{self.rms_default:.3g}), max {self.max_sequence:.3g} (default {self.max_default:.3g})"
        )


@dataclass(frozen=True)
class OutputsVerdict:
    """How a sequence's outputs compare: the problems (empty: they pass), against what, and the errors."""

    problems: list[str]
    reference: str  # "XLA's default executable", or "f32 reference" for low-precision modules
    errors: list[OutputError] = field(default_factory=list)
    # The inputs are outside the program's domain: the program itself, without XLA's simplifications,
    # computes NaN or inf where XLA's default does not. Such a comparison proves nothing either way.
    outside_domain: bool = False


def judge_outputs(
    original: HloModule,
    inputs: list[np.ndarray],
    default_outputs: list[np.ndarray],
    sequence_outputs: list[np.ndarray],
    driver: PassDriver | None = None,
) -> OutputsVerdict:
    """Whether a sequence's outputs are as good as XLA's default executable's.

    f32 and wider: they must match the default's (`compare_outputs`). On low-precision arithmetic two
    correct orders round differently and XLA's default is not the most accurate answer, so each float
    output is judged by its error against the original module lifted to f32 (XLA's default pipeline,
    the same inputs), next to the default's error: it fails when its rms or max error is materially
    worse (NUMERICS_SLACK beyond the default's, plus NUMERICS_FLOOR of the reference's scale), or
    where the reference is finite and it is not while the default is. Other outputs match exactly.

    A sequence whose outputs are not finite where the default's are passes when the program without
    XLA's simplifications is not finite there either (`outside_domain`): XLA's simplifications assume
    finite arithmetic (x * 0 -> 0, ...), and such inputs left the program's domain; no order is wrong.
    """
    driver = driver or default_driver()
    verdict = _judge_against_default(original, inputs, default_outputs, sequence_outputs, driver)
    if verdict.problems and _non_finite_where_finite(sequence_outputs, default_outputs):
        raw = execute(original, inputs, required_only=True, driver=driver).outputs
        if _non_finite_where_finite(raw, default_outputs):
            verdict = OutputsVerdict([], verdict.reference, verdict.errors, outside_domain=True)
    return verdict


def _judge_against_default(
    original: HloModule,
    inputs: list[np.ndarray],
    default_outputs: list[np.ndarray],
    sequence_outputs: list[np.ndarray],
    driver: PassDriver,
) -> OutputsVerdict:
    """`judge_outputs` without the domain check."""
    if not low_precision(original.text):
        return OutputsVerdict(compare_outputs(default_outputs, sequence_outputs), "XLA's default executable")
    try:
        lifted = driver.load(lifted_to_f32(original.text), f"{original.source} (lifted to f32)")
        wide_inputs = [value.astype(np.float32) if _is_narrow_float(value) else value for value in inputs]
        reference = execute(lifted, wide_inputs, driver=driver).outputs
    except (UserInputError, CompilerError) as error:
        problems = compare_outputs(default_outputs, sequence_outputs)
        return OutputsVerdict(problems, f"XLA's default executable (no f32 reference: {error})")
    if not len(reference) == len(default_outputs) == len(sequence_outputs):
        return OutputsVerdict(compare_outputs(default_outputs, sequence_outputs), "XLA's default executable")
    problems, errors = [], []
    for index, (wide, default, sequence) in enumerate(
        zip(reference, default_outputs, sequence_outputs, strict=True)
    ):
        if default.shape != sequence.shape or default.dtype != sequence.dtype or wide.shape != default.shape:
            problems += compare_outputs([default], [sequence], first_index=index)
            continue
        if not _is_float(default):
            # Derived from low-precision floats (an argmax), integers flip at near-ties in any correct
            # order: count the elements unlike the reference's, next to the default's count.
            shares = [float(np.mean(output != wide.astype(output.dtype))) if output.size else 0.0
                      for output in (sequence, default)]  # fmt: skip
            error = OutputError(index, shares[0], shares[1], shares[0], shares[1], int(default.size))
            errors.append(error)
            limit = shares[1] * (1 + NUMERICS_SLACK[1]) + NUMERICS_FLOOR[1] + 1 / max(1, default.size)
            if shares[0] > limit:
                problems.append(
                    f"{error.describe()}: worse than the default (limit {limit * default.size:.0f})"
                )
            continue
        error = _output_error(index, wide, default, sequence)
        errors.append(error)
        scale_rms, scale_max = _scales(wide)
        rms_limit = error.rms_default * (1 + NUMERICS_SLACK[0]) + NUMERICS_FLOOR[0] * scale_rms
        max_limit = error.max_default * (1 + NUMERICS_SLACK[1]) + NUMERICS_FLOOR[1] * scale_max
        if not (error.rms_sequence <= rms_limit and error.max_sequence <= max_limit):
            problems.append(
                f"{error.describe()}: worse than the default (limit rms {rms_limit:.3g}, max {max_limit:.3g})"
            )
    return OutputsVerdict(problems, "f32 reference", errors)


def _is_float(array: np.ndarray) -> bool:
    return array.dtype.kind == "f" or array.dtype == ml_dtypes.bfloat16


def _is_narrow_float(array: np.ndarray) -> bool:
    return _is_float(array) and array.dtype.itemsize < 4


def _scales(reference: np.ndarray) -> tuple[float, float]:
    """rms and max magnitude of the reference's finite elements (1 where there are none)."""
    finite = reference[np.isfinite(reference)].astype(np.float64)
    if finite.size == 0:
        return 1.0, 1.0
    return float(np.sqrt(np.mean(finite**2))) or 1.0, float(np.max(np.abs(finite))) or 1.0


def _output_error(
    index: int, reference: np.ndarray, default: np.ndarray, sequence: np.ndarray
) -> OutputError:
    """rms and max error of both outputs over the elements where the reference is finite."""
    wide = reference.astype(np.float64)
    finite = np.isfinite(wide)

    def errors(output: np.ndarray) -> tuple[float, float]:
        # Only where the reference is finite: inf - inf elsewhere would warn of an invalid value.
        difference = np.abs(output.astype(np.float64)[finite] - wide[finite])
        if difference.size == 0:
            return 0.0, 0.0
        if not np.isfinite(difference).all():
            return math.inf, math.inf
        return float(np.sqrt(np.mean(difference**2))), float(np.max(difference))

    (rms_sequence, max_sequence), (rms_default, max_default) = errors(sequence), errors(default)
    return OutputError(index, rms_sequence, rms_default, max_sequence, max_default)
