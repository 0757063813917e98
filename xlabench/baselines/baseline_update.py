"""Storing each policy's baselines, judged as the gates will judge them (`xlabench baselines update`), and
measuring again to see what differs from them (`xlabench baselines diff`): one record a policy."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from xlabench.baselines.baseline_diff import (
    MIN_RUN_SECONDS,
    MORE_OPS,
    REGRESSIONS,
    SAME,
    SLOWER,
    Comparison,
    Tolerances,
    counts,
)
from xlabench.baselines.baseline_records import PreviousVersion
from xlabench.baselines.baseline_store import baselines_directory, load, made_with, previous_versions, write
from xlabench.baselines.gate_judgement import KNOWN_GAPS_FILE, KnownGap, judge, load_known_gaps, split_known
from xlabench.baselines.policy_measurement import measure_policy
from xlabench.errors import UserInputError
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.policies.artifact import policies_directory, policy_names
from xlabench.settings import Settings, current, runs_under_its_settings
from xlabench.xla.compilers.named_compilers import describe_compiler, resolve_compiler

# A stored runtime ratio is what every later run is held to: time it longer than a gate does ...
BASELINE_RUN_SECONDS = 4 * MIN_RUN_SECONDS
# ... and store the median of several measurements: one, timed for 1 s a side, stored 0.616 for a policy
# whose executable measured 0.99 and 1.00 against the default in CI (and 1.007 in the baseline before).
BASELINE_MEASUREMENTS = 3
REPEATS = 20  # timed runs of each executable per measurement (`--repeats`)


@dataclass(frozen=True)
class GraphGates:
    """The gates a stored graph fails against XLA's default today, as the next pytest run judges them at
    the default tolerances: `standing` fails it (a listed gap whose gate passes included), `known` is
    what a reviewed entry of known-gaps.toml lists."""

    graph: str
    standing: tuple[str, ...]
    known: tuple[str, ...]


@dataclass(frozen=True)
class AgainstPrevious:
    """A new version, graph by graph, against what the version(s) stored before it achieved."""

    versions: tuple[str, ...]  # the labels of the version(s) before, sorted
    comparisons: tuple[Comparison, ...]  # the stored graphs the version before covered
    new_graphs: int  # stored graphs the version before did not cover

    @property
    def worse(self) -> tuple[str, ...]:
        """The graphs where this version has more ops or is slower: each fails its gate until listed."""
        return tuple(c.graph for c in self.comparisons if c.status() in (MORE_OPS, SLOWER))


@dataclass(frozen=True)
class BaselineUpdate:
    """One policy's baselines as stored: where, what was measured, what was not stored and why, the gates
    each stored graph fails today, and (a new version) how it compares with the version before."""

    label: str  # name@vX.Y
    directory: Path
    rows: tuple[EvaluationRow, ...]
    gates: tuple[GraphGates, ...]  # one per stored graph, in the rows' order
    previous: AgainstPrevious | None  # None when no version before was stored

    @property
    def not_stored(self) -> tuple[EvaluationRow, ...]:
        """The rows that failed (each has its `error`): no baseline was written for them."""
        return tuple(row for row in self.rows if row.error is not None)

    @property
    def stored(self) -> int:
        """How many graphs were stored."""
        return sum(row.error is None for row in self.rows)

    @property
    def failing(self) -> int:
        """Stored graphs that fail a gate against XLA's default that known-gaps.toml does not list."""
        return sum(bool(gates.standing) for gates in self.gates)

    @property
    def failing_only_listed(self) -> int:
        """Stored graphs that fail only gates known-gaps.toml lists."""
        return sum(bool(gates.known) and not gates.standing for gates in self.gates)


@dataclass(frozen=True)
class BaselineDiff:
    """One policy measured now against its stored baselines, graph by graph."""

    label: str  # name@vX.Y
    compiler: str  # the name of the compiler measured with now
    stored_directory: Path
    stored_compiler: str  # the name of the compiler the baselines were made with
    comparisons: tuple[Comparison, ...]  # one per graph measured, stored or not

    @property
    def changed(self) -> int:
        """Graphs whose status is not 'same'."""
        return len(self.comparisons) - counts(self.comparisons).get(SAME, 0)

    @property
    def regressions(self) -> int:
        """Graphs that failed, have no baseline, or grew in op count: what makes `diff` exit 1."""
        return sum(comparison.status() in REGRESSIONS for comparison in self.comparisons)


