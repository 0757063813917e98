"""The structural fingerprint: blind to names and print order, never blind to structure or sharing.

These tests run on printed module text (what XLA prints), without the compiler.
"""

from __future__ import annotations

import re

from xlabench.xla.shared.module_structure import normalize_computations, structural_fingerprint

# Two call sites of one computation (what a JAX program lowers to) ...
SHARED_CALLEE = """\
HloModule m, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0})}

%twice (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %sum = f32[4]{0} add(%x, %x)
}

ENTRY %main (p: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4]{0} parameter(0)
  %first = f32[4]{0} call(%p), to_apply=%twice
  %second = f32[4]{0} call(%first), to_apply=%twice
  ROOT %out = (f32[4]{0}, f32[4]{0}) tuple(%first, %second)
}
"""

# ... and the same after flatten-call-graph: one clone per call site, structurally identical.
CLONED_CALLEE = """\
HloModule m, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0})}

%twice (x: f32[4]) -> f32[4] {
  %x = f32[4]{0} parameter(0)
  ROOT %sum = f32[4]{0} add(%x, %x)
}

%twice.clone (x.1: f32[4]) -> f32[4] {
  %x.1 = f32[4]{0} parameter(0)
  ROOT %sum.1 = f32[4]{0} add(%x.1, %x.1)
}

ENTRY %main (p: f32[4]) -> (f32[4], f32[4]) {
  %p = f32[4]{0} parameter(0)
  %first = f32[4]{0} call(%p), to_apply=%twice
  %second = f32[4]{0} call(%first), to_apply=%twice.clone
  ROOT %out = (f32[4]{0}, f32[4]{0}) tuple(%first, %second)
}
"""

# The same module as SHARED_CALLEE with other names and computations in another order.
SHARED_CALLEE_RENAMED = """\
HloModule other_name, entry_computation_layout={(f32[4]{0})->(f32[4]{0}, f32[4]{0})}

ENTRY %entry.7 (arg: f32[4]) -> (f32[4], f32[4]) {
  %arg = f32[4]{0} parameter(0)
  %c1 = f32[4]{0} call(%arg), to_apply=%double_c3
  %c2 = f32[4]{0} call(%c1), to_apply=%double_c3
  ROOT %t = (f32[4]{0}, f32[4]{0}) tuple(%c1, %c2)
}

%double_c3 (y: f32[4]) -> f32[4] {
  %y = f32[4]{0} parameter(0)
  ROOT %s = f32[4]{0} add(%y, %y)
}
"""


def _instruction_wiring(cross: bool) -> str:
    """Two identical negates feeding two multiplies: each squares one negate, or both mix them."""
    second_operands = "%n1, %n2" if cross else "%n1, %n1"
    third_operands = "%n1, %n2" if cross else "%n2, %n2"
    return f"""\
HloModule m, entry_computation_layout={{(f32[4]{{0}})->(f32[4]{{0}}, f32[4]{{0}})}}

ENTRY %main (p: f32[4]) -> (f32[4], f32[4]) {{
  %p = f32[4]{{0}} parameter(0)
  %n1 = f32[4]{{0}} negate(%p)
  %n2 = f32[4]{{0}} negate(%p)
  %m1 = f32[4]{{0}} multiply({second_operands})
  %m2 = f32[4]{{0}} multiply({third_operands})
  ROOT %out = (f32[4]{{0}}, f32[4]{{0}}) tuple(%m1, %m2)
}}
"""


def test_names_and_print_order_do_not_change_the_fingerprint():
    assert structural_fingerprint(SHARED_CALLEE) == structural_fingerprint(SHARED_CALLEE_RENAMED)


def test_a_shared_computation_and_its_clones_have_different_fingerprints():
    # The collision that served call-inliner's cached result on the unflattened module.
    assert structural_fingerprint(SHARED_CALLEE) != structural_fingerprint(CLONED_CALLEE)


def test_instruction_sharing_is_part_of_the_fingerprint():
    # Same multiset of instructions, different wiring: m1 = n1*n1, m2 = n2*n2 vs both n1*n2.
    assert structural_fingerprint(_instruction_wiring(False)) != structural_fingerprint(
        _instruction_wiring(True)
    )


def test_operand_order_is_part_of_the_fingerprint():
    subtract = SHARED_CALLEE.replace("add(%x, %x)", "subtract(%x, %p2)").replace(
        "%x = f32[4]{0} parameter(0)", "%x = f32[4]{0} parameter(0)\n  %p2 = f32[4]{0} parameter(1)"
    )
    swapped = subtract.replace("subtract(%x, %p2)", "subtract(%p2, %x)")
    assert structural_fingerprint(subtract) != structural_fingerprint(swapped)


def test_normalized_text_keeps_the_fingerprint_and_is_stable():
    normalized = normalize_computations(CLONED_CALLEE)
    assert structural_fingerprint(normalized) == structural_fingerprint(CLONED_CALLEE)
    assert normalize_computations(normalized) == normalized
    # Callees first, each named after its old name plus its position; ENTRY last.
    assert re.findall(r"^(?:ENTRY )?%([\w.]+) \(", normalized, re.MULTILINE)[-1] == "main_c2"
    assert {name.rsplit("_", 1)[1] for name in re.findall(r"^%([\w.]+) \(", normalized, re.MULTILINE)} == {
        "c0",
        "c1",
    }
