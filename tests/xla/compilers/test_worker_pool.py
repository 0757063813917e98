"""The compiler pool: replies matched to their requests, a clean environment, dumps owned by the parent."""

from __future__ import annotations

import os
import signal
import threading

import numpy as np
import pytest

from xlabench.graphs import resolve_graphs
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.compilers.worker_pool import CompilerPool, Worker, WorkerDied


def test_an_interrupted_call_is_not_answered_to_the_next_caller(spin_module, redundant_module):
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals are delivered to the main thread only")
    pool = CompilerPool(1)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGALRM, interrupt)
    # Compiling takes well under 3 s; running never ends. The timer fires again every half second: an
    # interrupt that lands in a garbage-collection callback is reported as unraisable, not raised.
    signal.setitimer(signal.ITIMER_REAL, 3.0, 0.5)
    try:
        with pytest.raises(KeyboardInterrupt):
            pool.call(
                "compile_and_run",
                timeout=120,
                text=spin_module.text,
                disabled_passes=[],
                inputs=[np.int32(0)],
                repeats=0,
                warmup=0,
            )
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    # The next call gets its own answer, at once (not the abandoned call's, not a wait behind it).
    answer = pool.call("describe", timeout=60, text=redundant_module.text)
    assert answer["fingerprint"] == redundant_module.fingerprint
    pool.close()


def test_a_worker_ignores_the_callers_xla_flags(monkeypatch, tmp_path, redundant_module):
    def default_and_algsimp() -> tuple[str, str]:
        pool = CompilerPool(1)
        driver = PassDriver(pool=pool, use_cache=False, crash_directory=str(tmp_path / "crashes"))
        default = driver.run_default_pipeline(redundant_module).fingerprint
        after = driver.apply_pass(redundant_module, "algsimp").fingerprint
        driver.full_compile_seconds(redundant_module)
        pool.close()
        return default, after

    clean = default_and_algsimp()
    dump = tmp_path / "dump"
    monkeypatch.setenv("XLA_FLAGS", f"--xla_dump_to={dump} --xla_disable_hlo_passes=algsimp,cse")
    # Same results as without the flags (they would change them behind every cache key's back),
    # and nothing is dumped where the flags say.
    assert default_and_algsimp() == clean
    assert not dump.exists()


def test_a_killed_worker_leaves_no_dump_folder_behind():
    graph = min(resolve_graphs("gpt2"), key=lambda g: g.instruction_count)
    module = HloModule.from_text(graph.hlo_text(), source=graph.name)
    driver = PassDriver(use_cache=False)
    worker = Worker()
    # scatter_simplifier aborts XLA in the middle of a single-pass compile, with its dump folder open.
    with pytest.raises(WorkerDied):
        worker.call(
            "run_pass",
            {
                "text": module.text,
                "pass_name": "scatter_simplifier",
                "disabled_passes": driver.catalogue.disabled_for_single_pass("scatter_simplifier"),
            },
            timeout=300,
        )
    assert os.listdir(worker.scratch_directory)  # the dead worker's dump folder is still there...
    worker.close()
    assert not os.path.exists(worker.scratch_directory)  # ...until the parent removes it


def test_workers_start_with_the_compilers_the_settings_and_the_builds_variables(tmp_path):
    # A registered build's acceptance must survive the settings' variables laid beside it.
    import dataclasses

    from xlabench.settings import from_environment
    from xlabench.xla.compilers.named_compilers import compiler_build, installed_compiler

    build = dataclasses.replace(installed_compiler(), name="dev", kind="python", build=True)
    settings = from_environment({"XLABENCH_CACHE_DIR": str(tmp_path), "XLABENCH_EXECUTABLE_CACHE": "0"})
    environment = CompilerPool(compiler=build, settings=settings).worker_environment()
    assert environment["XLABENCH_ACCEPT_BUILD"] == "1"
    assert (
        environment["XLABENCH_CACHE_DIR"] == str(tmp_path) and environment["XLABENCH_EXECUTABLE_CACHE"] == "0"
    )
    assert environment["XLABENCH_COMPILER_BUILD"] == compiler_build(build)
    assert "XLABENCH_ACCEPT_BUILD" not in CompilerPool(settings=settings).worker_environment()
