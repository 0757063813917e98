"""`xlabench compilers diff`: what a compiler change does to every graph (`xlabench.eval.compiler_diff`)."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.cli.arguments import POSITIVE, seconds
from xlabench.errors import UserInputError
from xlabench.eval.compiler_diff import print_diff, run_compiler_diff, write_diff_report
from xlabench.eval.evaluate import DEFAULT_POLICY
from xlabench.files import write_json
from xlabench.graphs import resolve_graphs
from xlabench.settings import Settings
from xlabench.xla.compilers.named_compilers import compiler_build, resolve_compiler
from xlabench.xla.shared.releases import compiler_title


def register(subparsers: Any) -> None:
    """Add `compilers diff` to the `compilers` group."""
    parser = subparsers.add_parser("diff", help="what a compiler change does to every graph, and which pass")
    parser.add_argument(
        "base", help="the base compiler: a release or an added compiler's name (`compilers list`)"
    )
    parser.add_argument("head", help="the head compiler, named the same way")
    parser.add_argument("--graphs", default="all", help="graph SPEC (default all)")
    parser.add_argument("--policy", default=DEFAULT_POLICY, help=f"NAME[@vX.Y] (default {DEFAULT_POLICY})")
    parser.add_argument("--json", metavar="FILE", help="write the diff as one JSON document")
    parser.add_argument("--report", metavar="DIR", help="write report.md and changes.png to DIR")
    parser.add_argument("--no-runtime", action="store_true", help="skip executing: no runtimes, no outputs")
    parser.add_argument("--repeats", type=POSITIVE, default=20, help="timed runs of each executable")
    parser.add_argument(
        "--workers", type=POSITIVE, default=2, help="graphs at a time (a worker per compiler each)"
    )
    parser.add_argument(
        "--tolerance",
        type=seconds(),
        default=0.0,
        help="D or R may grow this much (relative) before it regresses",
    )
    parser.set_defaults(handler=run_diff_command)


def run_diff_command(args: argparse.Namespace, settings: Settings) -> int:
    """Exit 1 when a graph regressed on head, 0 otherwise; files are written whole, at the end."""
    if args.tolerance < 0:
        raise UserInputError(f"--tolerance must be 0 or more, not {args.tolerance}")
    base, head = resolve_compiler(args.base, settings), resolve_compiler(args.head, settings)
    if base.name == head.name:
        raise UserInputError(f"base and head are both {compiler_title(base.name)}: nothing to diff")
    if compiler_build(base) == compiler_build(head):
        raise UserInputError(
            f"{compiler_title(base.name)} and {compiler_title(head.name)} are one build "
            f"({compiler_build(base)}): nothing to diff"
        )
    graphs = resolve_graphs(args.graphs)
    diff = run_compiler_diff(
        base, head, graphs, args.policy, not args.no_runtime, args.repeats, args.workers, args.tolerance,
        settings=settings,
    )  # fmt: skip
    print_diff(diff)
    command = f"xlabench compilers diff {args.base} {args.head} --graphs {args.graphs} --policy {args.policy}"
    command += " --no-runtime" if args.no_runtime else ""
    if args.json:
        write_json(args.json, diff.to_dict())
    if args.report:
        write_diff_report(args.report, diff, command)
    return 1 if diff.regressions() else 0
