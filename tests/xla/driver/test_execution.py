"""Executables: deterministic inputs, every output buffer compared, sequences keep numerics."""

from __future__ import annotations

import textwrap

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from xlabench.graphs import resolve_graphs
from xlabench.xla import HloModule, default_driver
from xlabench.xla.driver.execution import (
    compare_outputs,
    execute,
    execute_against_default,
    judge_outputs,
    lifted_to_f32,
    low_precision,
    random_inputs,
)
from xlabench.xla.shared.module_structure import donated_parameters


def test_random_inputs_are_deterministic_and_typed(mixed_module):
    first, again = random_inputs(mixed_module, seed=3), random_inputs(mixed_module, seed=3)
    assert [a.dtype for a in first] == [np.float32, np.int32, np.float32, np.float32]
    assert all(np.array_equal(a, b) for a, b in zip(first, again, strict=True))
    assert not np.array_equal(first[0], random_inputs(mixed_module, seed=4)[0])


def test_64_bit_parameters_reach_the_executable_as_they_are():
    # torch-xla passes indices and RNG seeds as s64/u64; jax outside x64 mode would narrow them to 32 bits.
    module = HloModule.from_text(
        textwrap.dedent("""\
            HloModule SyncTensorsGraph.12

            ENTRY %SyncTensorsGraph.12 (p0: s64[3], p1: u64[2], p2: f64[2]) -> (s64[3], u64[2], f64[2]) {
              %p0 = s64[3]{0} parameter(0)
              %p1 = u64[2]{0} parameter(1)
              %p2 = f64[2]{0} parameter(2)
              %c = s64[] constant(4294967296)
              %b = s64[3]{0} broadcast(s64[] %c), dimensions={}
              %add = s64[3]{0} add(s64[3]{0} %p0, s64[3]{0} %b)
              ROOT %tuple = (s64[3]{0}, u64[2]{0}, f64[2]{0}) tuple(%add, %p1, %p2)
            }
            """)
    )
    inputs = [np.array([1, 2, 3], np.int64), np.array([2**40, 7], np.uint64), np.array([1e-300, 2.0])]
    outputs = execute(module, inputs).outputs
    assert [out.dtype for out in outputs] == [np.int64, np.uint64, np.float64]
    assert outputs[0].tolist() == [2**32 + 1, 2**32 + 2, 2**32 + 3] and outputs[1].tolist() == [2**40, 7]
    assert outputs[2][0] == 1e-300


def test_required_only_compile_of_an_optimized_module_matches_the_default(mixed_module):
    driver = default_driver()
    inputs = random_inputs(mixed_module)
    expected = execute(mixed_module, inputs).outputs
    optimized = mixed_module
    for pass_name in ["call-inliner", "algsimp", "simplify-while-loops", "cse", "constant_folding", "dce"]:
        optimized = driver.apply_pass(optimized, pass_name)
    timed = execute(optimized, inputs, required_only=True, repeats=3, warmup=1)
    assert compare_outputs(expected, timed.outputs) == []
    assert len(timed.run_seconds) == 3 and timed.median_run_seconds > 0
    assert any(output.dtype == np.float32 for output in timed.outputs)


def test_required_only_executable_gets_xlas_post_layout_cleanup(mixed_module):
    driver = default_driver()
    inputs = random_inputs(mixed_module)
    counted = driver.run_required_passes(mixed_module)
    executed = execute(mixed_module, inputs, required_only=True)
    # The same counted module compiled with XLA's post-layout algsimp/cse/dce off: what a compile
    # that disabled the simplification passes by name everywhere used to give a sequence's result.
    without_cleanup = driver.call_compiler(
        "compile_and_run",
        None,
        counted,
        disabled_passes=[*driver.catalogue.disabled_before_counting_point(), "algsimp", "cse", "dce"],
        inputs=inputs,
        repeats=0,
        warmup=0,
    )
    cleaned = sum(executed.optimized_histogram.values())
    assert cleaned < sum(without_cleanup["optimized_histogram"].values())
    assert compare_outputs(execute(mixed_module, inputs).outputs, executed.outputs) == []


