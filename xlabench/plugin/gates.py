"""The gates one graph and one policy must pass: measure (a greedy rollout and both executables), judge
the row (`xlabench.baselines.gate_judgement`: op count, runtime, outputs against XLA's default and the
stored baseline), and keep the verdict; the suite-wide runtime gate over every verdict.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from xlabench.baselines.baseline_diff import (
    MIN_RUN_SECONDS,
    Tolerances,
    default_fastest_ms,
    default_median_ms,
)
from xlabench.baselines.gate_judgement import KNOWN_GAPS_FILE
from xlabench.eval.evaluate import evaluate_graph
from xlabench.xla.shared.releases import compiler_title

if TYPE_CHECKING:  # the plugin loads with every pytest run: the compiler side is imported when used
    from xlabench.baselines.baseline_records import BaselineEntry
    from xlabench.eval.evaluation_records import EvaluationRow
    from xlabench.graphs import Graph
    from xlabench.policies.policy import Policy
    from xlabench.xla import PassDriver

# The suite-wide runtime geomean is judged over at least this many runtime-judged gates.
GEOMEAN_MIN_GATES = 20


@dataclass
class Verdict:
    """The measurements of one graph and policy, the stored baseline, and every gate that failed."""

    graph: str
    policy: str
    compiler: str  # the compiler's name (a release's is its version)
    disabled_passes: tuple[str, ...]
    row: EvaluationRow
    baseline: BaselineEntry | None
    baseline_origin: str | None
    failures: list[str] = field(default_factory=list)
    # Failures a reviewed entry of known-gaps.toml covers: expected failures, reported with the reason.
    known: list[str] = field(default_factory=list)
    known_reasons: list[str] = field(default_factory=list)
    # False where XLA's default executable ran shorter than the runtime floor: gate (c) did not judge it.
    runtime_judged: bool = True
    # On another compiler than the baseline's: the pass that first made the difference.
    changed_by: str | None = None

    def message(self) -> str:
        """What a failing test prints: graph, policy, compiler, every failed gate, numbers, sequence."""
        row, change = self.row, ""
        if self.disabled_passes:
            change = f" with {', '.join(self.disabled_passes)} disabled"
        lines = [f"{self.graph} | {self.policy} | {compiler_title(self.compiler)}{change}:"]
        lines += [f"  FAILED {failure}" for failure in self.failures]
        lines += [f"  KNOWN {failure}" for failure in self.known]
        lines += [f"  listed in {KNOWN_GAPS_FILE}: {reason}" for reason in self.known_reasons]
        if row.policy_ops is not None:
            counts = (
                f"  I {row.input_ops}, D {row.default_ops}, R {row.policy_ops} "
                f"(vs_default {row.vs_default:.4f})"
            )
            if self.baseline is not None:
                counts += f"; baseline R {self.baseline.policy_ops}"
                if previous := self.baseline.previous:
                    counts += f"; {previous.policy} R {previous.policy_ops}"
            lines.append(counts)
            ratio = row.runtime_ratio
            stored = self.baseline.runtime_ratio if self.baseline is not None else None
            measured = row.runtime_ratios_measured
            default_ms = default_median_ms(row)
            spreads = run_spreads_ms(row)
            lines.append(
                "  runtime ratio policy/default "
                + (f"{ratio:.3f}" if ratio is not None else "-")
                + (f" (measured twice: {measured[0]:.3f}, {measured[1]:.3f})" if measured else "")
                + (f" (baseline {stored:.3f})" if stored is not None else "")
                + (f"; XLA's default executable {default_ms:.3f} ms" if default_ms is not None else "")
            )
            if spreads:
                lines.append(
                    "  runs (median, IQR): "
                    + ", ".join(
                        f"{who} {median:.3f} ms, {iqr:.3f} ms" for who, (median, iqr) in spreads.items()
                    )
                )
            lines += [f"  {error.describe()}" for error in row.output_errors or []]
            sequence = row.sequence or []
            lines.append(f"  sequence: {' '.join(sequence)}")
            if self.baseline is not None and self.baseline.sequence != sequence:
                baseline_sequence = self.baseline.sequence or []
                lines.append(f"  baseline sequence: {' '.join(baseline_sequence)}")
                lines.append(f"  {first_difference(baseline_sequence, sequence)}")
        if self.baseline_origin:
            lines.append(f"  baseline: {self.baseline_origin}")
        if self.changed_by:
            lines.append(f"  changed by: {self.changed_by}")
        return "\n".join(lines)

    def summary(self) -> dict[str, Any]:
        """Plain data for the session summary and the JSON report."""
        row, stored = self.row, self.baseline
        return {
            "graph": self.graph,
            "policy": self.policy,
            "compiler": self.compiler,
            "disabled_passes": list(self.disabled_passes),
            "D": row.default_ops,
            "R": row.policy_ops,
            "baseline_R": stored.policy_ops if stored is not None else None,
            "runtime_ratio": row.runtime_ratio,
            "baseline_runtime_ratio": stored.runtime_ratio if stored is not None else None,
            "runtime_judged": self.runtime_judged,
            "default_ms": default_median_ms(row),
            "default_fastest_ms": default_fastest_ms(row),
            "sequence": row.sequence,
            "baseline_sequence": stored.sequence if stored is not None else None,
            "failures": self.failures,
            "known": self.known,
            "changed_by": self.changed_by,
            "output_errors": None if row.output_errors is None else [asdict(e) for e in row.output_errors],
            "damage": damage(row, stored),
        }


def first_difference(before: list[str], after: list[str]) -> str:
    """Where two pass sequences part: the first step that differs."""
    for step, (old, new) in enumerate(zip(before, after, strict=False), start=1):
        if old != new:
            return f"first difference at step {step}: baseline {old}, now {new}"
    shorter, longer = (after, before) if len(after) < len(before) else (before, after)
    extra = longer[len(shorter)]
    return f"first difference at step {len(shorter) + 1}: {'baseline' if longer is before else 'now'} {extra}"


def damage(row: EvaluationRow, baseline: BaselineEntry | None) -> float:
    """How much worse than before, for sorting: the op-count ratio to the baseline (to D without one),
    plus the runtime ratio's relative change beyond it, scaled down (op counts are exact, runtimes not)."""
    if row.policy_ops is None:
        return float("inf")
    reference = (baseline.policy_ops if baseline is not None else None) or row.default_ops
    assert reference is not None  # R is measured after D
    ops = row.policy_ops / reference
    now, before = row.runtime_ratio, baseline.runtime_ratio if baseline is not None else None
    runtime = (now / before - 1.0) if now and before else 0.0
    return ops + 0.01 * runtime


