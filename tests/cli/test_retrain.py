"""`xlabench retrain`: interrupted, Ctrl-C stops it at once and leaves the stored versions as they were;
its warm start starts from the version before where that one beat XLA's default."""

from __future__ import annotations

import pytest

from tests.commands import interrupt_after
from xlabench.baselines import baseline_store
from xlabench.retraining.new_version import _previous_starts


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


def test_the_warm_start_may_start_from_the_stored_version():
    stored = baseline_store.load("general")
    previous, starts = _previous_starts("general", "tensorflow")
    assert previous == stored.policy and starts
    assert {name: list(sequence) for name, sequence in starts.items()} == {
        name: stored.get(name).sequence for name in stored.graph_names() if name.startswith("tensorflow-")
    }
    assert _previous_starts("no-such-policy", "tensorflow") == ("", {})
