"""Robustness of the pass driver: random passes on suite modules, and every pass alone on every graph.

`fuzz` applies random single passes (random walks) and random sequences, counts each application's
outcome, checks every result is accepted again as input and that sequences keep the outputs
(`xlabench bench fuzz`); `standalone_passes` applies each candidate pass alone to each graph's raw
module, the measurement behind the catalogue's classes (`xlabench bench passes`).
"""

from __future__ import annotations

import collections
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from xlabench.errors import CompilerError, UserInputError
from xlabench.graphs import resolve_graphs
from xlabench.settings import Settings, current
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.driver.execution import compare_outputs, execute, random_inputs
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.driver.pass_driver import PassDriver, default_driver

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


def fuzz_modules(specs: list[str], driver: PassDriver | None = None) -> list[HloModule]:
    """The modules of the graph SPECs, or one mid-sized graph of each kind `FUZZ_GRAPH_CHOICES` names,
    loaded with `driver` (default the process's)."""
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
    return [HloModule.from_text(graph.hlo_text(), graph.name, driver) for graph in unique.values()]


def apply_counted(driver: PassDriver, module: HloModule, pass_name: str, tally: FuzzTally) -> HloModule:
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


def fuzz(
    graph_specs: list[str],
    action_set: str,
    singles: int,
    sequences: int,
    length: int,
    seed: int,
    workers: int,
    use_cache: bool = False,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Random single-pass applications and random sequences; the report of crashes and mismatches
    (`numeric_mismatches` and `reparse_failures` empty: the driver held). `settings` (default: those in
    effect) name the compiler."""
    settings = settings or current()
    modules = fuzz_modules(graph_specs, default_driver(settings))
    if not modules:
        raise UserInputError("no graphs to fuzz")
    pool = CompilerPool(size=workers, settings=settings)
    # By default every application compiles.
    driver = PassDriver(pool=pool, use_cache=use_cache, settings=settings)
    actions = driver.catalogue.action_passes(action_set)
    generator = random.Random(seed)
    tally = FuzzTally()
    started = time.perf_counter()

    # The reference is the original compiled the way a sequence's result is (required passes only),
    # so that only the sequence differs. A module whose outputs already differ between that compile
    # and XLA's default compile (e.g. argmax over near-tied bf16 logits) is unstable across compiles:
    # its differences are reported apart from mismatches.
    references: dict[str, tuple[list, list]] = {}
    unstable: dict[str, str] = {}
    for module in modules:
        inputs = random_inputs(module, seed=seed, driver=driver)
        required = execute(module, inputs, required_only=True, driver=driver).outputs
        default = execute(module, inputs, driver=driver).outputs
        references[module.fingerprint] = (inputs, required)
        problems = compare_outputs(default, required)
        if problems:
            unstable[module.fingerprint] = problems[0]

    # Singles: random walks, so each application meets a module state the walk reached.
    walk_plans = []
    remaining = singles
    while remaining > 0:
        length = min(remaining, generator.randint(5, 30))
        walk_plans.append((generator.choice(modules), [generator.choice(actions) for _ in range(length)]))
        remaining -= length
    sequence_plans = [
        (generator.choice(modules), [generator.choice(actions) for _ in range(length)])
        for _ in range(sequences)
    ]

    def walk(plan: tuple[HloModule, list[str]]) -> None:
        module, passes = plan
        for pass_name in passes:
            module = apply_counted(driver, module, pass_name, tally)

    def sequence(plan: tuple[HloModule, list[str]]) -> None:
        original, passes = plan
        module = original
        for pass_name in passes:
            module = apply_counted(driver, module, pass_name, tally)
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

    with ThreadPoolExecutor(max_workers=workers) as executor:
        list(executor.map(walk, walk_plans))
        list(executor.map(sequence, sequence_plans))
    pool.close()
    elapsed = time.perf_counter() - started
    totals = tally.totals()
    return {
        "modules": [module.source for module in modules],
        "action_set": action_set,
        "actions": len(actions),
        "passes_never_applied": [name for name in actions if name not in tally.outcomes],
        "single_applications": singles,
        "sequences": sequences,
        "sequence_length": length,
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


def standalone_passes(
    graph_spec: str,
    pass_names: list[str] | None,
    workers: int,
    use_cache: bool = True,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Apply each candidate pass (or `pass_names`) alone to each graph's raw module; outcomes per pass.

    A pass with a requirement (`catalogue.REQUIREMENTS`) is applied after the pass it requires. A
    candidate with no error, crash or timeout on any suite graph is an action; one that fails is
    excluded with the reason shown here. `settings` (default: those in effect) name the compiler.
    """
    settings = settings or current()
    graphs = resolve_graphs(graph_spec)
    pool = CompilerPool(size=workers, settings=settings)
    driver = PassDriver(pool=pool, use_cache=bool(use_cache), settings=settings)
    candidates = driver.catalogue.candidate_passes()
    for pass_name in pass_names or []:
        driver.check_pass(pass_name)
    passes = pass_names or candidates
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

    with ThreadPoolExecutor(max_workers=workers) as executor:
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
    return {
        "graphs": len(graphs),
        "passes": per_pass,
        "clean": clean,
        "failing": [name for name in passes if failures.get(name)],
        "seconds": time.perf_counter() - started,
    }