def measure(
    driver: PassDriver, graph: Graph, policy: Policy, repeats: int, min_run_seconds: float = MIN_RUN_SECONDS
) -> EvaluationRow:
    """One `xlabench eval` row for the graph and policy, every timed run kept."""

    return evaluate_graph(
        driver,
        graph,
        "policy",
        {"policy": policy},
        True,
        repeats,
        keep_runs=True,
        min_run_seconds=min_run_seconds,
    )


def run_spreads_ms(row: EvaluationRow) -> dict[str, tuple[float, float]]:
    """(median, interquartile range) in ms of each executable's timed runs: "policy" and "default"."""
    spreads = {}
    both = row.run_seconds
    for who, runs in (("policy", both.sequence if both else []), ("default", both.default if both else [])):
        if len(runs) >= 2:
            quartiles = statistics.quantiles(runs, n=4)
            spreads[who] = (1000 * statistics.median(runs), 1000 * (quartiles[2] - quartiles[0]))
    return spreads


def runtime_geomean(verdicts: list[dict[str, Any]]) -> tuple[float, float | None, int] | None:
    """(geomean of policy/default, of the baselines' ratios on the same gates, gates) over the
    runtime-judged verdict summaries; None below GEOMEAN_MIN_GATES. The baselines' geomean is None
    where one of them lacks a ratio."""
    judged = [v for v in verdicts if v.get("runtime_judged") and v.get("runtime_ratio")]
    if len(judged) < GEOMEAN_MIN_GATES:
        return None
    now = math.exp(statistics.fmean(math.log(v["runtime_ratio"]) for v in judged))
    stored = [v.get("baseline_runtime_ratio") for v in judged]
    before = math.exp(statistics.fmean(math.log(r) for r in stored)) if all(stored) else None
    return now, before, len(judged)


def judge_geomean(geomean: tuple[float, float | None, int], tolerances: Tolerances) -> list[str]:
    """The suite-wide runtime gate: the geomean within 1 + tolerance of 1 and of the baselines' geomean."""
    now, before, gates = geomean
    limit = 1 + tolerances.runtime_geomean
    failures = []
    if now > limit:
        failures.append(
            f"suite-wide runtime: geomean policy/default {now:.3f} > {limit:g} over {gates} gates"
        )
    if before is not None and now > before * limit:
        failures.append(
            f"suite-wide runtime vs baselines: geomean {now:.3f} > baseline geomean {before:.3f} x {limit:g} "
            f"over {gates} gates"
        )
    return failures
