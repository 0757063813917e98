"""`xlabench compilers diff BASE HEAD`: what a compiler change does to every graph, and which pass did it.

Per graph, on each compiler: D (XLA's default), the policy's R and sequence, the runtime ratio
(policy / default executable) and the output buffers. Across the two: whether outputs differ (each
executable against its counterpart on the other compiler) and, for every graph whose D, R or outputs
moved, the pass that first made the difference (`xlabench.xla.diagnosis.attribution`). A regression is D or R
up beyond the tolerance (default 0: op counts are deterministic), or a graph that fails on head only --
including a policy whose executable computes otherwise than XLA's default there. Outputs that differ
between the two compilers are reported, not failed: without a higher-precision reference, another
rounding is not a worse one.
"""

from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from xlabench.errors import CompilerError, DriverError, UserInputError
from xlabench.eval.evaluate import evaluate_graph
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.files import png_bytes, write_atomically
from xlabench.graphs import Graph
from xlabench.policies.artifact import policies_directory
from xlabench.policies.policy import load_policy
from xlabench.settings import Settings, current, runs_under_its_settings
from xlabench.xla import PassDriver
from xlabench.xla.compilers.named_compilers import Compiler, describe_compiler
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.attribution import Attribution, attribute_default, attribute_sequence
from xlabench.xla.driver.execution import compare_outputs
from xlabench.xla.shared.releases import UnsupportedCompiler, is_release


@dataclass
class GraphDiff:
    """One graph on two compilers."""

    name: str
    family: str
    D: list[int | None]  # [base, head]
    R: list[int | None]
    sequences: list[list[str] | None]
    runtime_ratio: list[float | None]
    errors: list[str | None]
    outputs_differ: bool | None = None  # None: not executed (--no-runtime, or a failure)
    output_problems: list[str] = field(default_factory=list)
    changed_by: dict[str, Any] = field(default_factory=dict)  # "default" / "policy": Attribution dicts

    @property
    def sequence_changed(self) -> bool:
        """Whether the policy chose another sequence on head."""
        return self.sequences[0] != self.sequences[1]

    def regression(self, tolerance: float) -> str | None:
        """Why this graph regressed on head (D or R up beyond the tolerance, or failing on head only)."""
        if self.errors[1] and not self.errors[0]:
            return f"fails on head: {self.errors[1]}"
        reasons = [f"{label} {base} -> {head}" for label, _, base, head in self._risen(tolerance)]
        return ", ".join(reasons) or None

    def _risen(self, tolerance: float) -> list[tuple[str, str, int, int]]:
        """(label, attribution kind, base, head) of each count that rose beyond the tolerance."""
        return [
            (label, kind, base, head)
            for label, kind, (base, head) in (("D", "default", self.D), ("R", "policy", self.R))
            if base is not None and head is not None and head > base * (1 + tolerance)
        ]

    def regression_culprit(self, tolerance: float) -> str | None:
        """The pass that made each risen count differ: D's in XLA's pipeline, R's in the sequence."""
        risen = [kind for _, kind, _, _ in self._risen(tolerance)]
        # Failing on head only: the sequence's culprit, else the pipeline's.
        kinds = risen or [kind for kind in ("policy", "default") if self.changed_by.get(kind)][:1]
        summaries = [self.changed_by[kind]["summary"] for kind in kinds if self.changed_by.get(kind)]
        return "; ".join(summaries) or None

    def to_dict(self) -> dict[str, Any]:
        """The graph's entry of the JSON document."""
        return {
            "name": self.name,
            "family": self.family,
            "D": self.D,
            "R": self.R,
            "sequence_changed": self.sequence_changed,
            "sequences": self.sequences,
            "changed_by": self.changed_by,
            "runtime_ratio": self.runtime_ratio,
            "outputs_differ": self.outputs_differ,
            "output_problems": self.output_problems,
            "errors": self.errors,
        }


