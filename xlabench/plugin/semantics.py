"""Hypothesis: any pass sequence from the action set leaves a module that computes what the original did.

Strategies draw sequences (1-30 actions), graphs (`semantics_graphs`: the smallest of each family in
each element type, and the smallest training steps) and inputs (several seeds, signed or not); the
property: the sequence's executable computes what XLA's default executable of the original does, on the
same inputs (`judge_outputs`: equal within a dtype-aware tolerance, or on bf16 arithmetic no less
accurate against the module lifted to f32). An example whose default outputs are mostly NaN, or whose
inputs leave the program's domain (`judge_sequence`: NaN without XLA's finite-math simplifications),
proves nothing: it is flagged, counted and not compared. An action whose required pass has not run yet is
left out, as the environment masks it; an action XLA refuses leaves the module as it was, as in the
environment, and is not counted as exercised. Shrinking ends on a minimal failing sequence; it is saved
as a reproducer (module.hlo, passes.txt, reproducer.json with the jaxlib version) that
`xlabench apply module.hlo PASS... -o out.hlo --check-outputs` replays.

A miscompile is kept, never silenced, by copying its reproducer directory to `baselines/miscompiles/`:
it is then pinned to the jaxlib it was found with. On that jaxlib the suite replays it as an expected
failure (and the property does not fail again on that very example); on another jaxlib it must pass
-- the bug is fixed -- or the replay fails, saying so.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.baselines.baseline_store import BaselineError, baselines_directory
from xlabench.errors import CompilerError
from xlabench.graphs import Graph, resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.compilers.pass_catalogue import base_pass
from xlabench.xla.compilers.reproducers import write_reproducer
from xlabench.xla.driver.execution import judge_against_unoptimized, judge_sequence, nan_share
from xlabench.xla.driver.hlo_module import HloModule
from xlabench.xla.shared.cache_directory import cache_directory

if TYPE_CHECKING:  # Hypothesis is imported where a check runs: the plugin loads with every pytest run
    from hypothesis import strategies as st

MAX_SEQUENCE = 30
INPUT_SEEDS = 4  # input sets an example may draw (seed 0..3), each signed or non-negative
# An example whose default outputs hold more NaN than this share is flagged, not compared.
NAN_FLAG_SHARE = 0.5


def action_passes(driver: PassDriver) -> list[str]:
    """Every action of the `all` and `fixed-point` sets (single runs and fixed-point variants)."""
    catalogue = driver.catalogue
    return list(dict.fromkeys([*catalogue.action_passes("all"), *catalogue.action_passes("fixed-point")]))


def _output_of(problem: str) -> int | None:
    """The output index a verdict's problem line names (`output 49: ...`), or None."""
    match = re.match(r"output (\d+):", problem)
    return int(match.group(1)) if match else None


def semantics_graphs(spec: str = "all") -> list[Graph]:
    """What the property draws from: the smallest graph of each family in each element type, and the
    smallest training step in each (training graphs are large: one a type keeps examples cheap)."""
    chosen: dict[tuple[str, ...], Graph] = {}

    def keep(key: tuple[str, ...], graph: Graph) -> None:
        if key not in chosen or graph.instruction_count < chosen[key].instruction_count:
            chosen[key] = graph

    for graph in resolve_graphs(spec):
        dtype = str(graph.config.get("dtype", "-"))
        if graph.config.get("mode") == "train" or "train" in graph.name:
            keep(("train", dtype), graph)
        else:
            keep((graph.family, dtype), graph)
    return [chosen[key] for key in sorted(chosen)]


def pass_sequences(actions: list[str], min_size: int = 1, max_size: int = MAX_SEQUENCE) -> st.SearchStrategy:
    """Sequences of actions, `min_size` to `max_size` long (shrinking drops and simplifies steps)."""
    from hypothesis import strategies as st

    return st.lists(st.sampled_from(actions), min_size=min_size, max_size=max_size)


