"""`xlabench bench env`: what one environment step costs, next to a full XLA compile of the same module."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from xlabench.bench.driver_speed import default_benchmark_graph
from xlabench.cli.arguments import POSITIVE
from xlabench.xla import PassDriver
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS, DEFAULT_ACTION_SET


def register(bench_subparsers: Any) -> None:
    """Add `env` under `xlabench bench`."""
    parser = bench_subparsers.add_parser(
        "env", help="median environment step seconds vs full-compile seconds"
    )
    parser.add_argument(
        "graph", nargs="?", help="a suite graph or .hlo file (default: a ~1,000-op GPT-2 step)"
    )
    parser.add_argument("--steps", type=POSITIVE, default=60, help="environment steps to time")
    parser.add_argument(
        "--actions", default=DEFAULT_ACTION_SET, help=f"action set ({', '.join(ACTION_SETS)})"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_env_benchmark)


def run_env_benchmark(args: argparse.Namespace) -> int:
    """Random valid actions, transition cache off (every step compiles), full compiles in between.

    Two environments step in lockstep on the same actions, each with its own driver: one counts
    every step (the default), one only at the episode's end (`count_every_step=False`).
    """
    from xlabench.env import PassOrderingEnv

    graph = args.graph or default_benchmark_graph()
    counted, uncounted = (
        PassOrderingEnv(
            graphs=graph,
            action_set=args.actions,
            driver=PassDriver(use_cache=False),
            count_every_step=every_step,
        )
        for every_step in (True, False)
    )
    generator = np.random.default_rng(args.seed)
    seed = args.seed
    _, info = counted.reset(seed=seed)
    uncounted.reset(seed=seed)
    module = counted.module
    assert module is not None
    steps: dict[str, list[float]] = {"counted": [], "uncounted": []}
    compiles: list[float] = [counted.driver.full_compile_seconds(module)]
    while len(steps["counted"]) < args.steps:
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
    report = {
        "graph": info["graph"],
        "op_count": info["I"],
        "steps": len(steps["counted"]),
        "median_step_seconds": median_step,
        "median_uncounted_step_seconds": median_uncounted,
        "median_full_compile_seconds": median_compile,
        "ratio": median_step / median_compile,
        "uncounted_ratio": median_uncounted / median_compile,
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['graph']}: {report['op_count']} ops, {len(steps['counted'])} steps, transition cache off")
    print(f"median env step      {median_step * 1000:8.1f} ms  (one pass + one fair count)")
    print(f"  count at the end   {median_uncounted * 1000:8.1f} ms  (count_every_step=False, not last)")
    print(f"median full compile  {median_compile * 1000:8.1f} ms  ({len(compiles)} compiles)")
    print(
        f"ratio                {report['ratio']:.3f} (counted), {report['uncounted_ratio']:.3f} (at the end)"
    )
    return 0
