"""`xlabench compare`: eval results and policy versions side by side (`xlabench.eval.comparison_report`)."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.eval.comparison_report import write_report
from xlabench.settings import Settings


def register(subparsers: Any) -> None:
    """Add the `compare` subcommand."""
    parser = subparsers.add_parser(
        "compare", help="compare `xlabench eval --json` results per split and family"
    )
    parser.add_argument(
        "results",
        nargs="+",
        help="JSON files written by `xlabench eval --json` or `retrain --seed-scores`, or policy version "
        "directories",
    )
    parser.add_argument(
        "--report",
        metavar="DIR",
        required=True,
        help="write report.md, report.png (and training_curves.png for policies)",
    )
    parser.add_argument("--title", default="Pass-ordering strategies against XLA's default pipeline")
    parser.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace, settings: Settings) -> int:
    """Load every result, write report.md, report.png (training_curves.png), print the table."""

    report = write_report(args.results, args.report, args.title)
    print(report.markdown, end="")
    return 0
