"""`xlabench bench driver`, `fuzz` and `replay`: speed, robustness and fidelity figures of the pass driver.

They print figures rather than assert them: machines are noisy, so the driver benchmark times
single-pass applications and full compiles of the same module interleaved in one run and reports
medians and their ratio.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from xlabench.cli.arguments import NON_NEGATIVE, POSITIVE
from xlabench.cli.compilers import load_module
from xlabench.errors import CompilerError, DriverError, UserInputError
from xlabench.eval.evaluation_records import WorstGraph, geomean, worst_text
from xlabench.graphs import resolve_graphs
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS, DEFAULT_ACTION_SET
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline, trace_replay
from xlabench.xla.driver.execution import compare_outputs, execute, random_inputs
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver

# (family, name fragment) the fuzz run draws from by default: gather/scatter training steps (GPT-2,
# MoE, GNN), while loops from lax.scan (recurrent), conditionals and while loops (control_flow),
# convolutions (ResNet), bf16, an encoder-decoder, and two of TensorFlow's lowering (a CNN training
# step with select-and-scatter and donated variables, a tf.scan GRU).
FUZZ_GRAPH_CHOICES = (
    ("gpt2", "bf16"),
    ("moe", ""),
    ("gnn", ""),
    ("recurrent", ""),
    ("control_flow", ""),
    ("resnet", ""),
    ("bert", "f32"),
    ("t5", ""),
    ("tensorflow", "cnn-train"),
    ("tensorflow", "rnn-train"),
)


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


def default_benchmark_graph() -> str:
    """The graph benchmarks time by default: the suite's GPT-2 training step closest to 1,000 ops."""

    candidates = resolve_graphs("gpt2")  # every GPT-2 graph of the suite is a training step
    return min(candidates, key=lambda graph: abs(graph.instruction_count - 1000)).name


def time_each_pass(driver: PassDriver, module: HloModule, actions: list[str]) -> dict[str, float]:
    """Seconds of one `apply_pass` of each action on `module` (actions XLA refuses are left out)."""
    seconds: dict[str, float] = {}
    for pass_name in actions:
        started = time.perf_counter()
        try:
            driver.apply_pass(module, pass_name)
        except CompilerError:
            continue
        seconds[pass_name] = time.perf_counter() - started
    return seconds


def run_driver_benchmark(args: argparse.Namespace) -> int:
    """Time apply_pass for every action pass against full compiles of the same module."""

    module = load_module(args.graph or default_benchmark_graph())
    driver = PassDriver(use_cache=False)
    actions = driver.catalogue.action_passes(args.actions)
    driver.apply_pass(module, actions[0])  # start the worker and load the catalogue outside the timing
    per_pass: dict[str, list[float]] = collections.defaultdict(list)
    compiles: list[float] = []
    floors: list[float] = []  # the compile inside every step, with every pass off
    every_pass = sorted(driver.catalogue.passes)
    for _ in range(args.rounds):
        compiles.append(driver.full_compile_seconds(module))
        floors.append(
            driver.call_compiler("stopped_compile_seconds", None, module, disabled_passes=every_pass)
        )
        for pass_name, seconds in time_each_pass(driver, module, actions).items():
            per_pass[pass_name].append(seconds)
        compiles.append(driver.full_compile_seconds(module))
    applies = [seconds for series in per_pass.values() for seconds in series]
    median_apply, median_compile = statistics.median(applies), statistics.median(compiles)
    median_floor = statistics.median(floors)
    report = {
        "graph": module.source,
        "op_count": module.op_count,
        "rounds": args.rounds,
        "median_apply_pass_seconds": median_apply,
        "median_full_compile_seconds": median_compile,
        "ratio": median_apply / median_compile,
        "median_stopped_compile_seconds": median_floor,
        "floor_ratio": median_floor / median_compile,
        "per_pass_median_seconds": {name: statistics.median(series) for name, series in per_pass.items()},
    }
    if args.json:
        print(json.dumps(report))
        return 0
    print(f"{module.source}: {module.op_count} ops, {args.rounds} rounds over {len(actions)} action passes")
    for name, seconds in sorted(report["per_pass_median_seconds"].items(), key=lambda item: -item[1]):
        print(f"  apply_pass {name:36} {seconds * 1000:8.1f} ms")
    print(f"median apply_pass   {median_apply * 1000:8.1f} ms  ({len(applies)} applications)")
    print(f"median full compile {median_compile * 1000:8.1f} ms  ({len(compiles)} compiles)")
    print(f"ratio               {report['ratio']:.3f}")
    print(
        f"floor               {median_floor * 1000:8.1f} ms  (the compile inside every step, with "
        f"every pass off: ratio {report['floor_ratio']:.3f})"
    )
    return 0


