"""Holding a measurement to a stored one: the tolerances every gate uses, and the per-graph comparison
`xlabench baselines diff` (stored -> now) and `baselines update` (previous version -> new) print.

Op counts are deterministic, so any increase is a regression; runtime ratios (policy / XLA's default)
are noisy, so one counts as slower only beyond `Tolerances.runtime_noise`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from xlabench.baselines.baseline_records import BaselineEntry, PreviousVersion
from xlabench.eval.evaluation_records import EvaluationRow, figure

# Each executable runs at least this long in all (beyond the repeats): small ones need many runs.
MIN_RUN_SECONDS = 0.25


@dataclass(frozen=True)
class Tolerances:
    """How far a policy may be from XLA's default and from its baseline before a gate fails."""

    # R may exceed D by this fraction: the shipped general policy's worst graph is R = 1.040 x D.
    op_count: float = 0.05
    # Policy runtime / default runtime may exceed 1 by this much: 20 runs of one 1.5 ms pair on a busy
    # machine measured 0.83-2.13 (docs/measurements.md, 2026-11-24); a real slowdown (no fusion) is 1.5-2.6 x.
    runtime: float = 1.0
    # ... and the stored baseline's ratio by this fraction: on a busy 2-core machine one pair measured
    # 0.98-1.19 (a 4-8 ms executable) in three runs.
    runtime_noise: float = 0.5
    # Gate (c) judges only executables whose default's fastest run takes at least this long (ms; load
    # only adds time, so a median can cross the floor on load alone). Below it the
    # ratio measures dispatch and thread wake-ups: the CG loops (0.06-0.13 ms) measured 1.04-1.33 alone
    # and 1.9-3.0 next to a busy core, with identical op counts (docs/design.md, "The runtime floor").
    runtime_floor_ms: float = 0.25
    # Suite-wide: the geomean of policy/default over every runtime-judged gate may exceed 1, and the
    # baselines' geomean over the same gates, by this fraction. Per-graph noise (0.8-1.2 on a busy
    # machine) averages out over many gates, so a few percent on every graph shows; judged only over
    # GEOMEAN_MIN_GATES gates or more.
    runtime_geomean: float = 0.10


def _default_runs_ms(row: EvaluationRow, statistic: Callable[[list[float]], float]) -> float | None:
    """A statistic of XLA's default executable's timed runs in a measured row (ms), None if untimed."""
    runs = row.run_seconds.default if row.run_seconds is not None else None
    return 1000 * statistic(runs) if runs else None


def default_median_ms(row: EvaluationRow) -> float | None:
    """Median run time of XLA's default executable in a measured row (ms), None if it was not timed."""
    return _default_runs_ms(row, statistics.median)


def default_fastest_ms(row: EvaluationRow) -> float | None:
    """Fastest run of XLA's default executable in a measured row (ms), None if it was not timed."""
    return _default_runs_ms(row, min)


def runtime_judged(row: EvaluationRow, tolerances: Tolerances) -> bool:
    """Whether a row's runtime is judged: it has a ratio, and XLA's default executable is not too short.

    The floor is judged on the default's fastest run: load only adds time, so a busy machine must not
    lift a 0.1 ms executable (whose ratio measures dispatch) over the floor.
    """
    default_ms = default_fastest_ms(row)
    floor_met = default_ms is None or default_ms >= tolerances.runtime_floor_ms
    return row.runtime_ratio is not None and floor_met


# What a comparison found on one graph, worst first in `Comparison.status`.
FAILED, NO_BASELINE, MORE_OPS, SLOWER, FEWER_OPS, FASTER, SAME = (
    "failed", "no baseline", "more ops", "slower", "fewer ops", "faster", "same",
)  # fmt: skip
REGRESSIONS = (FAILED, NO_BASELINE, MORE_OPS)  # what makes `baselines diff` exit 1


