"""Constants printed without values (`{...}`): filled deterministically, warned about, never random."""

from __future__ import annotations

import pytest

from xlabench.errors import UserInputError
from xlabench.xla import PassDriver
from xlabench.xla.driver.elided_constants import fill_elided_constants

ELIDED = """HloModule elided, entry_computation_layout={(f32[4,3]{1,0}, s32[5]{0})->(f32[4,3], s32[5])}

ENTRY main {
  x = f32[4,3]{1,0} parameter(0)
  w = f32[4,3]{1,0} constant({...})
  b = bf16[2,2,2]{2,1,0} constant({...})
  i = s32[5]{0} parameter(1)
  k = s32[5]{0} constant({...})
  p = pred[5]{0} constant({...})
  s = s32[5]{0} select(p, i, k)
  r = f32[4,3]{1,0} add(x, w)
  ROOT t = (f32[4,3]{1,0}, s32[5]{0}) tuple(r, s)
}
"""


def test_the_fill_is_the_same_every_time_and_keeps_every_shape():
    text = ELIDED
    filled, count = fill_elided_constants(text)
    assert count == 4 and "{...}" not in filled
    assert fill_elided_constants(text) == (filled, 4)
    assert "b = bf16[2,2,2]{2,1,0} constant({ { {" in filled  # one brace level per dimension
    assert "p = pred[5]{0} constant({" in filled and ("true" in filled or "false" in filled)


def test_a_module_with_elided_constants_has_one_fingerprint_whatever_parsed_before(tmp_path, capsys):
    # XLA's own parser fills `{...}` from a counter that runs on across parses: two loads would differ.
    fingerprints = set()
    for _ in range(2):
        driver = PassDriver(use_cache=False, crash_directory=str(tmp_path / "crashes"))
        module = driver.load(ELIDED, "weights.hlo")
        driver.load(ELIDED, "weights.hlo")
        fingerprints.add(module.fingerprint)
        assert "{...}" not in module.text
        warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
        assert warnings == [
            "xlabench: warning: weights.hlo: 4 constant(s) printed without values ({...}) filled with "
            "xlabench's deterministic values: counts and runtimes hold, outputs are not the model's"
        ]
    assert len(fingerprints) == 1


def test_an_elided_constant_of_a_type_xlabench_cannot_fill_is_one_clear_error():
    text = ELIDED.replace("k = s32[5]{0} constant({...})", "k = f8e4m3fn[5]{0} constant({...})")
    message = r"^weights\.hlo: cannot fill an elided constant of element type f8e4m3fn$"
    with pytest.raises(UserInputError, match=message):
        fill_elided_constants(text, "weights.hlo")


def test_an_elided_constant_of_a_tuple_shape_is_refused_not_left_to_xla():
    text = ELIDED.replace(
        "  k = s32[5]{0} constant({...})\n",
        "  k = s32[5]{0} constant({...})\n  q = (f32[2], s32[]) constant({...})\n",
    )
    with pytest.raises(
        UserInputError, match=r"^w\.hlo: cannot fill the elided constant q \(only array shapes\)$"
    ):
        fill_elided_constants(text, "w.hlo")