@dataclass
class FuzzTally:
    """Outcome counts of a fuzz run, per pass and in total (thread-safe)."""

    outcomes: dict[str, collections.Counter[str]] = field(
        default_factory=lambda: collections.defaultdict(collections.Counter)
    )
    errors: dict[str, list[str]] = field(default_factory=lambda: collections.defaultdict(list))
    reparse_failures: list[str] = field(default_factory=list)
    numeric_mismatches: list[str] = field(default_factory=list)
    # Differences on modules whose outputs already differ between two of XLA's own compiles.
    unstable_differences: list[str] = field(default_factory=list)
    sequences_checked: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    label: str = "fuzz"  # names the benchmark in progress lines

    def record(self, pass_name: str, outcome: str, detail: str = "") -> None:
        """Count one application (and say how far the run is, every 250)."""
        with self.lock:
            self.outcomes[pass_name][outcome] += 1
            if detail and len(self.errors[pass_name]) < 5 and detail not in self.errors[pass_name]:
                self.errors[pass_name].append(detail)
            done = sum(sum(counter.values()) for counter in self.outcomes.values())
            if done % 250 == 0:
                print(
                    f"{self.label}: {done} applications, {dict(self.totals())}", file=sys.stderr, flush=True
                )

    def totals(self) -> collections.Counter[str]:
        """Outcome counts over every pass."""
        total: collections.Counter[str] = collections.Counter()
        for counter in self.outcomes.values():
            total.update(counter)
        return total