@dataclass(frozen=True)
class Comparison:
    """One graph: a stored record (`before`: a baseline, or what the previous policy version achieved;
    None when there is none) and a measurement (`now`)."""

    graph: str
    before: BaselineEntry | PreviousVersion | None
    now: EvaluationRow

    def status(self, tolerances: Tolerances = Tolerances()) -> str:
        """The worst of: failed, no baseline, more ops, slower (beyond the noise), fewer ops, faster, same
        (runtimes compared only where `runtime_judged`)."""
        now_ops = self.now.policy_ops
        if self.now.error is not None or now_ops is None:
            return FAILED
        if self.before is None:
            return NO_BASELINE
        before_ops = self.before.policy_ops
        if before_ops is not None and now_ops > before_ops:
            return MORE_OPS
        stored = self.before.runtime_ratio
        # Under the runtime floor the ratio measures dispatch: the gates do not judge it, nor does this.
        ratio = self.now.runtime_ratio if runtime_judged(self.now, tolerances) else None
        if ratio is not None and stored and ratio > stored * (1 + tolerances.runtime_noise):
            return SLOWER
        if before_ops is not None and now_ops < before_ops:
            return FEWER_OPS
        if ratio is not None and stored and ratio * (1 + tolerances.runtime_noise) < stored:
            return FASTER
        return SAME

    def cells(self, tolerances: Tolerances = Tolerances()) -> list[str]:
        """The table row: graph, R before, R now, change, runtime ratio before, now, status (+ detail)."""
        now = self.now
        before_ops = self.before.policy_ops if self.before is not None else None
        before_ratio = self.before.runtime_ratio if self.before is not None else None
        # What the previous version achieved keeps no sequence: only a stored baseline does.
        before_sequence = self.before.sequence if isinstance(self.before, BaselineEntry) else None
        change = ""
        if before_ops and now.policy_ops is not None and now.policy_ops != before_ops:
            change = f"{(now.policy_ops - before_ops) / before_ops:+.1%}"
        status = self.status(tolerances)
        if status == FAILED:
            status += f": {now.error}"
        elif before_sequence is not None and now.sequence != before_sequence:
            status += "; sequence changed"
        return [
            self.graph,
            figure(before_ops, 0),
            figure(now.policy_ops, 0),
            change,
            figure(before_ratio, 3),
            figure(now.runtime_ratio, 3),
            status,
        ]


COLUMNS = ("graph", "R before", "R now", "change", "runtime before", "runtime now", "status")


def counts(comparisons: Sequence[Comparison], tolerances: Tolerances = Tolerances()) -> dict[str, int]:
    """How many graphs have each status (only the statuses that occur)."""
    found: dict[str, int] = {}
    for comparison in comparisons:
        status = comparison.status(tolerances)
        found[status] = found.get(status, 0) + 1
    return found


def summary(comparisons: Sequence[Comparison], tolerances: Tolerances = Tolerances()) -> str:
    """How many graphs have each status, in one line ("2 fewer ops, 1 more ops, 8 same")."""
    return ", ".join(
        f"{number} {status}" for status, number in sorted(counts(comparisons, tolerances).items())
    )


def text_table(comparisons: Sequence[Comparison], tolerances: Tolerances = Tolerances()) -> list[str]:
    """The comparison as aligned terminal lines, a header first."""
    rows = [list(COLUMNS)] + [comparison.cells(tolerances) for comparison in comparisons]
    widths = [max(len(row[column]) for row in rows) for column in range(len(COLUMNS) - 1)]
    return [
        "  ".join(
            cell.ljust(width) if column == 0 else cell.rjust(width)
            for column, (cell, width) in enumerate(zip(row, widths, strict=False))
        )
        + "  "
        + row[-1]
        for row in rows
    ]


def markdown_table(comparisons: Sequence[Comparison], tolerances: Tolerances = Tolerances()) -> list[str]:
    """The comparison as a Markdown table."""
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in comparison.cells(tolerances)) + " |"
        for comparison in comparisons
    ]
    return lines
