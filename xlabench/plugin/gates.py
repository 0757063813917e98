"""The gates one graph and one policy must pass: measure (a greedy rollout and both executables), then judge.

(a) op count within `op_count` of XLA's default: R <= D x (1 + op_count);
(b) op count no higher than the stored baseline's R (op counts are deterministic: any increase counts),
    nor than the previous policy version's R when the baseline keeps it (`baselines update` of a new
    version records what the version before achieved on each graph);
(c) runtime: the policy's executable over XLA's default executable (median of interleaved runs in one
    worker) within 1 + `runtime`, and no more than the stored ratio x (1 + `runtime_noise`) (and than
    the previous version's stored ratio x (1 + `runtime_noise`)), judged where XLA's default
    executable's fastest run takes at least `runtime_floor_ms`;
(d) every output buffer of the policy's executable equals the default executable's (dtype-aware).
"""

from __future__ import annotations

import math
import statistics
import tomllib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.baselines.baseline_diff import (
    MIN_RUN_SECONDS,
    Tolerances,
    default_fastest_ms,
    default_median_ms,
    runtime_judged,
)
from xlabench.errors import UserInputError
from xlabench.eval.evaluate import evaluate_graph
from xlabench.policies.artifact import policy_names, versions
from xlabench.xla.shared.releases import compiler_title

if TYPE_CHECKING:  # the plugin loads with every pytest run: the compiler side is imported when used
    from xlabench.baselines.baseline_records import BaselineEntry
    from xlabench.eval.evaluation_records import EvaluationRow
    from xlabench.graphs import Graph
    from xlabench.policies.policy import Policy
    from xlabench.xla import PassDriver

OP_COUNT_VS_DEFAULT = "op count vs XLA's default"
OP_COUNT_VS_PREVIOUS = "op count vs previous version"
RUNTIME_VS_PREVIOUS = "runtime vs previous version"
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


# Every gate, as each failure line begins: what a known gap names.
GATES = (
    OP_COUNT_VS_DEFAULT,
    "op count vs baseline",
    "runtime vs XLA's default",
    "runtime vs baseline",
    OP_COUNT_VS_PREVIOUS,
    RUNTIME_VS_PREVIOUS,
    "outputs differ from XLA's default executable",
    "the policy could not be run",
    "no baseline",
)
KNOWN_GAPS_FILE = "known-gaps.toml"


@dataclass(frozen=True)
class KnownGap:
    """A reviewed gap of a policy on a graph: the gate it fails, why, since when."""

    graph: str
    policy: str  # NAME (every version) or NAME@vX.Y
    gate: str  # one of GATES
    reason: str
    date: str

    def covers(self, graph: str, policy_label: str) -> bool:
        """Whether the gap is listed for this graph and policy version."""
        return graph == self.graph and self.policy in (policy_label, policy_label.split("@", 1)[0])

    def describe(self) -> str:
        """One line: the gate, the reason and the date it was listed."""
        return f"{self.gate} ({self.reason}; listed {self.date})"


_GAP_KEYS = ("graph", "policy", "gate", "reason", "date")


