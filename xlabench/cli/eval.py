"""`xlabench eval`: a strategy (search baseline, XLA's own order, later a policy) vs XLA's default."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.cli.arguments import POSITIVE
from xlabench.eval.evaluate import DEFAULT_POLICY, evaluate
from xlabench.eval.evaluation_records import (
    BELOW,
    LEFT_UNOPTIMIZED,
    EvaluationRow,
    Summary,
    worst_text,
)
from xlabench.eval.report import write_report
from xlabench.files import write_json
from xlabench.policies.guided import DEFAULT_GUIDED_BUDGET
from xlabench.search.strategies import DEFAULT_BUDGET, DEFAULT_MAX_LENGTH
from xlabench.settings import Settings
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS, DEFAULT_ACTION_SET


def register(subparsers: Any) -> None:
    """Add the `eval` subcommand."""
    parser = subparsers.add_parser(
        "eval", help="judge a pass-ordering strategy against XLA's default pipeline"
    )
    parser.add_argument(
        "--policy",
        help=f"a trained policy (NAME, NAME@vX.Y or a version directory; default {DEFAULT_POLICY}), "
        "search:random|search:greedy|search:beam|search:local|search:guided, or replay",
    )
    parser.add_argument(
        "--guide",
        default=DEFAULT_POLICY,
        metavar="POLICY",
        help=f"the policy search:guided starts from (default {DEFAULT_POLICY})",
    )
    parser.add_argument("--graphs", default="test", help="SPEC: all, a split, a family, a graph, .hlo files")
    parser.add_argument("--json", metavar="OUT", help="write the results as one JSON object to OUT")
    parser.add_argument("--report", metavar="DIR", help="write report.md and vs_default.png to DIR")
    parser.add_argument("--no-runtime", action="store_true", help="skip executing and timing")
    parser.add_argument("--actions", default=DEFAULT_ACTION_SET, choices=sorted(ACTION_SETS))
    parser.add_argument(
        "--budget",
        type=POSITIVE,
        help=f"compiler calls per graph (default {DEFAULT_BUDGET}; search:guided {DEFAULT_GUIDED_BUDGET})",
    )
    parser.add_argument(
        "--max-length", type=POSITIVE, default=DEFAULT_MAX_LENGTH, help="passes per sequence (search)"
    )
    parser.add_argument("--width", type=POSITIVE, default=5, help="beam width (search:beam)")
    parser.add_argument("--repeats", type=POSITIVE, default=20, help="timed runs of each executable")
    parser.add_argument(
        "--workers", type=POSITIVE, default=2, help="compiler worker processes (graphs in parallel)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--checkpoint",
        metavar="FILE",
        help="keep every finished graph in FILE; run the same command again to resume where it stopped",
    )
    parser.add_argument(
        "--ray", metavar="ADDRESS", help="run graphs as tasks on this Ray cluster (auto, HOST:PORT)"
    )
    parser.set_defaults(handler=run_eval)


def run_eval(args: argparse.Namespace, settings: Settings) -> int:
    """Evaluate every graph of the SPEC in parallel; print the table, write JSON and report on success."""
    evaluation = evaluate(
        args.policy,
        args.graphs,
        runtime=not args.no_runtime,
        repeats=args.repeats,
        workers=args.workers,
        actions=args.actions,
        budget=args.budget,
        max_length=args.max_length,
        width=args.width,
        seed=args.seed,
        guide=args.guide,
        checkpoint_path=args.checkpoint,
        ray_address=args.ray,
        say=print,
        settings=settings,
    )
    _print_table(evaluation.label, evaluation.rows, evaluation.summary, compared=evaluation.runtime)
    # Files are written only now, whole and atomically: an interrupted run leaves none half-written.
    if args.json:
        write_json(args.json, evaluation.to_json())
    if args.report:
        title = f"xlabench eval --policy {evaluation.label} --graphs {args.graphs}"
        write_report(args.report, title, evaluation.rows, evaluation.summary)
    return 0 if evaluation.passed else 1


def _print_table(policy: str, rows: list[EvaluationRow], summary: Summary, *, compared: bool = True) -> None:
    print(f"{'graph':52} {'I':>6} {'D':>6} {'R':>6} {'vs_default':>10} {'runtime':>8} {'calls':>6}")
    for row in rows:
        if row.vs_default is None:
            print(f"{row.name:52} FAILED: {row.error}")
            continue
        runtime = "-" if row.runtime_ratio is None else f"{row.runtime_ratio:.3f}"
        if row.error is not None:
            runtime = "differs" if row.outputs_differ is not None else "not run"
        print(
            f"{row.name:52} {row.input_ops:6} {row.default_ops:6} {row.policy_ops:6} {row.vs_default:10.4f} "
            f"{runtime:>8} {row.calls:6}"
        )
    judged = [row for row in rows if row.output_errors]
    if judged:
        print("\nlow-precision graphs, error against the module lifted to f32 (sequence / XLA's default):")
        for row in judged:
            worst = max(row.output_errors or [], key=lambda error: error.rms_sequence)
            print(
                f"{row.name:52} output {worst.index}: rms {worst.rms_sequence:.3g} / "
                f"{worst.rms_default:.3g}, max {worst.max_sequence:.3g} / {worst.max_default:.3g}"
            )
    print(f"\n{'family':14} {'graphs':>6} {'geomean vs_default':>18}  worst graph")
    for family, part in summary.families.items():
        value = part.geomean_vs_default
        print(
            f"{family:14} {part.graphs:6} {'-' if value is None else f'{value:18.4f}':>18}  "
            f"{worst_text(part.worst)}"
        )
    value = summary.geomean_vs_default
    print(
        f"{policy}: {summary.graphs} graphs, geomean vs_default "
        f"{'-' if value is None else f'{value:.4f}'}, {summary.calls} compiler calls, "
        f"{summary.failed} failed, "
        # Without executing, nothing was compared: "0 with outputs that differ" would say it was.
        + (
            f"{summary.outputs_differ} with outputs that differ"
            if compared
            else "outputs not compared (--no-runtime)"
        )
        + (f", {summary.not_executed} not executed" if summary.not_executed else "")
        + f"; {summary.below} below {BELOW}, {summary.left_unoptimized} left unoptimized "
        f"(R = I where XLA's default removes over {LEFT_UNOPTIMIZED:.0%})"
    )
    for row in rows:
        if row.error is not None and row.measured:
            print(f"{row.name}: {row.error}")