@dataclass
class CompilerDiff:
    """A whole diff: the catalogue change and every graph."""

    base: str
    head: str
    policy: str
    catalogue: dict[str, list[Any]]
    action_match: dict[str, Any]
    graphs: list[GraphDiff]
    tolerance: float
    runtime: bool
    # Per side ("base", "head"): the compiler's kind, jaxlib, XLA options and build identity.
    compilers: dict[str, dict[str, Any]] = field(default_factory=dict)

    def regressions(self) -> list[dict[str, str]]:
        """Graphs that regressed on head, with why and the pass that did it."""
        found = []
        for graph in self.graphs:
            reason = graph.regression(self.tolerance)
            if reason:
                culprit = graph.regression_culprit(self.tolerance)
                found.append({"name": graph.name, "why": reason, "changed_by": culprit})
        return found

    def outputs_differ(self) -> list[str]:
        """Graphs whose executables compute otherwise on head than on base (beyond the dtype's tolerance)."""
        return [graph.name for graph in self.graphs if graph.outputs_differ]

    def improvements(self) -> list[str]:
        """Graphs whose D or R went down on head."""
        return [
            graph.name
            for graph in self.graphs
            if any(b is not None and h is not None and h < b for b, h in (graph.D, graph.R))
        ]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        return {
            "base": self.base,
            "head": self.head,
            "compilers": self.compilers,
            "policy": self.policy,
            "tolerance": self.tolerance,
            "runtime": self.runtime,
            "catalogue": self.catalogue,
            "action_match": self.action_match,
            "graphs": [graph.to_dict() for graph in self.graphs],
            "regressions": self.regressions(),
            "improvements": self.improvements(),
            "outputs_differ": self.outputs_differ(),
        }


def catalogue_diff(base: PassDriver, head: PassDriver) -> dict[str, list[Any]]:
    """Passes added and removed by head, and those that moved in the pipeline (other pipelines around
    their first run, or another place among the passes both have)."""
    ours, theirs = base.catalogue.passes, head.catalogue.passes
    common = [name for name in sorted(ours, key=lambda n: ours[n].position) if name in theirs]
    order_base = {name: index for index, name in enumerate(common)}
    order_head = {name: index for index, name in enumerate(sorted(common, key=lambda n: theirs[n].position))}
    moved = [
        {
            "pass": name,
            "base": " > ".join(ours[name].ancestors) or "-",
            "head": " > ".join(theirs[name].ancestors) or "-",
            "order": [order_base[name], order_head[name]],
        }
        for name in common
        if ours[name].kind != "pipeline"
        and (ours[name].ancestors != theirs[name].ancestors or order_base[name] != order_head[name])
    ]
    return {
        "added": sorted(name for name in theirs if name not in ours),
        "removed": sorted(name for name in ours if name not in theirs),
        "moved": moved,
    }


def _output_problems(base: EvaluationRow, head: EvaluationRow) -> list[str] | None:
    """Each executable's outputs on head against the same executable's on base (None: not both ran)."""
    if base.outputs is None or head.outputs is None:
        return None
    problems = [f"default: {p}" for p in compare_outputs(base.outputs.default, head.outputs.default)]
    problems += [f"sequence: {p}" for p in compare_outputs(base.outputs.sequence, head.outputs.sequence)]
    return problems


def diff_graph(
    drivers: tuple[PassDriver, PassDriver], graph: Graph, policy: Any, runtime: bool, repeats: int
) -> GraphDiff:
    """Measure one graph on both compilers and attribute what moved."""
    rows = [_evaluate(driver, graph, policy, runtime, repeats) for driver in drivers]
    entry = GraphDiff(
        name=graph.name,
        family=graph.family,
        D=[row.default_ops for row in rows],
        R=[row.policy_ops for row in rows],
        sequences=[row.sequence for row in rows],
        runtime_ratio=[row.runtime_ratio for row in rows],
        errors=[row.error for row in rows],
    )
    problems = _output_problems(*rows)
    if problems is not None:
        entry.outputs_differ, entry.output_problems = bool(problems), problems
    text = graph.hlo_text()
    try:
        if entry.D[0] is not None and (entry.D[0] != entry.D[1] or entry.outputs_differ):
            # Outputs that differ with the same count: the pipeline may still have parted (or not).
            found = attribute_default(*drivers, text, graph.name)
            if found is None and entry.outputs_differ:
                found = Attribution(
                    "after the counting point", None, None, 0,
                    "XLA's pipeline gives the same module on both up to layout assignment: the outputs "
                    "part in the passes after it or in code generation",
                )  # fmt: skip
            entry.changed_by["default"] = found.to_dict() if found else None
        if entry.R[0] is not None and (entry.R[0] != entry.R[1] or entry.sequence_changed):
            found = attribute_sequence(*drivers, text, graph.name, entry.sequences[0] or [])
            if found is None and entry.sequence_changed:
                found = _where_the_policy_chose_otherwise(entry, policy.action_match(drivers[1]).masked)
            entry.changed_by["policy"] = found.to_dict() if found else None
    except UnsupportedCompiler:
        raise  # the compiler, not the graph: no diff can go on
    except (CompilerError, DriverError, UserInputError) as error:
        entry.changed_by["error"] = str(error)
    return entry


