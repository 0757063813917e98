"""`xlabench compare`: eval results and policy versions side by side (`xlabench.eval.comparison_report`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from xlabench.agents.seeds import performance_profiles_figure
from xlabench.eval import comparison_report
from xlabench.files import write_atomically


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


def run_compare(args: argparse.Namespace) -> int:
    """Load every result, write report.md, report.png (training_curves.png), print the table."""

    documents = comparison_report.load_results(args.results)
    seed_runs = [runs for path in args.results if (runs := comparison_report.load_seed_runs(path))]
    os.makedirs(args.report, exist_ok=True)
    table = comparison_report.markdown(args.title, documents, seed_runs)
    write_atomically(os.path.join(args.report, "report.md"), table.encode())
    if documents:
        write_atomically(
            os.path.join(args.report, "report.png"), comparison_report.plot(args.title, documents)
        )
    curves = comparison_report.plot_curves(documents)
    if curves is not None:
        write_atomically(os.path.join(args.report, "training_curves.png"), curves)
    for spec, group in comparison_report.by_selection(seed_runs).items():
        figure = performance_profiles_figure(
            {run.label: run.matrix() for run in group}, f"{args.title}: {spec}"
        )
        write_atomically(os.path.join(args.report, f"performance_profiles_{spec}.png"), figure)
    print(table, end="")
    return 0
