"""Hypothesis: any pass sequence from the action set leaves a module that computes what the original did.

Strategies draw sequences (1-30 actions) and graphs (the smallest graph of each family); the property:
every output buffer of the sequence's executable matches XLA's default executable of the original
(dtype-aware tolerance, `compare_outputs`), on the same random inputs. An action whose required
pass has not run yet is left out, as the environment masks it; an action XLA refuses leaves the
module as it was, as in the environment. Shrinking ends on a minimal failing sequence; it is saved
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from xlabench.errors import CompilerError
from xlabench.files import write_atomically
from xlabench.graphs import Graph, resolve_graphs
from xlabench.xla import PassDriver
from xlabench.xla.cache import cache_directory
from xlabench.xla.execute import sequence_output_problems
from xlabench.xla.module import HloModule

MAX_SEQUENCE = 30


def action_passes(driver: PassDriver) -> list[str]:
    """Every action of the `all` and `fixed-point` sets (single runs and fixed-point variants)."""
    catalogue = driver.catalogue
    return list(dict.fromkeys([*catalogue.action_passes("all"), *catalogue.action_passes("fixed-point")]))


def small_graphs(spec: str = "all") -> list[Graph]:
    """The smallest graph of each family among `spec`'s graphs (cheap to compile and run)."""
    smallest: dict[str, Graph] = {}
    for graph in resolve_graphs(spec):
        kept = smallest.get(graph.family)
        if kept is None or graph.instruction_count < kept.instruction_count:
            smallest[graph.family] = graph
    return [smallest[family] for family in sorted(smallest)]


def pass_sequences(actions: list[str], min_size: int = 1, max_size: int = MAX_SEQUENCE) -> st.SearchStrategy:
    """Sequences of actions, `min_size` to `max_size` long (shrinking drops and simplifies steps)."""
    return st.lists(st.sampled_from(actions), min_size=min_size, max_size=max_size)


def covering_sequences(driver: PassDriver, actions: list[str], length: int = MAX_SEQUENCE) -> list[list[str]]:
    """Explicit examples that, together, run every action at least once: XLA's pipeline order, and a
    pass that requires another (`unmet_requirement`) gets it just before it when its chunk lacks it."""
    from xlabench.xla.catalogue import base_pass

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


@dataclass(frozen=True)
class KnownMiscompile:
    """A stored reproducer (`baselines/miscompiles/NAME/`): a module, a sequence, the jaxlib it broke on."""

    directory: Path
    graph: str
    sequence: tuple[str, ...]
    jaxlib: str
    disabled_passes: tuple[str, ...]

    @property
    def name(self) -> str:
        """The reproducer's directory name: the test id."""
        return self.directory.name


def known_miscompiles(baselines_root: Path | None = None) -> list[KnownMiscompile]:
    """The reproducers stored under `<baselines>/miscompiles/`; a damaged one is a one-line error."""
    from xlabench.baselines.storage import BaselineError, baselines_directory

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
    return sequence_output_problems(module, current, list(known.sequence), driver=driver)


@dataclass
class SemanticsCheck:
    """Runs the property on one driver; counts every action applied, keeps the last failing example."""

    driver: PassDriver
    modules: dict[str, HloModule] = field(default_factory=dict)
    coverage: collections.Counter = field(default_factory=collections.Counter)
    examples: int = 0
    last_failure: tuple[Graph, Outcome] | None = None
    known: list[KnownMiscompile] = field(default_factory=list)

    def run(self, graph: Graph, sequence: list[str]) -> Outcome:
        """Apply `sequence` to `graph` (masked and refused actions skipped), then compare outputs."""
        module = self.modules.get(graph.name)
        if module is None:
            module = self.modules[graph.name] = self.driver.load(graph.hlo_text(), graph.name)
        catalogue = self.driver.catalogue
        current, applied = module, []
        for action in sequence:
            if catalogue.unmet_requirement(action, applied) is not None:
                continue  # masked in the environment: its required pass has not run
            self.coverage[action] += 1  # run by XLA, whether it applies or is refused
            try:
                current = self.driver.apply_action(current, action)[0]
            except CompilerError:
                continue  # refused by XLA: the environment leaves the module as it was
            applied.append(action)
        self.examples += 1
        outcome = Outcome(applied, sequence_output_problems(module, current, applied, driver=self.driver))
        if outcome.problems:
            outcome.known = self._known(graph, applied)
            if outcome.known is None:
                self.last_failure = (graph, outcome)
        return outcome

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
        base = directory or Path(cache_directory()) / "reproducers"
        target = base / f"semantics-{graph.name}-{digest}"
        module_file = target / "module.hlo"
        write_atomically(module_file, self.modules[graph.name].text.encode())
        write_atomically(target / "passes.txt", ("\n".join(outcome.applied) + "\n").encode())
        details: dict[str, Any] = {
            "graph": graph.name,
            "sequence": outcome.applied,
            "problems": outcome.problems,
            "jaxlib": self.driver.jaxlib_version,
            "disabled_passes": list(self.driver.disabled_passes),
            "replay": f"xlabench apply {module_file} {' '.join(outcome.applied)} -o out.hlo --check-outputs",
        }
        write_atomically(target / "reproducer.json", (json.dumps(details, indent=1) + "\n").encode())
        return target


def database_directory() -> str:
    """Where Hypothesis keeps its examples: under the xlabench cache directory."""
    return os.path.join(cache_directory(), "hypothesis")
