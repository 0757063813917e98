"""`xlabench baselines update|diff`: store what each policy achieves per graph; show what changed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from xlabench.baselines.baseline_diff import SAME, Comparison, markdown_table, summary, text_table
from xlabench.baselines.baseline_store import baselines_directory
from xlabench.baselines.baseline_update import (
    BASELINE_MEASUREMENTS,
    BASELINE_RUN_SECONDS,
    REPEATS,
    AgainstPrevious,
    BaselineDiff,
    BaselineUpdate,
    diff_baselines,
    update_baselines,
)
from xlabench.baselines.gate_judgement import KNOWN_GAPS_FILE
from xlabench.baselines.search import (
    SEARCH_DIR,
    captured_shares,
    load_search_baselines,
    search_table,
    shares_table,
)
from xlabench.cli.arguments import POSITIVE, seconds
from xlabench.errors import UserInputError
from xlabench.files import write_atomically, write_json
from xlabench.settings import Settings
from xlabench.xla.shared.releases import compiler_title


def register(subparsers: Any) -> None:
    """Add the `baselines` subcommand."""
    parser = subparsers.add_parser(
        "baselines", help="store per-graph results of each policy (baselines/), compare with them"
    )
    commands = parser.add_subparsers(dest="baselines_command", required=True)
    update = commands.add_parser("update", help="measure and store (atomically) the baselines of policies")
    diff = commands.add_parser("diff", help="measure now and show what differs from the stored baselines")
    for command in (update, diff):
        command.add_argument(
            "--policy",
            action="append",
            help="NAME or NAME@vX.Y (repeatable; default: the latest version of every policy)",
        )
        command.add_argument(
            "--graphs",
            help="graph SPEC (default: the policy's scope, as in the plugin: all, or its families)",
        )
        command.add_argument("--workers", type=POSITIVE, default=2, help="compiler worker processes")
        command.add_argument(
            "--repeats", type=POSITIVE, default=REPEATS, help="timed runs of each executable"
        )
        command.add_argument(
            "--min-run-time",
            type=seconds(),
            default=BASELINE_RUN_SECONDS,
            metavar="SECONDS",
            help=f"time each executable at least this long in all (default {BASELINE_RUN_SECONDS})",
        )
    update.add_argument(
        "--measurements",
        type=POSITIVE,
        default=BASELINE_MEASUREMENTS,
        help="store the median runtime ratio of this many measurements, each with its own compiles "
        f"(default {BASELINE_MEASUREMENTS}; the rollout is measured once, then comes from the cache)",
    )
    update.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a stored graph fails a gate against XLA's default today (op count, runtime, "
        "outputs) and known-gaps.toml does not list it",
    )
    diff.add_argument("--report", metavar="FILE", help="also write the comparison as Markdown to FILE")
    diff.add_argument(
        "--changed-only", action="store_true", help="list only graphs whose status is not 'same'"
    )
    update.set_defaults(handler=run_update)
    diff.set_defaults(handler=run_diff)
    search = commands.add_parser(
        "search", help="the committed search baselines (baselines/search/) as one Markdown table"
    )
    search.add_argument("--root", type=Path, help="a directory laid out like baselines/search/")
    search.set_defaults(handler=run_search)
    paper = commands.add_parser(
        "paper",
        help="the paper's metric, mean (I - R) / (I - D) over graphs with I > D, from committed results",
    )
    paper.add_argument(
        "--root",
        type=Path,
        help="a directory laid out like baselines/ (search/, POLICY/; default: baselines/)",
    )
    paper.add_argument(
        "--policy", default="general", metavar="NAME", help="the shipped policy's baselines (default general)"
    )
    paper.add_argument("--json", metavar="FILE", help="also write the table as JSON to FILE")
    paper.set_defaults(handler=run_paper)


def run_search(args: argparse.Namespace, settings: Settings) -> int:
    """Print geomean vs_default of every stored strategy x budget x split, and the share of the best-known
    improvement each captures."""

    root = args.root or SEARCH_DIR
    baselines = load_search_baselines(root)
    if not baselines:
        raise UserInputError(f"{root}: no search baselines (STRATEGY/BUDGET/SPLIT/results.json)")
    print(search_table(baselines))
    print()
    # The best-known count of a graph also takes the shipped policy's stored baselines (beside search/).
    print(shares_table(captured_shares(root.parent)))
    return 0


def run_paper(args: argparse.Namespace, settings: Settings) -> int:
    """Print the paper's headline metric per strategy and family selection, read from committed JSON."""
    from xlabench.baselines.paper import markdown, paper_table, to_json

    root = args.root or baselines_directory(settings)
    if not root.is_dir():
        raise UserInputError(f"{root}: no such directory (expected a baselines/ directory)")
    table = paper_table(root, args.policy)
    print(markdown(table))
    if args.json:
        write_json(args.json, to_json(table))
    return 0


