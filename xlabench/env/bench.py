"""`xlabench bench env`: what one environment step costs, next to a full XLA compile of the same module."""

from __future__ import annotations

import argparse
import json
import statistics
import time
from typing import Any

import numpy as np

from xlabench.xla.catalogue import ACTION_SETS, DEFAULT_ACTION_SET


def register(bench_subparsers: Any) -> None:
    """Add `env` under `xlabench bench`."""
    parser = bench_subparsers.add_parser(
        "env", help="median environment step seconds vs full-compile seconds"
    )
    parser.add_argument(
        "graph", nargs="?", help="a suite graph or .hlo file (default: a ~1,000-op GPT-2 step)"
    )
    parser.add_argument("--steps", type=int, default=60, help="environment steps to time")
    parser.add_argument(
        "--actions", default=DEFAULT_ACTION_SET, help=f"action set ({', '.join(ACTION_SETS)})"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_env_benchmark)


def run_env_benchmark(args: argparse.Namespace) -> int:
    """Random valid actions, transition cache off (every step compiles), full compiles in between."""
    from xlabench.env import PassOrderingEnv
    from xlabench.xla import PassDriver
    from xlabench.xla.bench import default_benchmark_graph

    graph = args.graph or default_benchmark_graph()
    env = PassOrderingEnv(graphs=graph, action_set=args.actions, driver=PassDriver(use_cache=False))
    generator = np.random.default_rng(args.seed)
    _, info = env.reset(seed=args.seed)
    module = env.module
    assert module is not None
    steps: list[float] = []
    compiles: list[float] = [env.driver.full_compile_seconds(module)]
    while len(steps) < args.steps:
        valid = np.flatnonzero(env.action_masks()[:-1])  # never stop: every timed step applies a pass
        started = time.perf_counter()
        _, _, terminated, truncated, info = env.step(int(generator.choice(valid)))
        steps.append(time.perf_counter() - started)
        if terminated or truncated:
            env.reset(seed=int(generator.integers(1 << 30)))
        if len(steps) % 10 == 0:  # full compiles interleaved with the steps: the same machine noise
            compiles.append(env.driver.full_compile_seconds(module))
    median_step, median_compile = statistics.median(steps), statistics.median(compiles)
    report = {
        "graph": info["graph"],
        "op_count": info["I"],
        "steps": len(steps),
        "median_step_seconds": median_step,
        "median_full_compile_seconds": median_compile,
        "ratio": median_step / median_compile,
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['graph']}: {report['op_count']} ops, {len(steps)} steps, transition cache off")
    print(f"median env step      {median_step * 1000:8.1f} ms  (one pass + one fair count)")
    print(f"median full compile  {median_compile * 1000:8.1f} ms  ({len(compiles)} compiles)")
    print(f"ratio                {report['ratio']:.3f}")
    return 0
