"""Measuring a policy for its baselines: an evaluation with runtimes, repeated, one row a graph."""

from __future__ import annotations

import dataclasses
import statistics

from xlabench.errors import UserInputError
from xlabench.eval.evaluate import evaluate_graphs
from xlabench.eval.evaluation_records import EvaluationRow
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import gated_graphs, policies_directory
from xlabench.policies.policy import Policy, load_policy
from xlabench.settings import Settings, current
from xlabench.xla import PassDriver
from xlabench.xla.compilers.worker_pool import CompilerPool


def measure_policy(
    reference: str,
    graphs: str | None,
    workers: int,
    repeats: int,
    min_run_seconds: float,
    measurements: int = 1,
    for_storing: bool = False,
    settings: Settings | None = None,
) -> tuple[Policy, list[EvaluationRow]]:
    """Load a policy and evaluate it on the graphs of a SPEC (default its gated graphs), runtimes
    included, `measurements` times (one row a graph: `median_rows`). `for_storing` refuses a simulated
    compiler change: baselines are measured with the whole compiler. `settings` (default: those in
    effect) name the compiler, its caches and the policies directory."""

    settings = settings or current()
    pool = CompilerPool(size=workers, settings=settings)
    try:
        driver = PassDriver(pool=pool, settings=settings)
        if driver.disabled_passes and for_storing:
            raise UserInputError(
                f"XLABENCH_DISABLE_PASSES={','.join(driver.disabled_passes)}: baselines are measured with "
                "the whole compiler; unset it (`xlabench baselines diff` shows what the change does)"
            )
        policy = load_policy(reference, driver, policies_directory(settings))
        graphs = resolve_graphs(graphs) if graphs else gated_graphs(policy.artifact.metadata)
        runs = [
            evaluate_graphs(
                driver,
                graphs,
                "policy",
                {"policy": policy},
                True,
                repeats,
                workers,
                label=policy.label if measurements == 1 else f"{policy.label} ({number}/{measurements})",
                min_run_seconds=min_run_seconds,
                keep_runs=True,  # the default's run times: is the runtime judged at all (the floor)?
            )
            for number in range(1, measurements + 1)
        ]
        return policy, median_rows(runs)
    finally:
        pool.close()


def median_rows(runs: list[list[EvaluationRow]]) -> list[EvaluationRow]:
    """One row a graph from several evaluations of the same graphs: the median runtime ratio, every
    ratio measured kept (`runtime_ratios`). Op counts and sequences are deterministic: a graph whose
    measurements disagree on them, or failed in any, becomes an error row (not stored)."""

    rows = []
    for measured in zip(*runs, strict=True):
        row = measured[0]
        if failed := next((other for other in measured if other.error is not None), None):
            rows.append(failed)
            continue
        if any((other.policy_ops, other.sequence) != (row.policy_ops, row.sequence) for other in measured):
            row = dataclasses.replace(
                row, error="the rollout differed between measurements (op count or sequence)"
            )
        else:
            ratios = [other.runtime_ratio for other in measured]
            row = dataclasses.replace(row, runtime_ratio=statistics.median(ratios), runtime_ratios=ratios)
        rows.append(row)
    return rows