def covering_sequences(driver: PassDriver, actions: list[str], length: int = MAX_SEQUENCE) -> list[list[str]]:
    """Explicit examples that, together, run every action at least once: XLA's pipeline order, and a
    pass that requires another (`unmet_requirement`) gets it just before it when its chunk lacks it."""

    catalogue = driver.catalogue
    ordered = sorted(actions, key=lambda action: catalogue.passes[base_pass(action)].position)
    chunks: list[list[str]] = [[]]
    for action in ordered:
        needed = catalogue.unmet_requirement(action, chunks[-1])
        steps = [needed, action] if needed is not None else [action]
        if len(chunks[-1]) + len(steps) > length:
            chunks.append([])
            needed = catalogue.unmet_requirement(action, [])
            steps = [needed, action] if needed is not None else [action]
        chunks[-1].extend(steps)
    return chunks


MISCOMPILES_DIRECTORY = "miscompiles"


@dataclass
class Outcome:
    """What one example did: the actions applied, and how the outputs differ (empty: they match).
    `known` is the stored reproducer of this very miscompile (pinned to the installed jaxlib), if any."""

    applied: list[str]
    problems: list[str]
    known: Path | None = None
    # XLA's default outputs mostly NaN, or the inputs outside the program's domain: nothing compared.
    flagged: bool = False
    seed: int = 0  # the input set (`random_inputs` seed) ...
    signed: bool = False  # ... and whether its values kept their signs


@dataclass(frozen=True)
class KnownMiscompile:
    """A stored reproducer (`baselines/miscompiles/NAME/`): a module, a sequence, the jaxlib it broke on."""

    directory: Path
    graph: str
    sequence: tuple[str, ...]
    jaxlib: str
    disabled_passes: tuple[str, ...]
    seed: int = 0
    signed: bool = False

    @property
    def name(self) -> str:
        """The reproducer's directory name: the test id."""
        return self.directory.name