def test_a_step_with_donated_buffers_runs_against_the_default_again_and_again(donated_step_module):
    # Each run consumes the donated parameters' buffers: every run needs copies of its own.
    driver = default_driver()
    inputs = random_inputs(donated_step_module, seed=1)
    kept = [value.copy() for value in inputs]
    optimized = driver.apply_passes(donated_step_module, ["call-inliner", "algsimp", "cse", "dce"])[-1].module
    applied = ["call-inliner", "algsimp", "cse", "dce"]
    sequence, default = execute_against_default(
        optimized, applied, donated_step_module, inputs, repeats=3, warmup=1, driver=driver
    )
    assert compare_outputs(default.outputs, sequence.outputs) == []
    assert len(sequence.run_seconds) == len(default.run_seconds) == 3
    assert all(np.array_equal(a, b) for a, b in zip(inputs, kept, strict=True))  # inputs untouched
    # The update is what the step computes from the inputs, not from a buffer an earlier run overwrote.
    again = execute(donated_step_module, inputs, repeats=2).outputs
    assert compare_outputs(default.outputs, again) == []


def test_donated_parameters_are_read_from_the_alias_header():
    header = (
        "HloModule m, input_output_alias={ {0}: (0, {}, may-alias), {1, 2}: (3, {1}, must-alias) }, "
        "entry_computation_layout={(f32[])->f32[]}"
    )
    assert donated_parameters(header) == {0, 3}
    assert donated_parameters("HloModule m, entry_computation_layout={()->()}") == frozenset()


def test_compare_outputs_finds_a_changed_element_and_a_wrong_dtype():
    expected = [np.arange(6, dtype=np.float32), np.ones(3, dtype=ml_dtypes.bfloat16), np.arange(3)]
    assert compare_outputs(expected, [array.copy() for array in expected]) == []
    changed = [array.copy() for array in expected]
    changed[0][4] += 0.5
    problems = compare_outputs(expected, changed)
    assert len(problems) == 1 and "output 0" in problems[0]
    retyped = [expected[0].astype(np.float64), expected[1], expected[2]]
    assert "expected float32" in compare_outputs(expected, retyped)[0]
    # bf16 tolerates bf16 rounding, integers tolerate nothing.
    assert compare_outputs(expected, [expected[0], expected[1] * ml_dtypes.bfloat16(1.01), expected[2]]) == []
    assert compare_outputs(expected, [expected[0], expected[1], expected[2] + 1]) != []


@pytest.fixture(scope="module")
def mixed_reference(mixed_module):
    inputs = random_inputs(mixed_module, seed=1)
    return inputs, execute(mixed_module, inputs).outputs


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_sequence_of_action_passes_preserves_every_output(data, mixed_module, mixed_reference):
    driver = default_driver()
    sequence = data.draw(st.lists(st.sampled_from(driver.catalogue.action_passes()), min_size=1, max_size=8))
    module = mixed_module
    for step in driver.apply_passes(module, sequence, stop_on_error=False):
        assert step.error is None, step.error
        module = step.module
    inputs, expected = mixed_reference
    executed = execute(module, inputs, required_only=True, applied=sequence)
    assert compare_outputs(expected, executed.outputs) == []


@pytest.mark.parametrize(
    "sequence",
    [["batched_gather_scatter_normalizer", "scatter_simplifier"],
     ["batched_gather_scatter_normalizer", "scatter_simplifier", "select_and_scatter_expander"]],
)  # fmt: skip
def test_a_max_pool_gradient_runs_whatever_came_first_the_simplifier_or_the_expander(sequence):
    # TensorFlow's CNN training step: its max-pool gradient is a select-and-scatter. Left to the
    # required-only compile, or expanded by the sequence after scatter_simplifier, the scatter it
    # becomes aborted XLA's emitter (CHECK IsSimplifiedScatter) until scatter_simplifier ran again.
    from xlabench.graphs import resolve_graphs

    driver = default_driver()
    [graph] = resolve_graphs("tensorflow-cnn-train-l1-d16-b8-f32")
    module = driver.load(graph.hlo_text(), graph.name)
    result = driver.apply_passes(module, sequence)[-1].module
    inputs = random_inputs(module, seed=0)
    sequence_run, default_run = execute_against_default(result, sequence, module, inputs, repeats=1, warmup=0)
    assert compare_outputs(default_run.outputs, sequence_run.outputs) == []


