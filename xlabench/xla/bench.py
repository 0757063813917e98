"""`xlabench bench driver` and `xlabench bench fuzz`: speed and robustness figures of the pass driver.

Both print figures rather than assert them: machines are noisy, so the driver benchmark times
single-pass applications and full compiles of the same module interleaved in one run and reports
medians and their ratio.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from xlabench.errors import CompilerError, UserInputError
from xlabench.xla.driver import PassDriver
from xlabench.xla.execute import compare_outputs, execute, random_inputs
from xlabench.xla.module import HloModule
from xlabench.xla.pool import CompilerPool

# (family, name fragment) the fuzz run draws from by default: gather/scatter training steps (GPT-2,
# MoE, GNN), while loops from lax.scan (recurrent), conditionals and while loops (control_flow),
# convolutions (ResNet), bf16, an encoder-decoder.
FUZZ_GRAPH_CHOICES = (
    ("gpt2", "bf16"),
    ("moe", ""),
    ("gnn", ""),
    ("recurrent", ""),
    ("control_flow", ""),
    ("resnet", ""),
    ("bert", "f32"),
    ("t5", ""),
)


def register(bench_subparsers: Any) -> None:
    """Add `driver` and `fuzz` under `xlabench bench`."""
    driver = bench_subparsers.add_parser("driver", help="median apply_pass seconds vs full-compile seconds")
    driver.add_argument(
        "graph", nargs="?", help="an .hlo file or suite graph (default: a ~1,000-op GPT-2 step)"
    )
    driver.add_argument("--rounds", type=int, default=5, help="rounds over every action pass")
    driver.add_argument("--json", action="store_true", help="print one JSON object")
    driver.set_defaults(handler=run_driver_benchmark)

    fuzz = bench_subparsers.add_parser("fuzz", help="random single passes and sequences; count crashes")
    fuzz.add_argument("graphs", nargs="*", help="suite graph names, splits, .hlo files or directories")
    fuzz.add_argument("--singles", type=int, default=2000, help="random single-pass applications")
    fuzz.add_argument("--sequences", type=int, default=200, help="random sequences")
    fuzz.add_argument("--length", type=int, default=20, help="passes per sequence")
    fuzz.add_argument("--workers", type=int, default=2, help="compiler worker processes")
    fuzz.add_argument("--seed", type=int, default=0)
    fuzz.add_argument("--use-cache", action="store_true", help="reuse cached transitions (default: fresh)")
    fuzz.add_argument("--json", action="store_true", help="print one JSON object")
    fuzz.set_defaults(handler=run_fuzz)


def _default_benchmark_module() -> HloModule:
    from xlabench.graphs import resolve_graphs

    candidates = resolve_graphs("gpt2")  # every GPT-2 graph of the suite is a training step
    graph = min(candidates, key=lambda graph: abs(graph.instruction_count - 1000))
    return HloModule.from_text(graph.hlo_text(), source=graph.name)


def run_driver_benchmark(args: argparse.Namespace) -> int:
    """Time apply_pass for every action pass against full compiles of the same module."""
    from xlabench.xla.cli import load_module

    module = load_module(args.graph) if args.graph else _default_benchmark_module()
    driver = PassDriver(use_cache=False)
    actions = driver.catalogue.action_passes()
    driver.apply_pass(module, actions[0])  # start the worker and load the catalogue outside the timing
    per_pass: dict[str, list[float]] = collections.defaultdict(list)
    compiles: list[float] = []
    for _ in range(args.rounds):
        compiles.append(driver.full_compile_seconds(module))
        for pass_name in actions:
            started = time.perf_counter()
            try:
                driver.apply_pass(module, pass_name)
            except CompilerError:
                continue
            per_pass[pass_name].append(time.perf_counter() - started)
        compiles.append(driver.full_compile_seconds(module))
    applies = [seconds for series in per_pass.values() for seconds in series]
    median_apply, median_compile = statistics.median(applies), statistics.median(compiles)
    report = {
        "graph": module.source,
        "op_count": module.op_count,
        "rounds": args.rounds,
        "median_apply_pass_seconds": median_apply,
        "median_full_compile_seconds": median_compile,
        "ratio": median_apply / median_compile,
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

    def record(self, pass_name: str, outcome: str, detail: str = "") -> None:
        """Count one application (and say how far the run is, every 250)."""
        with self.lock:
            self.outcomes[pass_name][outcome] += 1
            if detail and len(self.errors[pass_name]) < 5 and detail not in self.errors[pass_name]:
                self.errors[pass_name].append(detail)
            done = sum(sum(counter.values()) for counter in self.outcomes.values())
            if done % 250 == 0:
                print(f"fuzz: {done} applications, {dict(self.totals())}", file=sys.stderr, flush=True)

    def totals(self) -> collections.Counter[str]:
        """Outcome counts over every pass."""
        total: collections.Counter[str] = collections.Counter()
        for counter in self.outcomes.values():
            total.update(counter)
        return total


def _fuzz_modules(specs: list[str]) -> list[HloModule]:
    from xlabench.graphs import resolve_graphs

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
    actions = driver.catalogue.action_passes()
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
            actual = execute(module, inputs, required_only=True, driver=driver).outputs
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
