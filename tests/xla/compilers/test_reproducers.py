"""Reproducers: the module, the payloads it names, the passes and what happened, in one folder."""

from __future__ import annotations

import json

from xlabench.xla.compilers.reproducers import write_reproducer
from xlabench.xla.shared import payloads

MODULE = """HloModule m

ENTRY %main () -> f32[2] {
  ROOT %weights = f32[2]{0} constant({...})
}
"""


def test_a_reproducer_holds_the_module_its_payloads_the_passes_and_the_details(tmp_path, monkeypatch):
    monkeypatch.setenv("XLABENCH_CACHE_DIR", str(tmp_path / "cache"))
    literal = b"literal bytes of the constant"
    text = payloads.with_markers(MODULE, {"weights": literal})
    digest = payloads.without_markers(text)[1]["weights"]
    directory = write_reproducer(tmp_path / "r", text, ["algsimp", "cse"], "error.json", {"kind": "crash"})
    assert (tmp_path / "r" / "module.hlo").read_text() == text
    assert (tmp_path / "r" / "payloads" / digest[:2] / digest).read_bytes() == literal
    assert (tmp_path / "r" / "passes.txt").read_text() == "algsimp\ncse\n"
    assert json.loads((tmp_path / "r" / "error.json").read_text()) == {"kind": "crash"}
    assert directory == str(tmp_path / "r")
