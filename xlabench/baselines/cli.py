"""`xlabench baselines update|diff`: store what each policy achieves per graph; show what changed."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.errors import UserInputError
from xlabench.plugin.gates import MIN_RUN_SECONDS

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
        command.add_argument("--workers", type=int, default=2, help="compiler worker processes")
        command.add_argument("--repeats", type=int, default=20, help="timed runs of each executable")
        command.add_argument(
            "--min-run-time",
            type=float,
            default=BASELINE_RUN_SECONDS,
            metavar="SECONDS",
            help=f"time each executable at least this long in all (default {BASELINE_RUN_SECONDS})",
        )
    update.add_argument(
        "--measurements",
        type=int,
        default=BASELINE_MEASUREMENTS,
        help="store the median runtime ratio of this many measurements, each with its own compiles "
        f"(default {BASELINE_MEASUREMENTS}; the rollout is measured once, then comes from the cache)",
    )
    update.set_defaults(handler=run_update)
    diff.set_defaults(handler=run_diff)


def _policies(references: list[str] | None) -> list[str]:
    from xlabench.policies.artifact import policies_directory, policy_names

    chosen = references or policy_names()
    if not chosen:
        raise UserInputError(f"no policies in {policies_directory()} (train one with `xlabench retrain`)")
    return chosen


def _measure(
    reference: str, args: argparse.Namespace, measurements: int = 1
) -> tuple[Any, list[dict[str, Any]]]:
    """Load a policy and evaluate it on the graphs, runtimes included (`measurements` times: see
    `median_rows`)."""
    from xlabench.eval.evaluate import evaluate_graphs
    from xlabench.graphs import resolve_graphs
    from xlabench.policies.artifact import graph_scope
    from xlabench.policies.policy import load_policy
    from xlabench.xla import PassDriver
    from xlabench.xla.pool import CompilerPool

    pool = CompilerPool(size=max(1, args.workers))
    try:
        driver = PassDriver(pool=pool)
        if driver.disabled_passes and args.handler is run_update:
            raise UserInputError(
                f"XLABENCH_DISABLE_PASSES={','.join(driver.disabled_passes)}: baselines are measured with "
                "the whole compiler; unset it (`xlabench baselines diff` shows what the change does)"
            )
        policy = load_policy(reference, driver)
        graphs = resolve_graphs(args.graphs or graph_scope(policy.artifact.metadata))
        runs = [
            evaluate_graphs(
                driver,
                graphs,
                "policy",
                {"policy": policy},
                True,
                args.repeats,
                args.workers,
                label=policy.label if measurements == 1 else f"{policy.label} ({number}/{measurements})",
                min_run_seconds=args.min_run_time,
            )
            for number in range(1, measurements + 1)
        ]
        return policy, median_rows(runs)
    finally:
        pool.close()


def median_rows(runs: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row a graph from several evaluations of the same graphs: the median runtime ratio, every
    ratio measured kept (`runtime_ratios`). Op counts and sequences are deterministic: a graph whose
    measurements disagree on them, or failed in any, becomes an error row (not stored)."""
    import statistics

    rows = []
    for measured in zip(*runs, strict=True):
        row = dict(measured[0])
        if failed := next((other for other in measured if "error" in other), None):
            rows.append(failed)
            continue
        if any((other["R"], other["sequence"]) != (row["R"], row["sequence"]) for other in measured):
            row["error"] = "the rollout differed between measurements (op count or sequence)"
        else:
            ratios = [other["runtime_ratio"] for other in measured]
            row["runtime_ratio"], row["runtime_ratios"] = statistics.median(ratios), ratios
        rows.append(row)
    return rows


def run_update(args: argparse.Namespace) -> int:
    """Measure each policy on the graphs and store its baselines; graphs that failed are named."""
    from xlabench.baselines.storage import write

    if args.measurements < 1:
        raise UserInputError(f"--measurements must be at least 1, got {args.measurements}")
    failed = 0
    for reference in _policies(args.policy):
        policy, rows = _measure(reference, args, args.measurements)
        name = policy.artifact.metadata["name"]
        directory = write(name, policy.label, _compiler_version(), rows)
        for row in rows:
            if "error" in row:
                failed += 1
                print(f"{row['name']}: not stored: {row['error']}")
        stored = sum("error" not in row for row in rows)
        print(f"{policy.label}: {stored} graph(s) stored in {directory}")
    return 1 if failed else 0


def _compiler_version() -> str:
    """The jaxlib release this run compiles with (--compiler, $XLABENCH_COMPILER, or the installed one)."""
    from xlabench.xla.compilers import resolve_compiler

    return resolve_compiler().version


def run_diff(args: argparse.Namespace) -> int:
    """Per graph, stored -> now for op count and runtime ratio; exit 1 when an op count grew, a graph
    failed or has no baseline. Baselines made with another jaxlib are compared on purpose: that is how a
    compiler change (`--compiler VERSION`) is judged."""
    from xlabench.baselines.storage import load

    regressions = 0
    for reference in _policies(args.policy):
        policy, rows = _measure(reference, args)
        stored = load(
            policy.artifact.metadata["name"], policy.label, _compiler_version(), allow_jaxlib_change=True
        )
        if stored is None:
            raise UserInputError(f"{policy.label}: no stored baselines (run `xlabench baselines update`)")
        changes = []
        for row in rows:
            before = stored.get(row["name"])
            if before is None or "error" in row:
                regressions += 1
                changes.append((row["name"], "no baseline" if before is None else f"failed: {row['error']}"))
                continue
            if row["R"] == before["R"] and row["sequence"] == before["sequence"]:
                continue  # op counts are deterministic; runtimes alone are noise here (the plugin gates them)
            regressions += row["R"] > before["R"]
            what = f"R {before['R']} -> {row['R']} ({(row['R'] - before['R']) / before['R']:+.1%})"
            if before.get("runtime_ratio") and row.get("runtime_ratio"):
                what += f", runtime ratio {before['runtime_ratio']:.3f} -> {row['runtime_ratio']:.3f}"
            if row["sequence"] != before["sequence"]:
                what += "; sequence now: " + " ".join(row["sequence"])
            changes.append((row["name"], what))
        print(
            f"{policy.label} on jaxlib {_compiler_version()} vs {stored.directory}, made on jaxlib "
            f"{stored.metadata['jaxlib']} ({len(rows)} graphs, {len(changes)} changed):"
        )
        for name, what in changes:
            print(f"  {name}: {what}")
    return 1 if regressions else 0
