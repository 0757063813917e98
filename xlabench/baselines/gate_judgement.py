"""Judging one measured row by the gates, and the reviewed gaps that expect a gate to fail.

`judge` holds a row (a greedy rollout, both executables timed, outputs compared) to XLA's default and to
its stored baseline, one line a failed gate:

(a) op count within `op_count` of XLA's default: R <= D x (1 + op_count);
(b) op count no higher than the stored baseline's R (op counts are deterministic: any increase counts),
    nor than the previous policy version's R when the baseline keeps it (`baselines update` of a new
    version records what the version before achieved on each graph);
(c) runtime: the policy's executable over XLA's default executable (median of interleaved runs in one
    worker) within 1 + `runtime`, and no more than the stored ratio x (1 + `runtime_noise`) (and than
    the previous version's stored ratio x (1 + `runtime_noise`)), judged where XLA's default
    executable's fastest run takes at least `runtime_floor_ms`;
(d) every output buffer of the policy's executable equals the default executable's (dtype-aware).

A failure a reviewed entry of `baselines/known-gaps.toml` lists is expected (`split_known`). Both live
below the pytest plugin, so that `xlabench baselines update` judges what it stores as the gates will.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from xlabench.baselines.baseline_diff import Tolerances, runtime_judged
from xlabench.errors import UserInputError
from xlabench.policies.artifact import policy_names, versions

if TYPE_CHECKING:
    from xlabench.baselines.baseline_records import BaselineEntry
    from xlabench.eval.evaluation_records import EvaluationRow

OP_COUNT_VS_DEFAULT = "op count vs XLA's default"
OP_COUNT_VS_PREVIOUS = "op count vs previous version"
RUNTIME_VS_PREVIOUS = "runtime vs previous version"

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