def chosen_policies(references: list[str] | None, settings: Settings | None = None) -> list[str]:
    """The policies asked for, or every stored policy (its latest version, in the policies directory of
    `settings`, default those in effect); none stored is an error."""
    root = policies_directory(settings or current())
    chosen = references or policy_names(root)
    if not chosen:
        raise UserInputError(f"no policies in {root} (train one with `xlabench retrain`)")
    return chosen


@runs_under_its_settings
def update_baselines(
    references: list[str] | None,
    graphs: str | None,
    workers: int = 2,
    repeats: int = REPEATS,
    min_run_seconds: float = BASELINE_RUN_SECONDS,
    measurements: int = BASELINE_MEASUREMENTS,
    heard: Callable[[BaselineUpdate], None] = lambda update: None,
    *,
    settings: Settings | None = None,
) -> list[BaselineUpdate]:
    """Measure each policy (default every stored one) on `graphs` (default its gated graphs) and store
    its baselines; `heard` gets each policy's record as soon as it is stored (a policy takes minutes).
    `settings` (default: those in effect) name the compiler and the policies and baselines directories."""

    settings = settings or current()
    root = baselines_directory(settings)
    gaps = load_known_gaps(root / KNOWN_GAPS_FILE, policies_directory(settings))  # fails before measuring
    updates = []
    for reference in chosen_policies(references, settings):
        policy, rows = measure_policy(
            reference, graphs, workers, repeats, min_run_seconds, measurements, for_storing=True,
            settings=settings,
        )  # fmt: skip
        name = policy.artifact.metadata["name"]
        before = previous_versions(name, policy.label, root)  # read before `write` replaces the set
        compiler = resolve_compiler(settings=settings)
        directory = write(
            name, policy.label, compiler.name, rows, root=root, compiler=describe_compiler(compiler)
        )
        update = BaselineUpdate(
            policy.label,
            directory,
            tuple(rows),
            judge_stored(rows, policy.label, gaps),
            against_previous(rows, before) if before else None,
        )
        heard(update)
        updates.append(update)
    return updates


def judge_stored(rows: list[EvaluationRow], label: str, gaps: list[KnownGap]) -> tuple[GraphGates, ...]:
    """Per stored row, the gates against XLA's default it fails today (no baseline: the one stored now
    is its own) and which of them a listed gap covers."""
    judged = []
    for row in rows:
        if row.error is not None:
            continue
        covering = [gap for gap in gaps if gap.covers(row.name, label)]
        standing, known, _ = split_known(judge(row, None, Tolerances()), covering)
        judged.append(GraphGates(row.name, tuple(standing), tuple(known)))
    return tuple(judged)


def against_previous(rows: list[EvaluationRow], before: dict[str, PreviousVersion]) -> AgainstPrevious:
    """The stored rows against what the version before achieved on the same graphs."""
    stored = [row for row in rows if row.error is None]
    comparisons = tuple(Comparison(row.name, before[row.name], row) for row in stored if row.name in before)
    versions = tuple(sorted({record.policy for record in before.values()}))
    return AgainstPrevious(versions, comparisons, len(stored) - len(comparisons))


@runs_under_its_settings
def diff_baselines(
    references: list[str] | None,
    graphs: str | None,
    workers: int = 2,
    repeats: int = REPEATS,
    min_run_seconds: float = BASELINE_RUN_SECONDS,
    heard: Callable[[BaselineDiff], None] = lambda diff: None,
    *,
    settings: Settings | None = None,
) -> list[BaselineDiff]:
    """Measure each policy (default every stored one) now and compare each graph with its stored baseline;
    `heard` gets each policy's record as soon as it is measured. Baselines made with another compiler
    are compared on purpose: that is how a compiler change (`--compiler VERSION`) is judged. `settings`
    (default: those in effect) name the compiler and the policies and baselines directories."""

    settings = settings or current()
    root = baselines_directory(settings)
    diffs = []
    for reference in chosen_policies(references, settings):
        policy, rows = measure_policy(reference, graphs, workers, repeats, min_run_seconds, settings=settings)
        compiler = resolve_compiler(settings=settings).name
        stored = load(
            policy.artifact.metadata["name"], policy.label, compiler, allow_jaxlib_change=True, root=root
        )
        if stored is None:
            raise UserInputError(f"{policy.label}: no stored baselines (run `xlabench baselines update`)")
        diff = BaselineDiff(
            policy.label,
            compiler,
            stored.directory,
            made_with(stored.metadata),
            tuple(Comparison(row.name, stored.get(row.name), row) for row in rows),
        )
        heard(diff)
        diffs.append(diff)
    return diffs
