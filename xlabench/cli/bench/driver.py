"""`xlabench bench driver`, `fuzz`, `passes` and `replay`: speed, robustness and fidelity of the driver.

Each handler parses, calls one function of `xlabench.bench` and prints its figures (docs/driver.md).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from xlabench.bench.driver_speed import measure_driver_speed
from xlabench.bench.pass_fuzzing import fuzz, standalone_passes
from xlabench.bench.replay_fidelity import REPLAY_TOLERANCE, ReplayRow, replay_graphs
from xlabench.cli.arguments import NON_NEGATIVE, POSITIVE
from xlabench.eval.evaluation_records import worst_text
from xlabench.settings import Settings
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS, DEFAULT_ACTION_SET


def _add_actions_argument(parser: argparse.ArgumentParser) -> None:
    """The `--actions NAME` option every benchmark that applies actions takes."""
    parser.add_argument(
        "--actions", default=DEFAULT_ACTION_SET, help=f"action set ({', '.join(ACTION_SETS)})"
    )


def register(bench_subparsers: Any) -> None:
    """Add `driver` and `fuzz` under `xlabench bench`."""
    driver = bench_subparsers.add_parser("driver", help="median apply_pass seconds vs full-compile seconds")
    driver.add_argument(
        "graph", nargs="?", help="an .hlo file or suite graph (default: a ~1,000-op GPT-2 step)"
    )
    driver.add_argument("--rounds", type=POSITIVE, default=5, help="rounds over every action pass")
    _add_actions_argument(driver)
    driver.add_argument("--json", action="store_true", help="print one JSON object")
    driver.set_defaults(handler=run_driver_benchmark)

    fuzz = bench_subparsers.add_parser("fuzz", help="random single passes and sequences; count crashes")
    fuzz.add_argument("graphs", nargs="*", help="suite graph names, splits, .hlo files or directories")
    fuzz.add_argument("--singles", type=NON_NEGATIVE, default=2000, help="random single-pass applications")
    fuzz.add_argument("--sequences", type=NON_NEGATIVE, default=200, help="random sequences")
    fuzz.add_argument("--length", type=POSITIVE, default=20, help="passes per sequence")
    _add_actions_argument(fuzz)
    fuzz.add_argument("--workers", type=POSITIVE, default=2, help="compiler worker processes")
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--use-cache", action="store_true", help="reuse cached transitions (default: fresh)")
    fuzz.add_argument("--json", action="store_true", help="print one JSON object")
    fuzz.set_defaults(handler=run_fuzz)

    replay = bench_subparsers.add_parser(
        "replay", help="replay XLA's default pipeline one pass at a time; compare with XLA's own count"
    )
    replay.add_argument("graphs", nargs="?", default="all", help="graph SPEC (default: all)")
    replay.add_argument(
        "--workers", type=POSITIVE, default=2, help="compiler worker processes (graphs in parallel)"
    )
    replay.add_argument(
        "--no-cache", action="store_true", help="run every pass (default: transition cache on)"
    )
    replay.add_argument(
        "--trace",
        action="store_true",
        help="show XLA's pipeline and the replay state by state, and the pass where they part",
    )
    replay.add_argument("--json", action="store_true", help="print one JSON object")
    replay.set_defaults(handler=run_replay_benchmark)

    standalone = bench_subparsers.add_parser(
        "passes", help="apply every pass that runs before the counting point alone to every graph"
    )
    standalone.add_argument("graphs", nargs="?", default="all", help="graph SPEC (default: all)")
    standalone.add_argument("--passes", nargs="+", metavar="PASS", help="only these passes")
    standalone.add_argument("--workers", type=POSITIVE, default=2, help="compiler processes")
    standalone.add_argument("--no-cache", action="store_true", help="run every pass (default: cache on)")
    standalone.add_argument("--json", action="store_true", help="print one JSON object")
    standalone.set_defaults(handler=run_standalone_benchmark)


def run_driver_benchmark(args: argparse.Namespace, settings: Settings) -> int:
    """Time apply_pass for every action pass against full compiles of the same module."""
    report = measure_driver_speed(args.graph, args.actions, args.rounds, settings=settings)
    if args.json:
        print(json.dumps(report))
        return 0
    print(
        f"{report['graph']}: {report['op_count']} ops, {report['rounds']} rounds over "
        f"{report['actions']} action passes"
    )
    for name, seconds in sorted(report["per_pass_median_seconds"].items(), key=lambda item: -item[1]):
        print(f"  apply_pass {name:36} {seconds * 1000:8.1f} ms")
    apply_ms = report["median_apply_pass_seconds"] * 1000
    compile_ms = report["median_full_compile_seconds"] * 1000
    floor_ms = report["median_stopped_compile_seconds"] * 1000
    print(f"median apply_pass   {apply_ms:8.1f} ms  ({report['applications']} applications)")
    print(f"median full compile {compile_ms:8.1f} ms  ({report['compiles']} compiles)")
    print(f"ratio               {report['ratio']:.3f}")
    print(
        f"floor               {floor_ms:8.1f} ms  (the compile inside every step, with "
        f"every pass off: ratio {report['floor_ratio']:.3f})"
    )
    return 0


def run_fuzz(args: argparse.Namespace, settings: Settings) -> int:
    """Random single-pass applications and random sequences; report crashes and numeric mismatches."""
    report = fuzz(
        args.graphs, args.actions, args.singles, args.sequences, args.length, args.seed, args.workers,
        args.use_cache, settings=settings,
    )  # fmt: skip
    if args.json:
        print(json.dumps(report))
        return 1 if report["numeric_mismatches"] or report["reparse_failures"] else 0
    reparse_failures, mismatches = report["reparse_failures"], report["numeric_mismatches"]
    print(f"fuzzed {len(report['modules'])} modules: {', '.join(report['modules'])}")
    print(
        f"action set {report['action_set']}: {report['actions']} passes, "
        f"{report['actions'] - len(report['passes_never_applied'])} applied at least once"
    )
    print(f"{report['applications']} pass applications in {report['seconds']:.0f} s: {report['outcomes']}")
    print(f"{'pass':36} {'ok':>6} {'error':>6} {'crash':>6} {'timeout':>7}")
    for name, counter in report["per_pass"].items():
        print(
            f"{name:36} {counter.get('ok', 0):6} {counter.get('error', 0):6} "
            f"{counter.get('crash', 0):6} {counter.get('timeout', 0):7}"
        )
    for name, examples in report["error_examples"].items():
        print(f"  {name}: {examples[0]}")
    print(
        f"worker crashes {report['worker_crashes']}, timeouts {report['worker_timeouts']}, "
        "calling-process deaths 0"
    )
    print(
        f"outputs re-accepted as input: {report['applications'] - len(reparse_failures)} ok, "
        f"{len(reparse_failures)} failed"
    )
    print(
        f"numerics: {report['sequences_checked_numerically']} sequences compared on every output buffer, "
        f"{len(mismatches)} mismatches"
    )
    for mismatch in mismatches[:10]:
        print(f"  {mismatch}")
    for source, problem in report["unstable_modules"].items():
        print(f"unstable across XLA's own compiles (default vs required-only, no pass): {source}: {problem}")
    if report["unstable_module_differences"]:
        differed = len(report["unstable_module_differences"])
        print(f"  {differed} sequences on unstable modules differed (not mismatches)")
    return 1 if report["numeric_mismatches"] or report["reparse_failures"] else 0


def run_replay_benchmark(args: argparse.Namespace, settings: Settings) -> int:
    """Replay XLA's default pipeline pass by pass on every graph of a SPEC; print D vs replay."""

    def heard(row: ReplayRow, done: int, total: int) -> None:
        if args.trace and row.trace is not None and not args.json:
            print("\n".join([f"{row.name}:", *row.trace]), flush=True)
        figures = (
            f"D {row.default_ops} replay {row.replay_ops} ratio {row.ratio:.4f} "
            f"({row.applications} applications, {row.seconds:.0f} s)"
            if row.ratio is not None
            else f"FAILED: {row.error}"
        )
        print(f"replay [{done}/{total}] {row.name}: {figures}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    rows, summary = replay_graphs(
        args.graphs, args.workers, not args.no_cache, args.trace, heard, settings=settings
    )
    graphs_out = [row.to_json() for row in rows]
    if args.json:
        print(
            json.dumps(
                {"geomean_ratio": summary.geomean_ratio, "summary": summary.to_json(), "graphs": graphs_out}
            )
        )
        return 0 if summary.failed == 0 else 1
    print(f"{'graph':52} {'I':>6} {'D':>6} {'replay':>6} {'D/replay':>8} {'same':>4} {'passes':>6}")
    for row in rows:
        if row.ratio is not None:
            mark = "" if abs(row.ratio - 1) <= REPLAY_TOLERANCE else "  *"
            print(
                f"{row.name:52} {row.input_ops:6} {row.default_ops:6} {row.replay_ops:6} {row.ratio:8.4f} "
                f"{'yes' if row.same_module else 'no':>4} {row.applications:6}{mark}"
            )
            if mark and row.parting is not None:
                print(f"    {row.parting}")
        else:
            print(f"{row.name:52} FAILED: {row.error}")
    print(
        f"\n{'family':14} {'graphs':>6} {'within 1%':>9} {'same module':>11} {'geomean D/replay':>16}"
        "  worst graph"
    )
    for family, part in summary.families.items():
        print(
            f"{family:14} {part.graphs:6} {part.within_tolerance:9} {part.same_module:11} "
            f"{part.geomean_ratio:16.4f}  {worst_text(part.worst)}"
        )
    print(
        f"all: {summary.graphs} graphs, {summary.within_tolerance} within 1% of D, "
        f"{summary.same_module} ending on XLA's very module, "
        f"geomean D/replay {summary.geomean_ratio:.4f}, {summary.failed} failed; "
        f"target {'met' if summary.meets_target else 'NOT met'} "
        f"({time.perf_counter() - started:.0f} s, {'cache off' if args.no_cache else 'cache on'})"
    )
    return 0 if summary.failed == 0 else 1


def run_standalone_benchmark(args: argparse.Namespace, settings: Settings) -> int:
    """Apply each candidate pass alone to each graph's raw module; count outcomes per pass."""
    report = standalone_passes(args.graphs, args.passes, args.workers, not args.no_cache, settings=settings)
    per_pass = report["passes"]
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{'pass':36} {'class':14} {'ok':>5} {'error':>5} {'crash':>5} {'timeout':>7}")
    for name, row in per_pass.items():
        print(
            f"{name:36} {row['kind']:14} {row.get('ok', 0):5} {row.get('error', 0):5} "
            f"{row.get('crash', 0):5} {row.get('timeout', 0):7}"
        )
        for example in row["first_errors"][:2]:
            print(f"    {example}")
    print(
        f"{len(report['clean'])} of {len(per_pass)} passes apply cleanly on all {report['graphs']} graphs "
        f"({report['seconds']:.0f} s); failing: {', '.join(report['failing']) or 'none'}"
    )
    return 0
