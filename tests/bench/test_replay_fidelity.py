"""The replay's summary: the fidelity target is met only when every family lands on XLA's count."""

from __future__ import annotations

import pytest

from xlabench.bench.replay_fidelity import REPLAY_TOLERANCE, ReplayRow, replay_summary


def _row(name: str, family: str, ratio: float | None, same: bool = True) -> ReplayRow:
    return ReplayRow(name, family, ratio=ratio, same_module=same, error=None if ratio else "crash")


def test_every_graph_at_xlas_count_meets_the_target():
    summary = replay_summary([_row(f"g{i}", "gpt2" if i % 2 else "gru", 1.0) for i in range(20)])
    assert summary.meets_target and summary.within_tolerance == 20 and summary.same_module == 20
    assert summary.geomean_ratio == pytest.approx(1.0) and set(summary.families) == {"gpt2", "gru"}


def test_one_family_off_or_one_failed_graph_misses_it():
    rows = [_row(f"g{i}", "gpt2", 1.0) for i in range(19)]
    off = replay_summary([*rows, *(_row(f"r{i}", "gru", 1.0 + 3 * REPLAY_TOLERANCE) for i in range(2))])
    assert not off.meets_target and off.families["gru"].worst.name in ("r0", "r1")
    failed = replay_summary([*rows, _row("broken", "gpt2", None)])
    assert not failed.meets_target and failed.failed == 1
    assert failed.to_json()["failed"] == 1 and failed.to_json()["families"]["gpt2"]["graphs"] == 20