def test_low_precision_outputs_are_judged_by_their_error_against_the_module_lifted_to_f32(
    attention_bf16_module,
):
    module = attention_bf16_module
    assert low_precision(module.text) and not low_precision(lifted_to_f32(module.text))
    inputs = random_inputs(module, seed=1)
    default = execute(module, inputs).outputs
    # The most accurate bf16 answer there is: the f32 program's outputs, rounded once.
    lifted = HloModule.from_text(lifted_to_f32(module.text))
    reference = execute(lifted, [value.astype(np.float32) for value in inputs]).outputs
    accurate = [value.astype(default[0].dtype) for value in reference]
    assert compare_outputs(default, accurate) != []  # held to XLA's default, it would fail
    verdict = judge_outputs(module, inputs, default, accurate)
    [error] = verdict.errors
    assert verdict.problems == [] and verdict.reference == "f32 reference"
    assert error.rms_sequence < error.rms_default and "XLA's default" in error.describe()


def test_a_real_miscompile_of_a_low_precision_module_still_fails(attention_bf16_module):
    module = attention_bf16_module
    inputs = random_inputs(module, seed=1)
    default = execute(module, inputs).outputs
    # An executable XLA built from the wrong program: the residual subtracted instead of added.
    line = [line for line in module.text.splitlines() if line.lstrip().startswith("ROOT")][-1]  # ENTRY's
    assert " add(" in line
    wrong = HloModule.from_text(module.text.replace(line, line.replace(" add(", " subtract(")))
    miscompiled = execute(wrong, inputs).outputs
    verdict = judge_outputs(module, inputs, default, miscompiled)
    assert verdict.problems and "worse than the default" in verdict.problems[0]
    # f32 modules keep the direct comparison with XLA's default executable.
    lifted = HloModule.from_text(lifted_to_f32(module.text))
    wide = [value.astype(np.float32) for value in inputs]
    outputs = execute(lifted, wide).outputs
    assert judge_outputs(lifted, wide, outputs, outputs).reference == "XLA's default executable"


def test_low_precision_errors_count_only_where_the_reference_is_finite(recwarn):
    module = HloModule.from_text(
        "HloModule divide\n\nENTRY main {\n  a = bf16[4] parameter(0)\n  b = bf16[4] parameter(1)\n"
        "  ROOT q = bf16[4] divide(a, b)\n}\n"
    )
    bf16 = ml_dtypes.bfloat16
    inputs = [np.array([1, 1, 0, 3], bf16), np.array([1, 0, 0, 2], bf16)]  # 1, inf, nan, 1.5
    default = execute(module, inputs).outputs
    verdict = judge_outputs(module, inputs, default, default)
    assert verdict.problems == [] and verdict.errors[0].max_sequence == 0.0
    worse = [np.array([1, np.inf, np.nan, 2], bf16)]  # off by 0.5 where the reference is finite
    assert judge_outputs(module, inputs, default, worse).problems != []
    assert not [warning for warning in recwarn if issubclass(warning.category, RuntimeWarning)]


def test_signed_inputs_outside_a_programs_domain_are_no_difference_and_unsigned_ones_stay_inside():
    # ResNet inference takes square roots of its variances: on signed inputs the module without XLA's
    # simplifications computes NaN where XLA's default computes numbers. The module as it came (no pass)
    # is then no worse; on non-negative inputs nothing leaves the domain.
    graph = resolve_graphs("resnet-infer-n111-w16-i32-b4-f32")[0]
    module = HloModule.from_text(graph.hlo_text())
    signed = random_inputs(module, seed=0)
    sequence_run, default_run = execute_against_default(module, [], module, signed, repeats=0, warmup=0)
    assert compare_outputs(default_run.outputs, sequence_run.outputs) != []  # NaN against numbers
    verdict = judge_outputs(module, signed, default_run.outputs, sequence_run.outputs)
    assert verdict.problems == [] and verdict.outside_domain
    unsigned = random_inputs(module, seed=0, non_negative=True)
    sequence_run, default_run = execute_against_default(module, [], module, unsigned, repeats=0, warmup=0)
    verdict = judge_outputs(module, unsigned, default_run.outputs, sequence_run.outputs)
    assert verdict.problems == [] and not verdict.outside_domain