def load_known_gaps(path: Path, policies_root: Path | None = None) -> list[KnownGap]:
    """The gaps listed in a known-gaps.toml (none when the file does not exist); their policies are looked
    up in `policies_root` (default: the policies directory).

    Anything the file says that would not apply -- a table other than `[[gap]]`, a key no gap has, a
    gate no gate has, a policy (or version) not stored -- is refused, one line a problem: a misspelled
    entry must not leave a failure standing while the summary says the gap is known, or hide that it
    is not.
    """

    if not path.exists():
        return []
    try:
        document = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise UserInputError(f"{path}: not a readable known-gaps file: {error}") from None
    problems = [
        f"{path}: unknown table {key!r} (gaps are listed as [[gap]])" for key in document if key != "gap"
    ]
    entries = document.get("gap", [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        problems.append(f"{path}: `gap` must be an array of tables ([[gap]] entries)")
        entries = []
    stored = set(policy_names(policies_root))
    gaps = []
    for number, entry in enumerate(entries, start=1):
        unknown = sorted(set(entry) - set(_GAP_KEYS))
        if unknown:
            problems.append(
                f"{path}: gap {number}: unknown key(s) {', '.join(unknown)} ({', '.join(_GAP_KEYS)})"
            )
        fields = {name: entry.get(name) for name in _GAP_KEYS}
        missing = [name for name, value in fields.items() if not isinstance(value, str) or not value]
        if missing:
            problems.append(f"{path}: gap {number} lacks {', '.join(missing)}")
            continue
        if fields["gate"] not in GATES:
            problems.append(f"{path}: gap {number}: unknown gate {fields['gate']!r} ({'; '.join(GATES)})")
        name, _, version = fields["policy"].partition("@")
        if name not in stored:
            problems.append(
                f"{path}: gap {number}: no policy {name!r} is stored (policies: {', '.join(sorted(stored))})"
            )
        elif version and not any(
            f"v{major}.{minor}" == version for major, minor in versions(name, policies_root)
        ):
            problems.append(f"{path}: gap {number}: policy {name} has no version {version}")
        gaps.append(KnownGap(**fields))
    if problems:
        raise UserInputError("\n".join(problems))
    return gaps


def split_known(
    failures: list[str], gaps: list[KnownGap], runtime_judged: bool = True
) -> tuple[list[str], list[str], list[KnownGap]]:
    """(failures still standing, failures a listed gap covers, the gaps that covered them).

    A listed gap whose gate was judged and passed is a failure of its own (strict), so the list is kept
    true; a gate that was not judged (the policy could not run, a runtime under the floor) closes nothing.
    """
    matched = [gap for gap in gaps if any(failure.startswith(gap.gate) for failure in failures)]
    known = [failure for failure in failures if any(failure.startswith(gap.gate) for gap in matched)]
    standing = [failure for failure in failures if failure not in known]
    measured = not any(failure.startswith("the policy could not be run") for failure in failures)
    standing += [
        f"known gap closed: {gap.gate} passes now; remove it from {KNOWN_GAPS_FILE} ({gap.reason})"
        for gap in gaps
        if gap not in matched and measured and (runtime_judged or not gap.gate.startswith("runtime"))
    ]
    return standing, known, matched


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


def judge(row: EvaluationRow, baseline: BaselineEntry | None, tolerances: Tolerances) -> list[str]:
    """Every gate the measured row fails, one line each."""
    ops, default_ops = row.policy_ops, row.default_ops
    if ops is None or default_ops is None or row.not_executed:
        return [f"the policy could not be run: {row.error}"]
    failures = []
    limit = default_ops * (1 + tolerances.op_count)
    if ops > limit:
        failures.append(
            f"{OP_COUNT_VS_DEFAULT}: R {ops} > D {default_ops} x {1 + tolerances.op_count:g} "
            f"(vs_default {row.vs_default:.4f})"
        )
    stored_ops = baseline.policy_ops if baseline is not None else None
    if stored_ops is not None and ops > stored_ops:
        grown = ops - stored_ops
        failures.append(
            f"op count vs baseline: R {ops} > baseline R {stored_ops} (+{grown}, {grown / stored_ops:+.1%})"
        )
    previous = baseline.previous if baseline is not None else None
    if previous is not None and ops > previous.policy_ops:
        grown = ops - previous.policy_ops
        failures.append(
            f"{OP_COUNT_VS_PREVIOUS}: R {ops} > {previous.policy} R {previous.policy_ops} "
            f"(+{grown}, {grown / previous.policy_ops:+.1%})"
        )
    if row.outputs_differ:
        failures.append("outputs differ from XLA's default executable: " + "; ".join(row.outputs_differ[:3]))
    ratio = row.runtime_ratio
    if ratio is not None and runtime_judged(row, tolerances):
        if ratio > 1 + tolerances.runtime:
            failures.append(
                f"runtime vs XLA's default: policy/default {ratio:.3f} > {1 + tolerances.runtime:g}"
            )
        stored = baseline.runtime_ratio if baseline is not None else None
        if stored and ratio > stored * (1 + tolerances.runtime_noise):
            failures.append(
                f"runtime vs baseline: policy/default {ratio:.3f} > baseline {stored:.3f} "
                f"x {1 + tolerances.runtime_noise:g}"
            )
        before = previous.runtime_ratio if previous is not None else None
        if previous is not None and before and ratio > before * (1 + tolerances.runtime_noise):
            failures.append(
                f"{RUNTIME_VS_PREVIOUS}: policy/default {ratio:.3f} > {previous.policy} {before:.3f} "
                f"x {1 + tolerances.runtime_noise:g}"
            )
    return failures
