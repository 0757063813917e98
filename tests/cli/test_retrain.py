"""`xlabench retrain`: interrupted, Ctrl-C stops it at once and leaves the stored versions as they were."""

from __future__ import annotations

import pytest

from tests.commands import interrupt_after


@pytest.mark.slow
def test_ctrl_c_leaves_the_last_good_version_untouched(small_graph, tmp_path):
    policies = tmp_path / "policies"
    version = policies / "tiny" / "v1.0"
    version.mkdir(parents=True)
    (version / "metadata.json").write_text('{"format": 1}')
    before = {path: path.read_bytes() for path in policies.rglob("*") if path.is_file()}
    arguments = ["retrain", "--name", "tiny", "--graphs", small_graph, "--steps", "100000",
                 "--warm-start", "none", "--eval-graphs", ""]  # fmt: skip
    # Into training: the environment processes up and stepping (the bar has counted steps).
    environment = {"XLABENCH_POLICIES_DIR": str(policies)}
    code, last_line = interrupt_after(arguments, 120, environment, ready=r"retrain:.*\| *[1-9][0-9]*/")
    assert (code, last_line) == (130, "xlabench: interrupted")
    after = {path: path.read_bytes() for path in policies.rglob("*") if path.is_file()}
    assert after == before and [p.name for p in (policies / "tiny").iterdir()] == ["v1.0"]
