"""A new policy version: its warm start starts from the version before where that one's stored sequences
beat XLA's default."""

from __future__ import annotations

from xlabench.baselines import baseline_store
from xlabench.retraining.new_version import _previous_starts


def test_the_warm_start_may_start_from_the_stored_version():
    stored = baseline_store.load("general")
    previous, starts = _previous_starts("general", "tensorflow")
    assert previous == stored.policy and starts
    assert {name: list(sequence) for name, sequence in starts.items()} == {
        name: stored.get(name).sequence for name in stored.graph_names() if name.startswith("tensorflow-")
    }
    assert _previous_starts("no-such-policy", "tensorflow") == ("", {})
