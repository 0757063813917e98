"""`xlabench bench env`: what one environment step costs, next to a full XLA compile of the same module
(`xlabench.bench.env_step_cost`)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from xlabench.bench.env_step_cost import measure_env_steps
from xlabench.cli.arguments import POSITIVE
from xlabench.settings import Settings
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


def run_env_benchmark(args: argparse.Namespace, settings: Settings) -> int:
    """Time environment steps (counted every step, and at the end) against full compiles; print medians."""
    report = measure_env_steps(args.graph, args.actions, args.steps, args.seed, settings=settings)
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{report['graph']}: {report['op_count']} ops, {report['steps']} steps, transition cache off")
    print(f"median env step      {report['median_step_seconds'] * 1000:8.1f} ms  (one pass + one fair count)")
    print(
        f"  count at the end   {report['median_uncounted_step_seconds'] * 1000:8.1f} ms  "
        "(count_every_step=False, not last)"
    )
    print(
        f"median full compile  {report['median_full_compile_seconds'] * 1000:8.1f} ms  "
        f"({report['compiles']} compiles)"
    )
    print(
        f"ratio                {report['ratio']:.3f} (counted), {report['uncounted_ratio']:.3f} (at the end)"
    )
    return 0
