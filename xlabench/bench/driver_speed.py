"""How long one `apply_pass` takes against a full compile of the same module (`xlabench bench driver`)."""

from __future__ import annotations

import collections
import statistics
import time
from typing import Any

from xlabench.errors import CompilerError
from xlabench.graphs import resolve_graphs
from xlabench.graphs.loader import load_module
from xlabench.settings import Settings, current
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver, default_driver


def default_benchmark_graph() -> str:
    """The graph benchmarks time by default: the suite's GPT-2 training step closest to 1,000 ops."""

    candidates = resolve_graphs("gpt2")  # every GPT-2 graph of the suite is a training step
    return min(candidates, key=lambda graph: abs(graph.instruction_count - 1000)).name


def time_each_pass(driver: PassDriver, module: HloModule, actions: list[str]) -> dict[str, float]:
    """Seconds of one `apply_pass` of each action on `module` (actions XLA refuses are left out)."""
    seconds: dict[str, float] = {}
    for pass_name in actions:
        started = time.perf_counter()
        try:
            driver.apply_pass(module, pass_name)
        except CompilerError:
            continue
        seconds[pass_name] = time.perf_counter() - started
    return seconds


def measure_driver_speed(
    graph: str | None, action_set: str, rounds: int, settings: Settings | None = None
) -> dict[str, Any]:
    """Time `apply_pass` of every action pass against full compiles of the same module, interleaved
    over `rounds`; medians, their ratio and the floor (the compile inside every step, every pass off).
    `settings` (default: those in effect) name the compiler."""
    settings = settings or current()
    module = load_module(graph or default_benchmark_graph(), default_driver(settings))
    driver = PassDriver(use_cache=False, settings=settings)
    actions = driver.catalogue.action_passes(action_set)
    driver.apply_pass(module, actions[0])  # start the worker and load the catalogue outside the timing
    per_pass: dict[str, list[float]] = collections.defaultdict(list)
    compiles: list[float] = []
    floors: list[float] = []  # the compile inside every step, with every pass off
    every_pass = sorted(driver.catalogue.passes)
    for _ in range(rounds):
        compiles.append(driver.full_compile_seconds(module))
        floors.append(
            driver.call_compiler("stopped_compile_seconds", None, module, disabled_passes=every_pass)
        )
        for pass_name, seconds in time_each_pass(driver, module, actions).items():
            per_pass[pass_name].append(seconds)
        compiles.append(driver.full_compile_seconds(module))
    applies = [seconds for series in per_pass.values() for seconds in series]
    median_apply, median_compile = statistics.median(applies), statistics.median(compiles)
    median_floor = statistics.median(floors)
    return {
        "graph": module.source,
        "op_count": module.op_count,
        "rounds": rounds,
        "actions": len(actions),
        "applications": len(applies),
        "compiles": len(compiles),
        "median_apply_pass_seconds": median_apply,
        "median_full_compile_seconds": median_compile,
        "ratio": median_apply / median_compile,
        "median_stopped_compile_seconds": median_floor,
        "floor_ratio": median_floor / median_compile,
        "per_pass_median_seconds": {name: statistics.median(series) for name, series in per_pass.items()},
    }