def _evaluate(driver: PassDriver, graph: Graph, policy: Any, runtime: bool, repeats: int) -> EvaluationRow:
    """`evaluate_graph` on one compiler; a graph that compiler cannot load is this graph's error."""
    try:
        return evaluate_graph(
            driver, graph, "policy", {"policy": policy}, runtime, repeats, keep_outputs=True
        )
    except UnsupportedCompiler:
        raise
    except UserInputError as error:
        return EvaluationRow(graph.name, graph.family, error=str(error))


def _where_the_policy_chose_otherwise(entry: GraphDiff, masked: tuple[str, ...]) -> Attribution:
    """Every step of the base sequence runs alike on head, yet the policy chose otherwise there."""
    base, head = entry.sequences[0] or [], entry.sequences[1] or []
    step = next(
        (i for i, (b, h) in enumerate(zip(base, head, strict=False)) if b != h), min(len(base), len(head))
    )
    ours = base[step] if step < len(base) else "stop"
    theirs = head[step] if step < len(head) else "stop"
    note = " (head lacks it: masked)" if ours in masked else ""
    effect = (
        f"every step replays alike, but at step {step + 1} the policy chose {theirs} on head, "
        f"{ours}{note} on base"
    )
    return Attribution("policy choice", ours, None, step, effect)


def _named(name: str) -> str:
    """A compiler as reports name it: "jaxlib 0.10.1" for a release, else its own name."""
    return f"jaxlib {name}" if is_release(name) else name


@runs_under_its_settings
def run_compiler_diff(
    base: Compiler,
    head: Compiler,
    graphs: list[Graph],
    policy_reference: str,
    runtime: bool = True,
    repeats: int = 20,
    workers: int = 2,
    tolerance: float = 0.0,
    *,
    settings: Settings | None = None,
) -> CompilerDiff:
    """Diff every graph on two compilers, `workers` graphs at a time (largest first); `settings` (default:
    those in effect) decide the compilers' caches, timeouts and the policies directory."""
    from tqdm import tqdm

    settings = settings or current()
    pools = [
        CompilerPool(size=max(1, workers), compiler=compiler, settings=settings) for compiler in (base, head)
    ]
    try:
        drivers = (PassDriver(pool=pools[0], settings=settings), PassDriver(pool=pools[1], settings=settings))
        policy = load_policy(policy_reference, drivers[0], policies_directory(settings))
        entries: list[GraphDiff] = []
        lock = threading.Lock()
        progress = tqdm(
            total=len(graphs), desc=f"diff {base.name} -> {head.name}", unit="graph", file=sys.stderr
        )

        def run(graph: Graph) -> None:
            entry = diff_graph(drivers, graph, policy, runtime, repeats)
            with lock:
                entries.append(entry)
                progress.update(1)

        try:
            with ThreadPoolExecutor(max_workers=max(1, workers)) as executor:
                list(executor.map(run, sorted(graphs, key=lambda graph: -graph.instruction_count)))
        finally:
            progress.close()
        return CompilerDiff(
            base=base.name,
            head=head.name,
            compilers={
                side: describe_compiler(compiler) for side, compiler in (("base", base), ("head", head))
            },
            policy=policy.label,
            catalogue=catalogue_diff(*drivers),
            action_match={
                side: asdict(policy.action_match(driver))
                for side, driver in zip(("base", "head"), drivers, strict=True)
            },
            graphs=sorted(entries, key=lambda entry: entry.name),
            tolerance=tolerance,
            runtime=runtime,
        )
    finally:
        for pool in pools:
            pool.close()


def print_diff(diff: CompilerDiff) -> None:
    """The catalogue change, every graph that moved, and the regressions."""
    catalogue = diff.catalogue
    print(f"{_named(diff.base)} -> {diff.head}, policy {diff.policy}, {len(diff.graphs)} graphs")
    print(f"passes added: {', '.join(catalogue['added']) or 'none'}")
    print(f"passes removed: {', '.join(catalogue['removed']) or 'none'}")
    print(f"passes moved: {', '.join(m['pass'] for m in catalogue['moved']) or 'none'}")
    moved = [
        g
        for g in diff.graphs
        if g.D[0] != g.D[1] or g.R[0] != g.R[1] or g.sequence_changed or g.outputs_differ
    ]
    print(
        f"\n{'graph':48} {'D base->head':>14} {'R base->head':>14} {'seq':>4} "
        f"{'runtime base->head':>19}  changed by"
    )
    for graph in moved:
        runtime = " -> ".join("-" if r is None else f"{r:.2f}" for r in graph.runtime_ratio)
        culprit = graph.changed_by.get("policy") or graph.changed_by.get("default")
        print(
            f"{graph.name[:48]:48} {_pair(graph.D):>14} {_pair(graph.R):>14} "
            f"{'yes' if graph.sequence_changed else 'no':>4} {runtime:>19}  "
            f"{culprit['summary'] if culprit else '-'}"
        )
    unchanged = len(diff.graphs) - len(moved)
    regressions = diff.regressions()
    print(
        f"\n{len(moved)} graphs moved, {unchanged} unchanged; {len(regressions)} regressions, "
        f"{len(diff.improvements())} improvements, {len(diff.outputs_differ())} with outputs that differ"
    )
    for regression in regressions:
        print(
            f"REGRESSION {regression['name']}: {regression['why']}; "
            f"changed by {regression['changed_by'] or '-'}"
        )


