"""`xlabench baselines update|diff`: store what each policy achieves per graph; show what changed."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.baselines.baseline_diff import (
    MIN_RUN_SECONDS,
    MORE_OPS,
    REGRESSIONS,
    SLOWER,
    Comparison,
    Tolerances,
    counts,
    markdown_table,
    summary,
    text_table,
)
from xlabench.baselines.baseline_store import baselines_directory, load, made_with, previous_versions, write
from xlabench.baselines.policy_measurement import measure_policy
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
from xlabench.plugin.gates import KNOWN_GAPS_FILE, judge, load_known_gaps, split_known
from xlabench.policies.artifact import policies_directory, policy_names
from xlabench.xla.compilers.named_compilers import describe_compiler, resolve_compiler
from xlabench.xla.shared.releases import compiler_title

if TYPE_CHECKING:  # `xlabench --help` stays quick: the evaluation is imported when a command runs
    from xlabench.baselines.baseline_records import PreviousVersion
    from xlabench.eval.evaluation_records import EvaluationRow

# A stored runtime ratio is what every later run is held to: time it longer than a gate does ...
BASELINE_RUN_SECONDS = 4 * MIN_RUN_SECONDS
# ... and store the median of several measurements: one, timed for 1 s a side, stored 0.616 for a policy
# whose executable measured 0.99 and 1.00 against the default in CI (and 1.007 in the baseline before).
BASELINE_MEASUREMENTS = 3


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
        command.add_argument("--repeats", type=POSITIVE, default=20, help="timed runs of each executable")
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


def run_search(args: argparse.Namespace) -> int:
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


def run_paper(args: argparse.Namespace) -> int:
    """Print the paper's headline metric per strategy and family selection, read from committed JSON."""
    from xlabench.baselines.paper import markdown, paper_table, to_json

    root = args.root or baselines_directory()
    if not root.is_dir():
        raise UserInputError(f"{root}: no such directory (expected a baselines/ directory)")
    table = paper_table(root, args.policy)
    print(markdown(table))
    if args.json:
        write_json(args.json, to_json(table))
    return 0


def _policies(references: list[str] | None) -> list[str]:

    chosen = references or policy_names()
    if not chosen:
        raise UserInputError(f"no policies in {policies_directory()} (train one with `xlabench retrain`)")
    return chosen


def run_update(args: argparse.Namespace) -> int:
    """Measure each policy on the graphs and store its baselines; graphs that failed are named. For a
    new policy version, show per graph how it compares with the version stored before."""

    failed = failing = 0
    gaps = load_known_gaps(baselines_directory() / KNOWN_GAPS_FILE)
    for reference in _policies(args.policy):
        policy, rows = measure_policy(
            reference, args.graphs, args.workers, args.repeats, args.min_run_time, args.measurements, True
        )
        name = policy.artifact.metadata["name"]
        before = previous_versions(name, policy.label)
        compiler = resolve_compiler()
        directory = write(name, policy.label, compiler.name, rows, compiler=describe_compiler(compiler))
        for row in rows:
            if row.error is not None:
                failed += 1
                print(f"{row.name}: not stored: {row.error}")
        stored = sum(row.error is None for row in rows)
        print(f"{policy.label}: {stored} graph(s) stored in {directory}")
        failing += _show_failing_gates(policy.label, rows, gaps)
        if before:
            _show_against_previous(policy.label, before, rows)
    return 1 if failed or (args.strict and failing) else 0