def _fuzz_modules(specs: list[str]) -> list[HloModule]:

    graphs = [graph for spec in specs for graph in resolve_graphs(spec)] if specs else []
    if not specs:
        everything = resolve_graphs("all")
        for family, fragment in FUZZ_GRAPH_CHOICES:
            matching = sorted(
                (g for g in everything if g.family == family and fragment in g.name),
                key=lambda g: g.instruction_count,
            )
            small = [g for g in matching if 100 <= g.instruction_count <= 1500] or matching
            if small:
                graphs.append(small[len(small) // 2])
    unique = {graph.name: graph for graph in graphs}
    return [HloModule.from_text(graph.hlo_text(), source=graph.name) for graph in unique.values()]


def _apply_counted(driver: PassDriver, module: HloModule, pass_name: str, tally: FuzzTally) -> HloModule:
    """Apply one pass; count the outcome; check the result is accepted again as input."""
    try:
        result = driver.apply_pass(module, pass_name)
    except CompilerError as error:
        tally.record(pass_name, error.kind, error.message[:200])
        return module
    tally.record(pass_name, "ok")
    try:
        again = driver.load(result.text, source=f"{module.source} | {pass_name}")
        if again.fingerprint != result.fingerprint:
            tally.reparse_failures.append(f"{module.source} | {pass_name}: fingerprint changed on reload")
    except Exception as error:  # the point is to count it, whatever it is
        tally.reparse_failures.append(f"{module.source} | {pass_name}: {error}")
    return result


def run_fuzz(args: argparse.Namespace) -> int:
    """Random single-pass applications and random sequences; report crashes and numeric mismatches."""
    modules = _fuzz_modules(args.graphs)
    if not modules:
        raise UserInputError("no graphs to fuzz")
    pool = CompilerPool(size=args.workers)
    driver = PassDriver(pool=pool, use_cache=args.use_cache)  # by default every application compiles
    actions = driver.catalogue.action_passes(args.actions)
    generator = random.Random(args.seed)
    tally = FuzzTally()
    started = time.perf_counter()

    # The reference is the original compiled the way a sequence's result is (required passes only),
    # so that only the sequence differs. A module whose outputs already differ between that compile
    # and XLA's default compile (e.g. argmax over near-tied bf16 logits) is unstable across compiles:
    # its differences are reported apart from mismatches.
    references: dict[str, tuple[list, list]] = {}
    unstable: dict[str, str] = {}
    for module in modules:
        inputs = random_inputs(module, seed=args.seed, driver=driver)
        required = execute(module, inputs, required_only=True, driver=driver).outputs
        default = execute(module, inputs, driver=driver).outputs
        references[module.fingerprint] = (inputs, required)
        problems = compare_outputs(default, required)
        if problems:
            unstable[module.fingerprint] = problems[0]

    # Singles: random walks, so each application meets a module state the walk reached.
    walk_plans = []
    remaining = args.singles
    while remaining > 0:
        length = min(remaining, generator.randint(5, 30))
        walk_plans.append((generator.choice(modules), [generator.choice(actions) for _ in range(length)]))
        remaining -= length
    sequence_plans = [
        (generator.choice(modules), [generator.choice(actions) for _ in range(args.length)])
        for _ in range(args.sequences)
    ]

    def walk(plan: tuple[HloModule, list[str]]) -> None:
        module, passes = plan
        for pass_name in passes:
            module = _apply_counted(driver, module, pass_name, tally)

    def sequence(plan: tuple[HloModule, list[str]]) -> None:
        original, passes = plan
        module = original
        for pass_name in passes:
            module = _apply_counted(driver, module, pass_name, tally)
        inputs, expected = references[original.fingerprint]
        try:
            actual = execute(module, inputs, required_only=True, driver=driver, applied=passes).outputs
        except CompilerError as error:
            with tally.lock:
                tally.numeric_mismatches.append(f"{original.source} {passes}: {error}")
            return
        problems = compare_outputs(expected, actual)
        with tally.lock:
            tally.sequences_checked += 1
            if problems:
                found = (
                    tally.unstable_differences
                    if original.fingerprint in unstable
                    else tally.numeric_mismatches
                )
                found.append(f"{original.source} {' '.join(passes)}: {problems[0]}")

    with ThreadPoolExecutor(max_workers=args.workers) as executor:
        list(executor.map(walk, walk_plans))
        list(executor.map(sequence, sequence_plans))
    pool.close()
    elapsed = time.perf_counter() - started
    totals = tally.totals()
    report = {
        "modules": [module.source for module in modules],
        "action_set": args.actions,
        "actions": len(actions),
        "passes_never_applied": [name for name in actions if name not in tally.outcomes],
        "single_applications": args.singles,
        "sequences": args.sequences,
        "sequence_length": args.length,
        "applications": sum(totals.values()),
        "outcomes": dict(totals),
        "per_pass": {name: dict(counter) for name, counter in sorted(tally.outcomes.items())},
        "error_examples": {name: examples for name, examples in tally.errors.items() if examples},
        "worker_crashes": pool.crashes,
        "worker_timeouts": pool.timeouts,
        "calling_process_deaths": 0,  # reaching this line is the measurement
        "reparse_failures": tally.reparse_failures,
        "sequences_checked_numerically": tally.sequences_checked,
        "numeric_mismatches": tally.numeric_mismatches,
        "unstable_modules": {m.source: unstable[m.fingerprint] for m in modules if m.fingerprint in unstable},
        "unstable_module_differences": tally.unstable_differences,
        "seconds": elapsed,
    }
    if args.json:
        print(json.dumps(report))
    else:
        print(f"fuzzed {len(modules)} modules: {', '.join(report['modules'])}")
        print(
            f"action set {args.actions}: {len(actions)} passes, "
            f"{len(actions) - len(report['passes_never_applied'])} applied at least once"
        )
        print(f"{report['applications']} pass applications in {elapsed:.0f} s: {dict(totals)}")
        print(f"{'pass':36} {'ok':>6} {'error':>6} {'crash':>6} {'timeout':>7}")
        for name, counter in report["per_pass"].items():
            print(
                f"{name:36} {counter.get('ok', 0):6} {counter.get('error', 0):6} "
                f"{counter.get('crash', 0):6} {counter.get('timeout', 0):7}"
            )
        for name, examples in report["error_examples"].items():
            print(f"  {name}: {examples[0]}")
        print(f"worker crashes {pool.crashes}, timeouts {pool.timeouts}, calling-process deaths 0")
        print(
            f"outputs re-accepted as input: {report['applications'] - len(tally.reparse_failures)} ok, "
            f"{len(tally.reparse_failures)} failed"
        )
        print(
            f"numerics: {tally.sequences_checked} sequences compared on every output buffer, "
            f"{len(tally.numeric_mismatches)} mismatches"
        )
        for mismatch in tally.numeric_mismatches[:10]:
            print(f"  {mismatch}")
        for source, problem in report["unstable_modules"].items():
            print(
                f"unstable across XLA's own compiles (default vs required-only, no pass): {source}: {problem}"
            )
        if tally.unstable_differences:
            print(
                f"  {len(tally.unstable_differences)} sequences on unstable modules differed (not mismatches)"
            )
    return 1 if tally.numeric_mismatches or tally.reparse_failures else 0


# Replay within this fraction of XLA's own count is a match (the fidelity target).
REPLAY_TOLERANCE = 0.01


# Not frozen: replay_graph fills a row in as it measures (a compiler error may stop it at any field).
@dataclass
class ReplayRow:
    """One graph of `bench replay`: XLA's default count against the pass-by-pass replay's.

    JSON keys (`bench replay --json`, every key written, None or not): `I` = `input_ops`, `D` =
    `default_ops`, `replay` = `replay_ops` (the replay's fairly counted result), `ratio` = D / replay;
    `same_module`, `applications`, `parting`, `error` as named. The other fields are printed, not stored.
    """

    name: str
    family: str
    input_ops: int | None = None
    default_ops: int | None = None
    replay_ops: int | None = None
    # Whether the replay ends on XLA's very module (before counting), not just its count.
    same_module: bool | None = None
    ratio: float | None = None
    applications: int | None = None
    pass_errors: list[str] | None = None
    fixed_point_rounds: int | None = None
    # With --trace: where the replay parts from XLA's pipeline, and the lines that show both side by side.
    parting: str | None = None
    trace: list[str] | None = None
    error: str | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The graph's entry of `bench replay --json`."""
        return {
            "name": self.name,
            "family": self.family,
            "I": self.input_ops,
            "D": self.default_ops,
            "replay": self.replay_ops,
            "ratio": self.ratio,
            "same_module": self.same_module,
            "applications": self.applications,
            "parting": self.parting,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ReplayRow:
        """An entry of `bench replay --json`."""
        return cls(
            name=document["name"],
            family=document["family"],
            input_ops=document.get("I"),
            default_ops=document.get("D"),
            replay_ops=document.get("replay"),
            ratio=document.get("ratio"),
            same_module=document.get("same_module"),
            applications=document.get("applications"),
            parting=document.get("parting"),
            error=document.get("error"),
        )


def replay_graph(driver: PassDriver, graph: Any, trace: bool = False) -> ReplayRow:
    """D, the replay's fairly counted result and their ratio for one graph (with `trace`, where it
    parts from XLA's pipeline and the lines that show both side by side)."""

    started = time.perf_counter()
    row = ReplayRow(graph.name, graph.family)
    try:
        module = driver.load(graph.hlo_text(), graph.name)
        row.input_ops = driver.features(module).op_count
        default = driver.run_default_pipeline(module)
        row.default_ops = default_ops = driver.features(default).op_count
        replay = replay_default_pipeline(driver, module)
        row.replay_ops = replay_ops = driver.fair_op_count(replay.module, replay.passes)
        row.same_module = replay.module.fingerprint == default.fingerprint
        if trace:
            traced = trace_replay(driver, module, replay)
            row.parting, row.trace = traced.parting(), trace_lines(traced)
    except (CompilerError, DriverError) as error:  # a failed row: the other graphs go on
        row.error, row.seconds = str(error), time.perf_counter() - started
        return row
    row.ratio = default_ops / replay_ops
    row.applications = replay.applications
    row.pass_errors = [str(error) for error in replay.errors]
    row.fixed_point_rounds = replay.fixed_point_rounds
    row.seconds = time.perf_counter() - started
    return row


def trace_lines(trace: Any) -> list[str]:
    """XLA's changing runs and the replay's changing applications, each marked with the other's match."""
    ours = {state.fingerprint: index for index, state in enumerate(trace.replay)}
    theirs = {state.fingerprint for state in trace.xla}
    lines = ["  XLA's pipeline, each run that changed the module (canonical op count; = replay #k: same):"]
    for state in trace.xla:
        match = f"= replay #{ours[state.fingerprint] + 1}" if state.fingerprint in ours else ""
        lines.append(f"    {state.pass_name:70} {state.op_count:6}  {match}")
    lines.append(f"  the replay, each application that changed the module (from {trace.start.op_count} ops):")
    for index, state in enumerate(trace.replay):
        match = "= XLA" if state.fingerprint in theirs else ""
        lines.append(f"    #{index + 1:<3} {state.pass_name:65} {state.op_count:6}  {match}")
    lines.append(f"  {trace.parting()}")
    return lines


@dataclass(frozen=True)
class ReplaySummaryPart:
    """Geomean D/replay, graphs within REPLAY_TOLERANCE and the worst graph over some replay rows."""

    graphs: int
    failed: int
    geomean_ratio: float  # nan without a measured graph
    within_tolerance: int
    same_module: int
    worst: WorstGraph | None

    def to_json(self) -> dict[str, Any]:
        """The part as `bench replay --json` prints it (the worst graph's value under `ratio`)."""
        return {
            "graphs": self.graphs,
            "failed": self.failed,
            "geomean_ratio": self.geomean_ratio,
            "within_tolerance": self.within_tolerance,
            "same_module": self.same_module,
            "worst": None if self.worst is None else self.worst.to_json(value_key="ratio"),
        }


@dataclass(frozen=True)
class ReplaySummary(ReplaySummaryPart):
    """The replay over every graph, per family, and whether it meets the fidelity target."""

    families: dict[str, ReplaySummaryPart] = field(default_factory=dict)
    meets_target: bool = False

    def to_json(self) -> dict[str, Any]:
        """The `summary` of `bench replay --json`."""
        return {
            **super().to_json(),
            "families": {family: part.to_json() for family, part in self.families.items()},
            "meets_target": self.meets_target,
        }


def _replay_summary_fields(selected: list[ReplayRow]) -> dict[str, Any]:
    """The figures of a ReplaySummaryPart over `selected`."""
    measured = [row for row in selected if row.ratio is not None]
    ratios = [row.ratio for row in measured if row.ratio is not None]
    worst = max(measured, key=lambda row: abs(math.log(row.ratio or 1.0)), default=None)
    overall = geomean(ratios)
    return {
        "graphs": len(selected),
        "failed": len(selected) - len(measured),
        "geomean_ratio": float("nan") if overall is None else overall,
        "within_tolerance": sum(abs(ratio - 1) <= REPLAY_TOLERANCE for ratio in ratios),
        "same_module": sum(1 for row in measured if row.same_module),
        "worst": None if worst is None or worst.ratio is None else WorstGraph(worst.name, worst.ratio),
    }


def replay_summary(rows: list[ReplayRow]) -> ReplaySummary:
    """Geomean D/replay, graphs within REPLAY_TOLERANCE and the worst graph, overall and per family."""
    families = sorted({row.family for row in rows})
    overall = _replay_summary_fields(rows)
    per_family = {
        family: ReplaySummaryPart(**_replay_summary_fields([row for row in rows if row.family == family]))
        for family in families
    }
    meets_target = (
        overall["failed"] == 0
        and overall["within_tolerance"] >= 0.95 * overall["graphs"]
        and 0.995 <= overall["geomean_ratio"] <= 1.005
        and all(abs(part.geomean_ratio - 1) <= REPLAY_TOLERANCE for part in per_family.values())
    )
    return ReplaySummary(**overall, families=per_family, meets_target=meets_target)


def run_replay_benchmark(args: argparse.Namespace) -> int:
    """Replay XLA's default pipeline pass by pass on every graph of a SPEC; print D vs replay."""

    graphs = resolve_graphs(args.graphs)
    pool = CompilerPool(size=args.workers)
    driver = PassDriver(pool=pool, use_cache=not args.no_cache)
    driver.check_pass("algsimp")  # discovers the pipeline once, before the threads start
    rows: list[ReplayRow] = []
    lock = threading.Lock()

    def run(graph: Any) -> None:
        row = replay_graph(driver, graph, trace=args.trace)
        with lock:
            rows.append(row)
            if args.trace and row.trace is not None and not args.json:
                print("\n".join([f"{graph.name}:", *row.trace]), flush=True)
            figures = (
                f"D {row.default_ops} replay {row.replay_ops} ratio {row.ratio:.4f} "
                f"({row.applications} applications, {row.seconds:.0f} s)"
                if row.ratio is not None
                else f"FAILED: {row.error}"
            )
            print(f"replay [{len(rows)}/{len(graphs)}] {graph.name}: {figures}", file=sys.stderr, flush=True)

    started = time.perf_counter()
    # Largest graphs first, so the last graph to finish is a small one.
    ordered = sorted(graphs, key=lambda graph: -graph.instruction_count)
    with ThreadPoolExecutor(max_workers=args.workers) as executor:
        list(executor.map(run, ordered))
    pool.close()
    rows.sort(key=lambda row: row.name)
    summary = replay_summary(rows)
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


def run_standalone_benchmark(args: argparse.Namespace) -> int:
    """Apply each candidate pass alone to each graph's raw module; count outcomes per pass.

    A pass with a requirement (`catalogue.REQUIREMENTS`) is applied after the pass it requires. This
    is the measurement behind the catalogue's classes: a candidate with no error, crash or timeout
    on any suite graph is an action; one that fails is excluded with the reason shown here.
    """

    graphs = resolve_graphs(args.graphs)
    pool = CompilerPool(size=args.workers)
    driver = PassDriver(pool=pool, use_cache=not args.no_cache)
    candidates = driver.catalogue.candidate_passes()
    for pass_name in args.passes or []:
        driver.check_pass(pass_name)
    passes = args.passes or candidates
    tally = FuzzTally(label="passes")
    failures: dict[str, list[str]] = collections.defaultdict(list)
    started = time.perf_counter()

    def run(graph: Any) -> None:
        module = driver.load(graph.hlo_text(), graph.name)
        for pass_name in passes:
            requires = driver.catalogue.passes[pass_name].requires
            try:
                start = module if requires is None else driver.apply_pass(module, requires)
                driver.apply_pass(start, pass_name)
                tally.record(pass_name, "ok")
            except CompilerError as error:
                tally.record(pass_name, error.kind, f"{graph.name}: {error.message[:300]}")
                with tally.lock:
                    failures[pass_name].append(graph.name)

    with ThreadPoolExecutor(max_workers=args.workers) as executor:
        list(executor.map(run, sorted(graphs, key=lambda graph: -graph.instruction_count)))
    pool.close()
    catalogue = driver.catalogue
    per_pass = {
        name: {
            "kind": catalogue.passes[name].kind,
            **dict(tally.outcomes[name]),
            "failed_graphs": sorted(failures.get(name, [])),
            "first_errors": tally.errors.get(name, []),
        }
        for name in passes
    }
    clean = [name for name in passes if not failures.get(name)]
    report = {
        "graphs": len(graphs),
        "passes": per_pass,
        "clean": clean,
        "failing": [name for name in passes if failures.get(name)],
        "seconds": time.perf_counter() - started,
    }
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
        f"{len(clean)} of {len(passes)} passes apply cleanly on all {len(graphs)} graphs "
        f"({report['seconds']:.0f} s); failing: {', '.join(report['failing']) or 'none'}"
    )
    return 0