def run_update(args: argparse.Namespace, settings: Settings) -> int:
    """Measure each policy on the graphs and store its baselines; graphs that failed are named. For a
    new policy version, show per graph how it compares with the version stored before."""

    updates = update_baselines(
        args.policy, args.graphs, args.workers, args.repeats, args.min_run_time, args.measurements,
        heard=_show_update, settings=settings,
    )  # fmt: skip
    failed = any(update.not_stored for update in updates)
    failing = any(update.failing for update in updates)
    return 1 if failed or (args.strict and failing) else 0


def _show_update(update: BaselineUpdate) -> None:
    """What was stored and what was not; per stored graph, each gate against XLA's default it fails
    today and each listed gap it closed -- what the next pytest run reports -- and a summary line; a new
    version against the one before."""
    for row in update.not_stored:
        print(f"{row.name}: not stored: {row.error}")
    print(f"{update.label}: {update.stored} graph(s) stored in {update.directory}")
    for gates in update.gates:
        for line in gates.standing:  # a listed gap whose gate passes fails the next pytest run too
            print(f"{gates.graph}: stored, but fails a gate today: {line}")
        for line in gates.known:
            print(f"{gates.graph}: stored, fails a listed gap's gate: {line}")
    print(
        f"{update.label}: {update.failing} of {update.stored} stored graph(s) fail a gate against XLA's "
        f"default not listed in {KNOWN_GAPS_FILE}, {update.failing_only_listed} fail only listed ones"
    )
    if update.previous is not None:
        _show_against_previous(update.label, update.previous)


def _show_against_previous(label: str, previous: AgainstPrevious) -> None:
    """Per graph, the previous version -> this one; where this one is worse, what the reviewer must do."""
    print(f"{label} against {', '.join(previous.versions)} (the version stored before), per graph:")
    for line in text_table(previous.comparisons):
        print(f"  {line}")
    new = previous.new_graphs
    uncovered = f"; {new} graph(s) the version before did not cover" if new else ""
    print(f"  {summary(previous.comparisons)}{uncovered}")
    if worse := previous.worse:
        print(
            f'  {len(worse)} graph(s) worse than the version before: the gate fails on each ("op count vs '
            'previous version", "runtime vs previous version") until a reviewer lists it, with the '
            "reason, in baselines/known-gaps.toml: " + ", ".join(worse)
        )


def run_diff(args: argparse.Namespace, settings: Settings) -> int:
    """Per graph, stored -> now for op count and runtime ratio; exit 1 when an op count grew, a graph
    failed or has no baseline. Baselines made with another jaxlib are compared on purpose: that is how a
    compiler change (`--compiler VERSION`) is judged."""

    def listed(diff: BaselineDiff) -> list[Comparison]:
        comparisons = list(diff.comparisons)
        return [c for c in comparisons if c.status() != SAME] if args.changed_only else comparisons

    def show(diff: BaselineDiff) -> None:
        print(f"{_title(diff)}:")
        shown = listed(diff)
        for line in text_table(shown) if shown else []:
            print(f"  {line}")
        print(f"  {summary(diff.comparisons)}")

    diffs = diff_baselines(
        args.policy, args.graphs, args.workers, args.repeats, args.min_run_time, heard=show, settings=settings
    )
    if args.report:
        lines = [
            "# xlabench baselines diff",
            "",
            "R: op count after the policy's sequence (deterministic: any increase is a regression). Runtime: "
            "policy / XLA's default executable, median of interleaved runs (noisy: 'slower' only beyond "
            "the gate's noise tolerance).",
            "",
        ]
        for diff in diffs:
            lines += [
                f"## {_title(diff)}",
                "",
                *markdown_table(listed(diff)),
                "",
                summary(diff.comparisons),
                "",
            ]
        write_atomically(args.report, ("\n".join(lines) + "\n").encode())
        print(f"report written to {args.report}")
    return 1 if any(diff.regressions for diff in diffs) else 0


def _title(diff: BaselineDiff) -> str:
    """What a policy's comparison is: the policy, the compilers now and then, the stored set, the counts."""
    return (
        f"{diff.label} on {compiler_title(diff.compiler)} vs {diff.stored_directory}, made on "
        f"{compiler_title(diff.stored_compiler)} ({len(diff.comparisons)} graphs, {diff.changed} changed)"
    )
