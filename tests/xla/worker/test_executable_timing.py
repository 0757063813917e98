"""Timing inside a compiler worker: every thread on one core, one core per xdist worker."""

from __future__ import annotations

import os
import threading

import pytest

from xlabench.xla.worker.executable_timing import one_core


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs per-thread affinity (Linux) and two cores to tell one from all",
)
def test_one_core_pins_every_thread_while_timing_and_gives_each_its_cores_back():
    # XLA's thread pool exists before any timing starts: a thread started beforehand stands for it.
    before = os.sched_getaffinity(0)
    ready, release = threading.Event(), threading.Event()
    seen: dict[str, set[int]] = {}

    def pool_thread() -> None:
        ready.set()
        release.wait(timeout=60)
        seen["inside"] = os.sched_getaffinity(0)

    thread = threading.Thread(target=pool_thread, daemon=True)
    thread.start()
    ready.wait(timeout=60)
    try:
        with one_core():
            inside = os.sched_getaffinity(0)
            release.set()
            thread.join(timeout=60)
    finally:
        release.set()
    assert len(inside) == 1 and len(seen["inside"]) == 1 and seen["inside"] <= before
    assert os.sched_getaffinity(0) == before


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2,
    reason="needs per-thread affinity (Linux) and two cores",
)
def test_xdist_workers_time_on_cores_of_their_own(monkeypatch):
    cores = sorted(os.sched_getaffinity(0))
    monkeypatch.delenv("XLABENCH_TIMING_SLOT", raising=False)
    chosen = []
    for worker in ("gw0", "gw1"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        with one_core():
            chosen.append(os.sched_getaffinity(0))
    assert chosen == [{cores[0]}, {cores[1]}]  # by worker number, not by pid: never both on one core
    monkeypatch.setenv("XLABENCH_TIMING_SLOT", "1")
    with one_core():
        assert os.sched_getaffinity(0) == {cores[1]}
