"""Executables inside a compiler worker: compile, run on given inputs, time -- on one core.

Compiles go through the executable cache (`xlabench.xla.worker.executable_cache`); timed runs of several
programs alternate, so that the machine's noise falls on all of them alike.
"""

from __future__ import annotations

import contextlib
import functools
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from xlabench.settings import current
from xlabench.xla.shared.failures import CompilerFailure
from xlabench.xla.shared.module_structure import donated_parameters
from xlabench.xla.shared.releases import UnsupportedCompiler
from xlabench.xla.worker import adapter, executable_cache
from xlabench.xla.worker.module_analysis import reachable_histograms
from xlabench.xla.worker.module_text import compile_text, disabled_pass_overrides, first_line, to_text

MAX_TIMED_ROUNDS = 2000  # timed rounds of `compile_and_run_interleaved` at most


def full_compile_seconds(text: str) -> float:
    """Wall time of a full XLA CPU compile (all passes and LLVM code generation)."""
    started = time.perf_counter()
    compile_text(text, {})
    return time.perf_counter() - started


def compile_and_run(
    text: str, disabled_passes: list[str], inputs: list[np.ndarray], repeats: int, warmup: int
) -> dict[str, Any]:
    """Compile for execution (with `disabled_passes` off), run once for outputs, then time repeats.

    Also returns the opcode histogram of the module XLA generated code for (after every pass).
    """
    return compile_and_run_interleaved(text, disabled_passes, inputs, repeats, warmup)[0]


@contextlib.contextmanager
def one_core() -> Iterator[None]:
    """Run every thread of this process on one core while inside, then give each its cores back.

    Why: XLA's executables use its thread pool unevenly, so on a shared machine a policy/default
    ratio of two multi-threaded executables depends on the load beside them (docs/plugin.md, "One core").
    On one core both run serially and the load falls on them alike.
    """
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no per-thread affinity here (not Linux): time on every core
        yield
        return
    core = cores[_timing_slot() % len(cores)]
    saved: dict[int, set[int]] = {}
    try:
        # Threads may start while others are pinned: list again until no thread is new.
        for _ in range(10):
            new = [tid for tid in _thread_ids() if tid not in saved]
            if not new:
                break
            for tid in new:
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    saved[tid] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, {core})
        yield
    finally:
        for tid in _thread_ids():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, saved.get(tid, cores))


def _timing_slot() -> int:
    """Which core this process times on: the settings' slot ($XLABENCH_TIMING_SLOT, else the pytest-xdist
    worker's number: one core each, never two on one), else the pid (spread by chance)."""
    slot = current().timing_slot
    return os.getpid() if slot is None else slot


def _thread_ids() -> list[int]:
    """Every thread of this process (Linux), none where /proc cannot tell."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return []


def compile_and_run_interleaved(
    text: str,
    disabled_passes: list[str],
    inputs: list[np.ndarray],
    repeats: int,
    warmup: int,
    others: list[tuple[str, list[str]]] = (),
    min_seconds: float = 0.0,
) -> list[dict[str, Any]]:
    """Compile the module and each of `others` (text, disabled passes); run each once, then time them.

    Timed runs alternate between the programs (A B A B ...), so that the machine's noise falls on
    all of them alike and their ratio is meaningful. There are `repeats` rounds, or more, until every
    program has run for `min_seconds` in all (at most MAX_TIMED_ROUNDS): a 0.3 ms executable needs
    hundreds of runs for a stable median on a busy machine. Answers come in order: the module, then others.
    """
    programs = [(text, disabled_passes), *others]
    values = [np.asarray(value) for value in inputs]
    buffers = [adapter.put_on_device(value) for value in values]
    compiled = []
    for text, disabled_passes in programs:
        started = time.perf_counter()
        overrides = disabled_pass_overrides(disabled_passes)
        executable, loaded = executable_cache.compiled(
            text, overrides, functools.partial(compile_text, text, overrides)
        )
        compile_seconds = time.perf_counter() - started
        optimized = to_text(adapter.optimized_module(executable))
        compiled.append((executable, compile_seconds, loaded, optimized, donated_parameters(optimized)))

    def arguments(donated: frozenset[int]) -> list[Any]:
        """The buffers for one run: a donated parameter gets a fresh copy (its buffer is consumed)."""
        if not donated:
            return buffers
        return [
            # Copied first: on the CPU a device buffer may share the numpy array's memory, and a donated
            # buffer is written by the run.
            adapter.put_on_device(np.array(values[index], copy=True)) if index in donated else buffer
            for index, buffer in enumerate(buffers)
        ]

    answers: list[dict[str, Any]] = []
    try:
        with one_core():
            for executable, compile_seconds, loaded, optimized, donated in compiled:
                answers.append(
                    {
                        "outputs": [
                            np.asarray(array) for array in adapter.execute(executable, arguments(donated))
                        ],
                        "compile_seconds": compile_seconds,
                        "from_executable_cache": loaded,
                        "run_seconds": [],
                        "optimized_histogram": reachable_histograms(optimized)[0],
                    }
                )
            for _ in range(warmup):
                for executable, _, _, _, donated in compiled:
                    adapter.execute(executable, arguments(donated))
            rounds = 0
            while rounds < repeats or (
                rounds < MAX_TIMED_ROUNDS
                and min(sum(answer["run_seconds"]) for answer in answers) < min_seconds
            ):
                for (executable, _, _, _, donated), answer in zip(compiled, answers, strict=True):
                    run_arguments = arguments(donated)  # copies made before the clock starts
                    begun = time.perf_counter()
                    adapter.execute(executable, run_arguments)
                    answer["run_seconds"].append(time.perf_counter() - begun)
                rounds += 1
    except UnsupportedCompiler:
        raise
    except Exception as error:
        raise CompilerFailure(f"execution failed: {first_line(error)}") from None
    return answers