def _pair(values: list[Any]) -> str:
    return " -> ".join("-" if value is None else str(value) for value in values)


def write_diff_report(directory: str, diff: CompilerDiff, command: str) -> None:
    """report.md and changes.png (per-graph D and R change, head over base) in `directory`, atomically."""

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [graph.name for graph in diff.graphs]
    figure, axis = plt.subplots(figsize=(max(8, len(names) * 0.12), 4.5))
    for label, attribute, marker in (("D (XLA default)", "D", "o"), ("R (policy)", "R", "x")):
        values = [
            (getattr(g, attribute)[1] / getattr(g, attribute)[0] - 1) * 100
            if None not in getattr(g, attribute) and getattr(g, attribute)[0]
            else float("nan")
            for g in diff.graphs
        ]
        axis.scatter(range(len(names)), values, label=label, marker=marker, s=14)
    axis.axhline(0, color="grey", linewidth=0.8)
    axis.set_ylabel(f"op count change, {_named(diff.head)} vs {diff.base} (%)")
    axis.set_xlabel("graph (alphabetical)")
    axis.set_title(f"{diff.policy}: {_named(diff.base)} -> {diff.head}")
    axis.legend()
    image = png_bytes(figure, dpi=110)

    catalogue = diff.catalogue
    moved_passes = ", ".join(f"{m['pass']} ({m['base']} -> {m['head']})" for m in catalogue["moved"])
    lines = [
        f"# {_named(diff.base)} -> {diff.head}: {diff.policy} on {len(diff.graphs)} graphs",
        "",
        f"Command: `{command}`",
        "",
        "## The pipeline",
        "",
        f"- added: {', '.join(catalogue['added']) or 'none'}",
        f"- removed: {', '.join(catalogue['removed']) or 'none'}",
        f"- moved: {moved_passes or 'none'}",
        f"- the policy on head: masked {', '.join(diff.action_match['head']['masked']) or 'none'}; "
        f"not offered {', '.join(diff.action_match['head']['not_offered']) or 'none'}",
        "",
        "## Graphs that moved",
        "",
        "| graph | D base -> head | R base -> head | sequence changed | runtime ratio base -> head "
        "| outputs differ | changed by |",
        "|---|---|---|---|---|---|---|",
    ]
    moved = [
        g
        for g in diff.graphs
        if g.D[0] != g.D[1] or g.R[0] != g.R[1] or g.sequence_changed or g.outputs_differ
    ]
    for graph in moved:
        culprits = [
            f"{key}: {value['summary']}" for key, value in graph.changed_by.items() if isinstance(value, dict)
        ]
        runtime = " -> ".join("-" if r is None else f"{r:.2f}" for r in graph.runtime_ratio)
        differ = "-" if graph.outputs_differ is None else ("yes" if graph.outputs_differ else "no")
        lines.append(
            f"| {graph.name} | {_pair(graph.D)} | {_pair(graph.R)} "
            f"| {'yes' if graph.sequence_changed else 'no'} "
            f"| {runtime} | {differ} | {'<br>'.join(culprits) or '-'} |"
        )
    regressions = diff.regressions()
    lines += [
        "",
        f"{len(moved)} of {len(diff.graphs)} graphs moved; {len(regressions)} regressions, "
        f"{len(diff.improvements())} improvements (tolerance {diff.tolerance}); "
        f"{len(diff.outputs_differ())} graphs whose outputs differ between the compilers "
        "(reported, not failed).",
        "",
        "## Regressions",
        "",
        *(f"- {r['name']}: {r['why']}; changed by {r['changed_by'] or '-'}" for r in regressions),
        *(["- none"] if not regressions else []),
        "",
        "![per-graph change](changes.png)",
        "",
    ]
    write_atomically(Path(directory) / "changes.png", image)
    write_atomically(Path(directory) / "report.md", "\n".join(lines).encode())
