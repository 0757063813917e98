"""`xlabench bench scaling`: what a step of the driver costs as modules grow, next to XLA's full compile
(`xlabench.bench.size_scaling`)."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from xlabench.bench.size_scaling import DEFAULT_SIZES, ScalingRow, measure_scaling
from xlabench.errors import UserInputError
from xlabench.settings import Settings
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS


def register(bench_subparsers: Any) -> None:
    """Add `scaling` under `xlabench bench`."""
    parser = bench_subparsers.add_parser(
        "scaling", help="step and full-compile seconds of GPT-2 stacks from ~1k to ~50k ops"
    )
    parser.add_argument(
        "--sizes", default=",".join(map(str, DEFAULT_SIZES)), help="target op counts, comma-separated"
    )
    parser.add_argument(
        "--actions", default="simplification", help=f"passes timed on each module ({', '.join(ACTION_SETS)})"
    )
    parser.add_argument("--keep", type=Path, metavar="DIR", help="also write the generated modules to DIR")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(handler=run_scaling_benchmark)


def _sizes(spec: str) -> list[int]:
    try:
        sizes = [int(part) for part in spec.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or min(sizes) < 100:
        raise UserInputError(f"--sizes {spec}: expected op counts of at least 100, e.g. 1000,5000")
    return sizes


def run_scaling_benchmark(args: argparse.Namespace, settings: Settings) -> int:
    """Generate one module per size, then time loading, single passes, the default pipeline and a compile."""
    printed: list[ScalingRow] = []

    def heard(row: ScalingRow) -> None:
        if not args.json:
            _print_row(row, header=not printed)
        printed.append(row)

    rows = measure_scaling(_sizes(args.sizes), args.actions, args.keep, heard, settings=settings)
    if args.json:
        measured = [
            {**asdict(row), "step_ms_per_thousand_ops": row.step_ms_per_thousand_ops, "ratio": row.ratio}
            for row in rows
        ]
        print(json.dumps({"actions": args.actions, "rows": measured}))
    return 0


def _print_row(row: ScalingRow, header: bool) -> None:
    if header:
        print(f"{'ops':>7} {'layers':>6} {'MB':>6} {'load s':>8} {'step s':>8} {'ms/kop':>7} "
              f"{'default s':>10} {'compile s':>10} {'step/compile':>12}")  # fmt: skip
    print(
        f"{row.op_count:7} {row.layers:6} {row.text_bytes / 1e6:6.1f} {row.load_seconds:8.2f} "
        f"{row.median_step_seconds:8.2f} {row.step_ms_per_thousand_ops:7.1f} "
        f"{row.default_pipeline_seconds:10.2f} {row.full_compile_seconds:10.2f} {row.ratio:12.3f}",
        flush=True,
    )
