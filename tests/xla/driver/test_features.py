"""Op count and histogram follow the documented definition."""

from __future__ import annotations

from xlabench.xla import HloModule, default_driver
from xlabench.xla.driver.features import OPCODES, OTHER, Features

# A while loop (body + condition), a reduce with its reducer, and a computation nobody calls.
MODULE_WITH_CALLEES = """\
HloModule counted

add_reducer {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
}

never_called {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
}

loop_body {
  state = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  v = f32[4] get-tuple-element(state), index=1
  one = s32[] constant(1)
  next_i = s32[] add(i, one)
  doubled = f32[4] add(v, v)
  ROOT next = (s32[], f32[4]) tuple(next_i, doubled)
}

loop_condition {
  state = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(state), index=0
  limit = s32[] constant(3)
  ROOT less = pred[] compare(i, limit), direction=LT
}

ENTRY main {
  x = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, x)
  loop = (s32[], f32[4]) while(init), condition=loop_condition, body=loop_body
  result = f32[4] get-tuple-element(loop), index=1
  fzero = f32[] constant(0)
  ROOT total = f32[] reduce(result, fzero), dimensions={0}, to_apply=add_reducer
}
"""


def test_op_count_counts_reachable_computations_without_parameters():
    # Count this exact text (HloModule.from_text would first canonicalize, which drops never_called).
    raw = default_driver().call_compiler("features", None, MODULE_WITH_CALLEES)
    features = Features.from_dict(raw)
    # entry 6 + body 6 + condition 3 + reducer 1 = 16 non-parameter instructions; never_called does not count.
    assert features.op_count == 16
    assert features.computations == 4
    assert features.histogram["parameter"] == 1 + 1 + 1 + 2
    assert features.histogram["while"] == 1


def test_element_types_count_results_of_reachable_instructions():
    features = Features.from_dict(default_driver().call_compiler("features", None, MODULE_WITH_CALLEES))
    # Tuples: state x2, next, init, loop; pred: less; s32: i x2, one, next_i, limit, zero.
    assert features.element_types == {"f32": 9, "pred": 1, "s32": 6, "tuple": 5}
    assert sum(features.element_types.values()) == sum(features.histogram.values())
    assert features.element_type_vector().sum() == sum(features.histogram.values())
    assert "negate" not in features.histogram


def test_modules_are_counted_in_their_canonical_form():
    module = HloModule.from_text(MODULE_WITH_CALLEES)
    # XLA's import keeps a get-tuple-element per loop-state element in the entry and the condition.
    assert module.op_count == 18
    assert module.op_count == sum(module.histogram.values()) - module.histogram["parameter"]


def test_histogram_vector_has_a_fixed_length_and_an_other_bucket(mixed_module):
    vector = mixed_module.features().histogram_vector()
    assert vector.shape == (len(OPCODES) + 1,)
    assert vector.sum() == sum(mixed_module.histogram.values())
    assert vector[OPCODES.index("while")] == mixed_module.histogram["while"]
    # An opcode outside the vocabulary (a newer XLA's, say) lands in the last bucket, not nowhere.
    unknown = Features(2, {"add": 1, "brand-new-op": 1}, 1, mixed_module.features().cost)
    assert unknown.histogram_vector()[-1] == 1 and unknown.histogram_vector().sum() == 2
    assert OTHER not in OPCODES


def test_cost_analysis_reports_flops_and_bytes(mixed_module):
    cost = mixed_module.features().cost
    assert cost.flops > 0
    assert cost.bytes_accessed > 0
    assert cost.transcendentals > 0  # the loop body applies tanh


def test_fingerprint_ignores_names_but_not_structure(redundant_module):
    renamed = HloModule.from_text(redundant_module.text.replace("product", "renamed_product"))
    assert renamed.fingerprint == redundant_module.fingerprint
    changed = HloModule.from_text(redundant_module.text.replace("multiply(", "subtract(", 1))
    assert changed.fingerprint != redundant_module.fingerprint
