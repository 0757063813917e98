"""The driver's fidelity: XLA's default pipeline replayed pass by pass must land on XLA's own count.

Per graph, D (XLA's default, counted at the counting point) against the replay's fairly counted
result (`xlabench.xla.diagnosis.pipeline_replay`), and whether it ends on XLA's very module; over
graphs, the geomean D/replay, the graphs within `REPLAY_TOLERANCE`, per family, and whether the
fidelity target is met (`xlabench bench replay`).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from xlabench.errors import CompilerError, DriverError
from xlabench.eval.evaluation_records import WorstGraph, geomean
from xlabench.graphs import Graph, resolve_graphs
from xlabench.settings import Settings, current
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline, trace_replay
from xlabench.xla.driver.pass_driver import PassDriver

# Replay within this fraction of XLA's own count is a match (the fidelity target).
REPLAY_TOLERANCE = 0.01


# Not frozen: replay_graph fills a row in as it measures (a compiler error may stop it at any field).
@dataclass
class ReplayRow:
    """One graph of `bench replay`: XLA's default count against the pass-by-pass replay's.

    JSON keys (`bench replay --json`, every key written, None or not): `I` = `input_ops`, `D` =
    `default_ops`, `replay` = `replay_ops` (the replay's fairly counted result), `ratio` = D / replay;
    `same_module`, `applications`, `parting`, `error` as named. The other fields are printed, not stored.
    """

    name: str
    family: str
    input_ops: int | None = None
    default_ops: int | None = None
    replay_ops: int | None = None
    # Whether the replay ends on XLA's very module (before counting), not just its count.
    same_module: bool | None = None
    ratio: float | None = None
    applications: int | None = None
    pass_errors: list[str] | None = None
    fixed_point_rounds: int | None = None
    # With --trace: where the replay parts from XLA's pipeline, and the lines that show both side by side.
    parting: str | None = None
    trace: list[str] | None = None
    error: str | None = None
    seconds: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The graph's entry of `bench replay --json`."""
        return {
            "name": self.name,
            "family": self.family,
            "I": self.input_ops,
            "D": self.default_ops,
            "replay": self.replay_ops,
            "ratio": self.ratio,
            "same_module": self.same_module,
            "applications": self.applications,
            "parting": self.parting,
            "error": self.error,
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> ReplayRow:
        """An entry of `bench replay --json`."""
        return cls(
            name=document["name"],
            family=document["family"],
            input_ops=document.get("I"),
            default_ops=document.get("D"),
            replay_ops=document.get("replay"),
            ratio=document.get("ratio"),
            same_module=document.get("same_module"),
            applications=document.get("applications"),
            parting=document.get("parting"),
            error=document.get("error"),
        )


def replay_graph(driver: PassDriver, graph: Any, trace: bool = False) -> ReplayRow:
    """D, the replay's fairly counted result and their ratio for one graph (with `trace`, where it
    parts from XLA's pipeline and the lines that show both side by side)."""

    started = time.perf_counter()
    row = ReplayRow(graph.name, graph.family)
    try:
        module = driver.load(graph.hlo_text(), graph.name)
        row.input_ops = driver.features(module).op_count
        default = driver.run_default_pipeline(module)
        row.default_ops = default_ops = driver.features(default).op_count
        replay = replay_default_pipeline(driver, module)
        row.replay_ops = replay_ops = driver.fair_op_count(replay.module, replay.passes)
        row.same_module = replay.module.fingerprint == default.fingerprint
        if trace:
            traced = trace_replay(driver, module, replay)
            row.parting, row.trace = traced.parting(), trace_lines(traced)
    except (CompilerError, DriverError) as error:  # a failed row: the other graphs go on
        row.error, row.seconds = str(error), time.perf_counter() - started
        return row
    row.ratio = default_ops / replay_ops
    row.applications = replay.applications
    row.pass_errors = [str(error) for error in replay.errors]
    row.fixed_point_rounds = replay.fixed_point_rounds
    row.seconds = time.perf_counter() - started
    return row


def trace_lines(trace: Any) -> list[str]:
    """XLA's changing runs and the replay's changing applications, each marked with the other's match."""
    ours = {state.fingerprint: index for index, state in enumerate(trace.replay)}
    theirs = {state.fingerprint for state in trace.xla}
    lines = ["  XLA's pipeline, each run that changed the module (canonical op count; = replay #k: same):"]
    for state in trace.xla:
        match = f"= replay #{ours[state.fingerprint] + 1}" if state.fingerprint in ours else ""
        lines.append(f"    {state.pass_name:70} {state.op_count:6}  {match}")
    lines.append(f"  the replay, each application that changed the module (from {trace.start.op_count} ops):")
    for index, state in enumerate(trace.replay):
        match = "= XLA" if state.fingerprint in theirs else ""
        lines.append(f"    #{index + 1:<3} {state.pass_name:65} {state.op_count:6}  {match}")
    lines.append(f"  {trace.parting()}")
    return lines


@dataclass(frozen=True)
class ReplaySummaryPart:
    """Geomean D/replay, graphs within REPLAY_TOLERANCE and the worst graph over some replay rows."""

    graphs: int
    failed: int
    geomean_ratio: float  # nan without a measured graph
    within_tolerance: int
    same_module: int
    worst: WorstGraph | None

    def to_json(self) -> dict[str, Any]:
        """The part as `bench replay --json` prints it (the worst graph's value under `ratio`)."""
        return {
            "graphs": self.graphs,
            "failed": self.failed,
            "geomean_ratio": self.geomean_ratio,
            "within_tolerance": self.within_tolerance,
            "same_module": self.same_module,
            "worst": None if self.worst is None else self.worst.to_json(value_key="ratio"),
        }


@dataclass(frozen=True)
class ReplaySummary(ReplaySummaryPart):
    """The replay over every graph, per family, and whether it meets the fidelity target."""

    families: dict[str, ReplaySummaryPart] = field(default_factory=dict)
    meets_target: bool = False

    def to_json(self) -> dict[str, Any]:
        """The `summary` of `bench replay --json`."""
        return {
            **super().to_json(),
            "families": {family: part.to_json() for family, part in self.families.items()},
            "meets_target": self.meets_target,
        }


def _replay_summary_fields(selected: list[ReplayRow]) -> dict[str, Any]:
    """The figures of a ReplaySummaryPart over `selected`."""
    measured = [row for row in selected if row.ratio is not None]
    ratios = [row.ratio for row in measured if row.ratio is not None]
    worst = max(measured, key=lambda row: abs(math.log(row.ratio or 1.0)), default=None)
    overall = geomean(ratios)
    return {
        "graphs": len(selected),
        "failed": len(selected) - len(measured),
        "geomean_ratio": float("nan") if overall is None else overall,
        "within_tolerance": sum(abs(ratio - 1) <= REPLAY_TOLERANCE for ratio in ratios),
        "same_module": sum(1 for row in measured if row.same_module),
        "worst": None if worst is None or worst.ratio is None else WorstGraph(worst.name, worst.ratio),
    }


def replay_summary(rows: list[ReplayRow]) -> ReplaySummary:
    """Geomean D/replay, graphs within REPLAY_TOLERANCE and the worst graph, overall and per family."""
    families = sorted({row.family for row in rows})
    overall = _replay_summary_fields(rows)
    per_family = {
        family: ReplaySummaryPart(**_replay_summary_fields([row for row in rows if row.family == family]))
        for family in families
    }
    meets_target = (
        overall["failed"] == 0
        and overall["within_tolerance"] >= 0.95 * overall["graphs"]
        and 0.995 <= overall["geomean_ratio"] <= 1.005
        and all(abs(part.geomean_ratio - 1) <= REPLAY_TOLERANCE for part in per_family.values())
    )
    return ReplaySummary(**overall, families=per_family, meets_target=meets_target)


def replay_graphs(
    graph_spec: str,
    workers: int,
    use_cache: bool = True,
    trace: bool = False,
    on_row: Callable[[ReplayRow, int, int], None] = lambda row, done, total: None,
    settings: Settings | None = None,
) -> tuple[list[ReplayRow], ReplaySummary]:
    """Replay XLA's default pipeline on every graph of a SPEC, `workers` at a time (largest first);
    the rows by name and their summary. `on_row(row, done, total)` hears of each graph as it ends;
    `settings` (default: those in effect) name the compiler."""
    settings = settings or current()
    graphs = resolve_graphs(graph_spec)
    pool = CompilerPool(size=workers, settings=settings)
    driver = PassDriver(pool=pool, use_cache=use_cache, settings=settings)
    rows: list[ReplayRow] = []
    lock = threading.Lock()

    def run(graph: Graph) -> None:
        row = replay_graph(driver, graph, trace=trace)
        with lock:
            rows.append(row)
            on_row(row, len(rows), len(graphs))

    try:
        driver.check_pass("algsimp")  # discovers the pipeline once, before the threads start
        # Largest graphs first, so the last graph to finish is a small one.
        ordered = sorted(graphs, key=lambda graph: -graph.instruction_count)
        with ThreadPoolExecutor(max_workers=workers) as executor:
            list(executor.map(run, ordered))
    finally:
        pool.close()
    rows.sort(key=lambda row: row.name)
    return rows, replay_summary(rows)
