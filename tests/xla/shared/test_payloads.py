"""Large constants move by payload digest: the text stays small, every pass still sees the values."""

from __future__ import annotations

import numpy as np
import pytest

from xlabench.xla import HloModule
from xlabench.xla.driver.execution import execute, random_inputs
from xlabench.xla.shared import payloads

# One 1024x1024 f32 constant (4 MiB: the payload threshold), reversed, then used by a dot: constant
# folding makes the reversed one (a load's StableHLO round trip would fold a negate or transpose itself).
WIDTH = 1024


def module_text() -> str:
    values = np.arange(WIDTH * WIDTH, dtype=np.float32).reshape(WIDTH, WIDTH) % 7 - 3
    rows = ", ".join("{" + ", ".join(f"{v:g}" for v in row) + "}" for row in values)
    return (
        "HloModule weights\n\n"
        f"ENTRY %main (x: f32[2,{WIDTH}]) -> f32[2,{WIDTH}] {{\n"
        f"  %x = f32[2,{WIDTH}]{{1,0}} parameter(0)\n"
        f"  %w = f32[{WIDTH},{WIDTH}]{{1,0}} constant({{{rows}}})\n"
        f"  %t = f32[{WIDTH},{WIDTH}]{{1,0}} reverse(%w), dimensions={{0}}\n"
        f"  ROOT %d = f32[2,{WIDTH}]{{1,0}} dot(%x, %t), lhs_contracting_dims={{1}},"
        " rhs_contracting_dims={0}\n"
        "}\n"
    )


@pytest.fixture(scope="module")
def weights_module() -> HloModule:
    """A module whose one constant holds 4 MiB (as text, ~10 MB)."""
    return HloModule.from_text(module_text(), "weights.hlo")


def test_a_module_with_large_constants_is_small_text_naming_its_payloads(weights_module):
    assert payloads.has_payloads(weights_module.text) and len(weights_module.text) < 2000
    [digest] = payloads.without_markers(weights_module.text)[1].values()
    assert len(payloads.load(digest)) > 4 * 2**20
    # The same module loaded again (any process, cache or not) has the same fingerprint.
    assert HloModule.from_text(module_text(), "again.hlo").fingerprint == weights_module.fingerprint


def test_passes_see_the_real_values_and_folded_constants_become_payloads(weights_module, tmp_path):
    from xlabench.xla.driver.pass_driver import default_driver

    folded = default_driver().apply_pass(weights_module, "constant_folding")
    assert "reverse" in weights_module.text and "reverse" not in folded.text
    assert payloads.has_payloads(folded.text)
    assert folded.fingerprint != weights_module.fingerprint
    inputs = random_inputs(weights_module, seed=0)
    expected = execute(weights_module, inputs).outputs
    assert np.array_equal(execute(folded, inputs).outputs[0], expected[0])
    # What a user gets written is plain HLO text with the folded constant in full.
    folded.write(tmp_path / "folded.hlo")
    written = (tmp_path / "folded.hlo").read_text()
    assert not payloads.has_payloads(written) and len(written) > 2 * WIDTH * WIDTH  # every value, in full
    assert HloModule.from_file(tmp_path / "folded.hlo").fingerprint == folded.fingerprint


def test_a_literal_patched_into_a_module_proto_round_trips():
    # A hand-made message: computation (3) > instruction (2) > name (1), literal (8), plus another field.
    def field(number: int, value: bytes) -> bytes:
        return payloads._length_delimited(number, value)

    instruction = field(1, b"w") + field(2, b"constant") + field(8, b"old")
    proto = field(1, b"module") + field(
        3, field(1, b"main") + field(2, instruction) + field(2, field(1, b"x"))
    )
    patched = payloads.patch_literals(proto, {"w": b"new literal" * 200})
    assert payloads.literals(patched, ["w"]) == {"w": b"new literal" * 200}
    assert payloads.patch_literals(patched, {"w": b"old"}) == proto
    with pytest.raises(ValueError, match="lacks the literals of x"):
        payloads.literals(proto, ["x"])


def test_a_payload_missing_from_the_store_is_one_line_naming_the_file(tmp_path, capsys):
    from xlabench.cli import main

    path = tmp_path / "missing.hlo"
    path.write_text(
        "HloModule m\n\nENTRY %main (x: f32[4,4]) -> f32[4,4] {\n  %x = f32[4,4]{1,0} parameter(0)\n"
        f"  %w = f32[4,4]{{1,0}} constant({{{payloads.MARKER}{'ab' * 32}}})\n"
        "  ROOT %a = f32[4,4]{1,0} add(%x, %w)\n}\n"
    )
    assert main(["stats", str(path)]) == 2
    error = capsys.readouterr().err
    assert f"{path}: not a valid HLO module: constant payload abababababab is not in" in error
    assert error.count("\n") == 1


@pytest.mark.parametrize("damage", [pytest.param("truncated", marks=pytest.mark.slow), "garbage"])
def test_a_damaged_payload_is_said_once_then_stored_whole_again(tmp_path, monkeypatch, damage):
    # A payload store of its own (the drivers' workers start with it): damaging it touches no other test.
    from pathlib import Path

    from xlabench.errors import CompilerError
    from xlabench.xla import PassDriver
    from xlabench.xla.caches.transition_cache import TransitionCache
    from xlabench.xla.compilers.worker_pool import CompilerPool

    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path))
    cache = str(tmp_path / "transitions.sqlite")

    def fresh_process() -> PassDriver:  # what the next command is: new workers, the cache on disk
        return PassDriver(pool=CompilerPool(), cache=TransitionCache(cache))

    module = fresh_process().load(module_text(), "weights.hlo")
    [digest] = payloads.without_markers(module.text)[1].values()
    path = Path(payloads.payload_directory()) / digest[:2] / digest
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2] if damage == "truncated" else bytes(len(whole)))
    with pytest.raises(CompilerError, match="damaged .* and is removed: load the original module again"):
        fresh_process().apply_pass(module, "constant_folding")
    # The next process that loads the module (its description cached) stores the payload whole again,
    # and the pass runs: the loss was never kept as the pass's answer.
    driver = fresh_process()
    again = driver.load(module_text(), "weights.hlo")
    assert again.fingerprint == module.fingerprint and path.read_bytes() == whole
    folded = driver.apply_pass(again, "constant_folding")
    assert "reverse" not in folded.text and payloads.has_payloads(folded.text)
    # A folded constant's payload removed: the record that names it is made again, not served.
    [made] = payloads.without_markers(folded.text)[1].values()
    (Path(payloads.payload_directory()) / made[:2] / made).unlink()
    assert fresh_process().apply_pass(again, "constant_folding").fingerprint == folded.fingerprint
    assert payloads.all_stored(folded.text)