def known_miscompiles(baselines_root: Path | None = None) -> list[KnownMiscompile]:
    """The reproducers stored under `<baselines>/miscompiles/`; a damaged one is a one-line error."""

    root = (baselines_root or baselines_directory()) / MISCOMPILES_DIRECTORY
    known = []
    for details_file in sorted(root.glob("*/reproducer.json")):
        try:
            details = json.loads(details_file.read_text())
            known.append(
                KnownMiscompile(
                    details_file.parent,
                    details["graph"],
                    tuple(details["sequence"]),
                    details["jaxlib"],
                    tuple(details.get("disabled_passes", [])),
                    int(details.get("inputs", {}).get("seed", 0)),
                    bool(details.get("inputs", {}).get("signed", False)),
                )
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise BaselineError(f"{details_file}: not a reproducer xlabench wrote ({error})") from None
        if not (details_file.parent / "module.hlo").is_file():
            raise BaselineError(f"{details_file.parent}: module.hlo is missing")
    return known


def replay_miscompile(driver: PassDriver, known: KnownMiscompile) -> list[str]:
    """Apply the reproducer's sequence to its module; how the outputs differ (empty: they match)."""
    module = driver.load((known.directory / "module.hlo").read_text(), str(known.directory / "module.hlo"))
    current = module
    for action in known.sequence:
        current = driver.apply_action(current, action)[0]
    verdict, _ = judge_sequence(
        module, current, list(known.sequence), seed=known.seed, driver=driver, non_negative=not known.signed
    )
    return verdict.problems


@dataclass
class SemanticsCheck:
    """Runs the property on one driver; counts every action applied, keeps the last failing example."""

    driver: PassDriver
    modules: dict[str, HloModule] = field(default_factory=dict)
    coverage: collections.Counter = field(default_factory=collections.Counter)
    examples: int = 0
    flagged: int = 0
    last_failure: tuple[Graph, Outcome] | None = None
    known: list[KnownMiscompile] = field(default_factory=list)

    def run(self, graph: Graph, sequence: list[str], seed: int = 0, signed: bool = False) -> Outcome:
        """Apply `sequence` to `graph` (masked and refused actions skipped), then judge the outputs on
        input set `seed` (normal values, or their absolute values unless `signed`)."""
        module = self.modules.get(graph.name)
        if module is None:
            module = self.modules[graph.name] = self.driver.load(graph.hlo_text(), graph.name)
        catalogue = self.driver.catalogue
        current, applied = module, []
        for action in sequence:
            if catalogue.unmet_requirement(action, applied) is not None:
                continue  # masked in the environment: its required pass has not run
            try:
                current = self.driver.apply_action(current, action)[0]
            except CompilerError:
                continue  # refused by XLA: the environment leaves the module as it was
            self.coverage[action] += 1  # exercised: XLA ran it on this module
            applied.append(action)
        self.examples += 1
        verdict, default_outputs = judge_sequence(
            module, current, applied, seed=seed, driver=self.driver, non_negative=not signed
        )
        if nan_share(default_outputs) > NAN_FLAG_SHARE or verdict.outside_domain:
            self.flagged += 1
            return Outcome(applied, [], flagged=True, seed=seed, signed=signed)
        problems = verdict.problems
        if problems:
            problems = self._beyond_the_unoptimized(module, current, applied, problems, seed, signed)
        outcome = Outcome(applied, problems, seed=seed, signed=signed)
        if outcome.problems:
            outcome.known = self._known(graph, applied)
            if outcome.known is None:
                self.last_failure = (graph, outcome)
        return outcome

    def _beyond_the_unoptimized(
        self,
        module: HloModule,
        current: HloModule,
        applied: list[str],
        problems: list[str],
        seed: int,
        signed: bool,
    ) -> list[str]:
        """The problems that stand. An output outside XLA's default's limit is excused only where the
        unoptimized program is itself outside it (bf16: XLA's algsimp removes rounding round trips, so
        the program a sequence starts from can be less accurate than the default with no pass at fault)
        and the sequence stays within the limit the unoptimized program sets."""
        unoptimized, _ = judge_sequence(
            module, module, [], seed=seed, driver=self.driver, non_negative=not signed
        )
        excused = {_output_of(problem) for problem in unoptimized.problems} - {None}
        if not excused:
            return problems
        against_unoptimized = judge_against_unoptimized(
            module, current, applied, seed=seed, driver=self.driver, non_negative=not signed
        )
        still = {_output_of(problem) for problem in against_unoptimized.problems}
        return [
            p
            for p in problems
            if _output_of(p) is None or _output_of(p) not in excused or _output_of(p) in still
        ]

    def _known(self, graph: Graph, applied: list[str]) -> Path | None:
        """The stored reproducer of this example's miscompile on the installed jaxlib, if there is one."""
        for known in self.known:
            if (
                (known.graph, known.sequence) == (graph.name, tuple(applied))
                and known.jaxlib == self.driver.jaxlib_version
                and known.disabled_passes == tuple(self.driver.disabled_passes)
            ):
                return known.directory
        return None

    def save_reproducer(self, directory: Path | None = None) -> Path | None:
        """Write the last failing example as a reproducer; return its directory."""
        if self.last_failure is None:
            return None
        graph, outcome = self.last_failure
        digest = hashlib.sha256(json.dumps([graph.name, outcome.applied]).encode()).hexdigest()[:12]
        base = directory or Path(cache_directory(self.driver.settings)) / "reproducers"
        target = base / f"semantics-{graph.name}-{digest}"
        module_file = target / "module.hlo"
        details: dict[str, Any] = {
            "graph": graph.name,
            "sequence": outcome.applied,
            "problems": outcome.problems,
            "jaxlib": self.driver.jaxlib_version,
            "disabled_passes": list(self.driver.disabled_passes),
            "inputs": {"seed": outcome.seed, "signed": outcome.signed},
            "replay": f"xlabench apply {module_file} {' '.join(outcome.applied)} -o out.hlo --check-outputs"
            + f" --input-seed {outcome.seed}"
            + (" --signed-inputs" if outcome.signed else ""),
        }
        write_reproducer(target, self.modules[graph.name].text, outcome.applied, "reproducer.json", details)
        return target


def database_directory() -> str:
    """Where Hypothesis keeps its examples: under the xlabench cache directory."""
    return os.path.join(cache_directory(), "hypothesis")
