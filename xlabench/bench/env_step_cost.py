"""What one environment step costs, next to a full XLA compile of the same module (`xlabench bench env`)."""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np

from xlabench.bench.driver_speed import default_benchmark_graph
from xlabench.env import PassOrderingEnv
from xlabench.settings import Settings, current
from xlabench.xla import PassDriver


def measure_env_steps(
    graph: str | None, action_set: str, steps_wanted: int, seed: int, settings: Settings | None = None
) -> dict[str, Any]:
    """Random valid actions, transition cache off (every step compiles), full compiles in between.

    Two environments step in lockstep on the same actions, each with its own driver: one counts
    every step, one only at the episode's end (`count_every_step=False`, the shipped policy's).
    `settings` (default: those in effect) name the compiler.
    """
    settings = settings or current()
    graph = graph or default_benchmark_graph()
    counted, uncounted = (
        PassOrderingEnv(
            graphs=graph,
            action_set=action_set,
            driver=PassDriver(use_cache=False, settings=settings),
            count_every_step=every_step,
        )
        for every_step in (True, False)
    )
    generator = np.random.default_rng(seed)
    _, info = counted.reset(seed=seed)
    uncounted.reset(seed=seed)
    module = counted.module
    assert module is not None
    steps: dict[str, list[float]] = {"counted": [], "uncounted": []}
    compiles: list[float] = [counted.driver.full_compile_seconds(module)]
    while len(steps["counted"]) < steps_wanted:
        valid = np.flatnonzero(counted.action_masks()[:-1])  # never stop: every timed step applies a pass
        action = int(generator.choice(valid))
        for label, env in (("counted", counted), ("uncounted", uncounted)):
            started = time.perf_counter()
            _, _, terminated, truncated, info = env.step(action)
            if not truncated:  # the uncounted environment counts on its last step
                steps[label].append(time.perf_counter() - started)
        if terminated or truncated:
            seed = int(generator.integers(1 << 30))
            counted.reset(seed=seed)
            uncounted.reset(seed=seed)
        if len(steps["counted"]) % 10 == 0:  # full compiles interleaved with the steps: the same noise
            compiles.append(counted.driver.full_compile_seconds(module))
    median_step = statistics.median(steps["counted"])
    median_uncounted = statistics.median(steps["uncounted"])
    median_compile = statistics.median(compiles)
    return {
        "graph": info["graph"],
        "op_count": info["I"],
        "steps": len(steps["counted"]),
        "compiles": len(compiles),
        "median_step_seconds": median_step,
        "median_uncounted_step_seconds": median_uncounted,
        "median_full_compile_seconds": median_compile,
        "ratio": median_step / median_compile,
        "uncounted_ratio": median_uncounted / median_compile,
    }