def _show_failing_gates(label: str, rows: list[EvaluationRow], gaps: list[Any]) -> int:
    """Per stored graph, each gate against XLA's default (op count, runtime, outputs) it fails today,
    and each listed gap it closed -- what the next pytest run reports at the default tolerances -- and a
    summary line; how many graphs fail one not listed."""
    unlisted = listed = 0
    for row in rows:
        if row.error is not None:
            continue
        failures = judge(row, None, Tolerances())
        covering = [gap for gap in gaps if gap.covers(row.name, label)]
        standing, known, _ = split_known(failures, covering)
        for line in standing:  # a listed gap whose gate passes fails the next pytest run too
            print(f"{row.name}: stored, but fails a gate today: {line}")
        for line in known:
            print(f"{row.name}: stored, fails a listed gap's gate: {line}")
        unlisted += bool(standing)
        listed += bool(known) and not standing
    stored = sum(row.error is None for row in rows)
    print(
        f"{label}: {unlisted} of {stored} stored graph(s) fail a gate against XLA's default not listed in "
        f"{KNOWN_GAPS_FILE}, {listed} fail only listed ones"
    )
    return unlisted


def _show_against_previous(label: str, before: dict[str, PreviousVersion], rows: list[EvaluationRow]) -> None:
    """Per graph, the previous version -> this one; where this one is worse, what the reviewer must do."""
    stored = [row for row in rows if row.error is None]
    comparisons = [Comparison(row.name, before[row.name], row) for row in stored if row.name in before]
    versions = sorted({record.policy for record in before.values()})
    print(f"{label} against {', '.join(versions)} (the version stored before), per graph:")
    for line in text_table(comparisons):
        print(f"  {line}")
    new = len(stored) - len(comparisons)
    print("  " + summary(comparisons) + (f"; {new} graph(s) the version before did not cover" if new else ""))
    worse = [c for c in comparisons if c.status() in (MORE_OPS, SLOWER)]
    if worse:
        print(
            f'  {len(worse)} graph(s) worse than the version before: the gate fails on each ("op count vs '
            'previous version", "runtime vs previous version") until a reviewer lists it, with the '
            "reason, in baselines/known-gaps.toml: " + ", ".join(c.graph for c in worse)
        )


def _compiler_version() -> str:
    """The name of the compiler this run compiles with (--compiler, $XLABENCH_COMPILER, or the installed
    one; a release's name is its version)."""

    return resolve_compiler().name


def run_diff(args: argparse.Namespace) -> int:
    """Per graph, stored -> now for op count and runtime ratio; exit 1 when an op count grew, a graph
    failed or has no baseline. Baselines made with another jaxlib are compared on purpose: that is how a
    compiler change (`--compiler VERSION`) is judged."""

    regressions, report = 0, []
    for reference in _policies(args.policy):
        policy, rows = measure_policy(reference, args.graphs, args.workers, args.repeats, args.min_run_time)
        stored = load(
            policy.artifact.metadata["name"], policy.label, _compiler_version(), allow_jaxlib_change=True
        )
        if stored is None:
            raise UserInputError(f"{policy.label}: no stored baselines (run `xlabench baselines update`)")
        comparisons = [Comparison(row.name, stored.get(row.name), row) for row in rows]
        regressions += sum(comparison.status() in REGRESSIONS for comparison in comparisons)
        found = counts(comparisons)
        changed = len(comparisons) - found.get("same", 0)
        title = (
            f"{policy.label} on {compiler_title(_compiler_version())} vs {stored.directory}, made on "
            f"{compiler_title(made_with(stored.metadata))} ({len(rows)} graphs, {changed} changed)"
        )
        listed = [c for c in comparisons if c.status() != "same"] if args.changed_only else comparisons
        print(f"{title}:")
        for line in text_table(listed) if listed else []:
            print(f"  {line}")
        print(f"  {summary(comparisons)}")
        report += [f"## {title}", "", *markdown_table(listed), "", summary(comparisons), ""]
    if args.report:
        lines = [
            "# xlabench baselines diff",
            "",
            "R: op count after the policy's sequence (deterministic: any increase is a regression). Runtime: "
            "policy / XLA's default executable, median of interleaved runs (noisy: 'slower' only beyond "
            "the gate's noise tolerance).",
            "",
            *report,
        ]
        write_atomically(args.report, ("\n".join(lines) + "\n").encode())
        print(f"report written to {args.report}")
    return 1 if regressions else 0
