"""Judge a pass-ordering strategy against XLA's default pipeline, graph by graph.

Per graph: I (raw op count), D (XLA's default, counted at the counting point), R (the strategy's
sequence, fairly counted), `vs_default` = D / R (above 1: better than XLA), the paper's
`reduction_ratio` = (I - R) / (I - D) where I > D (undefined otherwise: bf16 graphs grow under XLA's
default), and `runtime_ratio` = median run time of the sequence's executable / XLA's default
executable, timed in turn in one worker after every output buffer was compared.
"""

from __future__ import annotations

import dataclasses
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from xlabench.cluster import connect
from xlabench.errors import CompilerError, DriverError, UserInputError
from xlabench.eval.evaluation_checkpoint import Checkpoint
from xlabench.eval.evaluation_records import BothExecutables, EvaluationRow, Summary, summarize
from xlabench.graphs import Graph, resolve_graphs
from xlabench.policies.artifact import Artifact, policies_directory, policy_names
from xlabench.policies.guided import DEFAULT_GUIDED_BUDGET, guided_search
from xlabench.policies.policy import ActionMatch, Policy, load_policy, rollout
from xlabench.search import STRATEGIES, SearchResult
from xlabench.search.strategies import DEFAULT_BUDGET, DEFAULT_MAX_LENGTH
from xlabench.settings import Settings, carried_over, current, runs_under_its_settings
from xlabench.xla import PassDriver
from xlabench.xla.compilers.pass_catalogue import DEFAULT_ACTION_SET
from xlabench.xla.compilers.worker_pool import CompilerPool
from xlabench.xla.driver.execution import execute_against_default, judge_outputs, random_inputs

SEARCH_PREFIX = "search:"
DEFAULT_POLICY = "general"
SEARCH_STRATEGIES = ("random", "greedy", "beam", "local", "guided")


def resolve_strategy(policy: str | None, policies_root: Path | None = None) -> str:
    """The strategy a --policy value names: a search (`search:beam`), `replay`, or `policy` -- a
    trained policy's name, NAME@vX.Y or version directory (default: the shipped general policy, looked
    for in `policies_root`, default the policies directory)."""

    choices = ", ".join([*(SEARCH_PREFIX + name for name in SEARCH_STRATEGIES), "replay"])
    if policy is None:
        if DEFAULT_POLICY in policy_names(policies_root):
            return "policy"
        raise UserInputError(
            f"no policy given and no {DEFAULT_POLICY} policy is shipped (train one with `xlabench retrain`): "
            f"use --policy with a policy or one of {choices}"
        )
    if policy == "replay":
        return "replay"
    if policy.startswith(SEARCH_PREFIX):
        name = policy[len(SEARCH_PREFIX) :]
        if name in SEARCH_STRATEGIES:
            return name
        raise UserInputError(f"{policy}: unknown search strategy (choose {choices})")
    return "policy"


@dataclasses.dataclass(frozen=True)
class Evaluation:
    """What `evaluate` found: a strategy on every graph of a SPEC, and how it was run."""

    label: str  # the strategy as reports name it: "general@v3.0", "search:beam (2000 calls)"
    strategy: str
    graphs_spec: str
    jaxlib: str
    rows: list[EvaluationRow]
    summary: Summary
    action_match: ActionMatch | None  # a policy on a compiler or action list it was not made with
    runtime: bool  # executed and timed (else outputs were not compared)

    @property
    def passed(self) -> bool:
        """No graph failed, none has outputs that differ from XLA's default's, none left unexecuted."""
        return self.summary.failed == self.summary.outputs_differ == self.summary.not_executed == 0

    def to_json(self) -> dict[str, Any]:
        """The `xlabench eval --json` document: every documented field of every graph."""
        return {
            "policy": self.label,
            "jaxlib": self.jaxlib,
            "action_match": dataclasses.asdict(self.action_match) if self.action_match is not None else None,
            "graphs_spec": self.graphs_spec,
            "geomean_vs_default": self.summary.geomean_vs_default,
            "geomean_reduction_ratio": self.summary.geomean_reduction_ratio,
            "summary": self.summary.to_json(),
            "graphs": [row.result_json() for row in self.rows],
        }


@runs_under_its_settings
def evaluate(
    policy: str | None = None,
    graphs: str = "test",
    *,
    runtime: bool = True,
    repeats: int = 20,
    workers: int = 2,
    actions: str = DEFAULT_ACTION_SET,
    budget: int | None = None,
    max_length: int = DEFAULT_MAX_LENGTH,
    width: int = 5,
    seed: int = 0,
    guide: str = DEFAULT_POLICY,
    checkpoint_path: str | None = None,
    ray_address: str | None = None,
    say: Callable[[str], None] = lambda line: None,
    settings: Settings | None = None,
) -> Evaluation:
    """Judge a strategy (a policy, `search:NAME` or `replay`; default the shipped policy) against XLA's
    default pipeline on the graphs of a SPEC: what `xlabench eval` runs. `say` gets the lines worth
    telling before the run ends (a policy on another compiler, a resumed checkpoint); `settings`
    (default: those in effect) name the compiler, its caches and the policies directory."""
    settings = settings or current()
    policies_root = policies_directory(settings)
    strategy = resolve_strategy(policy, policies_root)
    if budget is not None and strategy not in SEARCH_STRATEGIES:
        raise UserInputError(
            f"--budget is the compiler calls a search may spend; {policy or DEFAULT_POLICY} does not "
            "search (search:random|greedy|beam|local|guided do)"
        )
    selected = resolve_graphs(graphs)
    if budget is None:
        budget = DEFAULT_GUIDED_BUDGET if strategy == "guided" else DEFAULT_BUDGET
    pool = CompilerPool(size=workers, settings=settings)
    driver = PassDriver(pool=pool, settings=settings)
    options: dict[str, Any] = {"budget": budget, "max_length": max_length}
    if strategy in SEARCH_STRATEGIES and strategy != "guided":
        options["actions"] = driver.catalogue.action_passes(actions)
    if strategy == "random":
        options["seed"] = seed
    if strategy == "beam":
        options["width"] = width
    label = policy or DEFAULT_POLICY
    if strategy in SEARCH_STRATEGIES and strategy != "guided":
        label = f"{label} ({budget} calls)"  # the same strategy at two budgets: two rows in `compare`
    action_match = None
    try:
        if strategy == "guided":
            options["policy"] = load_policy(guide, driver, policies_root)
            label = f"{label} ({options['policy'].label}, {budget} calls)"
        if strategy == "policy":
            options["policy"] = load_policy(label, driver, policies_root)
            label = options["policy"].label
            action_match = options["policy"].action_match(driver)
            if action_match.changed:
                say(action_match.note())
        checkpoint = None
        if checkpoint_path:
            run = _run_description(strategy, options, driver, actions, max_length, runtime, repeats)
            checkpoint = Checkpoint(checkpoint_path, run)
            resumed = sum(checkpoint.finished(graph.name) is not None for graph in selected)
            if resumed:
                say(f"resuming: {resumed} of {len(selected)} graphs already finished in {checkpoint_path}")
        rows = evaluate_graphs(
            driver, selected, strategy, options, runtime, repeats, workers, f"eval {label}", ray_address,
            checkpoint=checkpoint,
        )  # fmt: skip
    finally:
        pool.close()
    return Evaluation(
        label, strategy, graphs, driver.jaxlib_version, rows, summarize(rows), action_match, runtime
    )


def _run_description(
    strategy: str,
    options: dict[str, Any],
    driver: PassDriver,
    actions: str,
    max_length: int,
    runtime: bool,
    repeats: int,
) -> dict[str, Any]:
    """Everything a graph's row depends on besides the graph: a checkpoint is only resumed by its own run."""
    run: dict[str, Any] = {"strategy": strategy, "jaxlib": driver.jaxlib_version}
    if strategy in ("policy", "guided"):
        run["policy"] = options["policy"].label
        run["weights_sha256"] = options["policy"].artifact.metadata.get("weights_sha256")
    if strategy not in ("policy", "replay"):
        run.update({"actions": actions, "budget": options["budget"], "max_length": max_length})
        run.update({key: options[key] for key in ("width", "seed") if key in options})
    run.update({"runtime": runtime, "repeats": repeats if runtime else None})
    return run


def evaluate_graph(
    driver: PassDriver,
    graph: Graph,
    strategy: str,
    search_options: dict[str, Any],
    runtime: bool = True,
    repeats: int = 20,
    cancel: threading.Event | None = None,
    keep_runs: bool = False,
    min_run_seconds: float = 0.0,
    keep_outputs: bool = False,
) -> EvaluationRow:
    """One row of the evaluation: counts, ratios, the sequence and what finding it cost.

    Setting `cancel` stops a search at its next compiler call and skips the runtime measurement.
    `keep_runs` adds every timed run of both executables (`run_seconds`), not just their ratio;
    `min_run_seconds` times each executable for at least that long in all (more than `repeats` runs).
    `keep_outputs` adds both executables' output buffers (`outputs`).
    """
    row = EvaluationRow(graph.name, graph.family)
    try:
        module = driver.load(graph.hlo_text(), graph.name)
        row.input_ops = input_ops = driver.features(module).op_count
        row.default_ops = default_ops = driver.features(driver.run_default_pipeline(module)).op_count
        if strategy == "policy":
            found = rollout(search_options["policy"], driver, graph)
        elif strategy == "guided":
            found = guided_search(
                search_options["policy"], driver, graph, search_options["budget"],
                search_options["max_length"], cancel,
            )  # fmt: skip
        else:
            run: Callable[..., SearchResult] = STRATEGIES[strategy]
            options = {**search_options, "cancel": cancel} if strategy != "replay" else {}
            found = run(driver, module, **options)
        row.policy_ops, row.sequence, row.calls = found.op_count, found.sequence, found.calls
        row.search_depth = found.depth
        row.seconds = found.seconds
        row.vs_default = default_ops / found.op_count
        row.reduction_ratio = (
            (input_ops - found.op_count) / (input_ops - default_ops) if input_ops > default_ops else None
        )
        if runtime and not (cancel is not None and cancel.is_set()):
            # The rule `search:local`, the warm start and the plugin judge by (`judge_sequence`):
            # non-negative inputs keep variances and scales in their domain.
            inputs = random_inputs(module, seed=0, driver=driver, non_negative=True)
            assert found.module is not None
            sequence_run, default_run = execute_against_default(
                found.module,
                found.applied,
                module,
                inputs,
                repeats=repeats,
                driver=driver,
                min_seconds=min_run_seconds,
            )
            judged = judge_outputs(module, inputs, default_run.outputs, sequence_run.outputs, driver)
            problems = judged.problems
            if judged.errors:  # low-precision arithmetic: both errors against the f32 reference, kept
                row.output_errors = list(judged.errors)
            if problems:
                row.error = f"outputs differ from XLA's default executable: {problems[0]}"
                row.outputs_differ = problems
            else:
                row.runtime_ratio = sequence_run.median_run_seconds / default_run.median_run_seconds
            if keep_outputs:
                row.outputs = BothExecutables(sequence_run.outputs, default_run.outputs)
            if keep_runs:
                row.run_seconds = BothExecutables(sequence_run.run_seconds, default_run.run_seconds)
    except (CompilerError, DriverError) as error:  # the graph failed: the others go on
        row.error = str(error)
    return row


def evaluate_graphs(
    driver: PassDriver,
    graphs: list[Graph],
    strategy: str,
    options: dict[str, Any],
    runtime: bool = True,
    repeats: int = 20,
    workers: int = 2,
    label: str = "eval",
    ray_address: str | None = None,
    checkpoint: Checkpoint | None = None,
    min_run_seconds: float = 0.0,
    keep_runs: bool = False,
) -> list[EvaluationRow]:
    """`evaluate_graph` over many graphs, `workers` at a time (largest first), with a progress bar.

    With `ray_address`, each graph is a Ray task on that cluster instead (one CPU, a compiler pool
    and driver of its own). Ctrl-C cancels the searches in flight and re-raises. With a
    `checkpoint`, graphs it holds are taken from it and every graph that finishes is added to it.
    """
    from tqdm import tqdm

    rows: list[EvaluationRow] = []
    if checkpoint is not None:
        rows = [row for graph in graphs if (row := checkpoint.finished(graph.name)) is not None]
        finished = {row.name for row in rows}
        graphs = [graph for graph in graphs if graph.name not in finished]
    lock = threading.Lock()
    total = len(rows) + len(graphs)
    progress = tqdm(total=total, initial=len(rows), desc=label, unit="graph", file=sys.stderr)
    if ray_address is not None:
        try:
            rows += _evaluate_on_ray(
                ray_address,
                graphs,
                strategy,
                options,
                runtime,
                repeats,
                progress,
                checkpoint,
                driver.settings,
            )
            return sorted(rows, key=lambda row: row.name)
        finally:
            progress.close()
    cancel = threading.Event()

    def run(graph: Graph) -> None:
        if cancel.is_set():
            return
        row = evaluate_graph(
            driver, graph, strategy, options, runtime, repeats, cancel, keep_runs, min_run_seconds
        )
        if cancel.is_set():
            return  # a cancelled search returns its best so far: not a result to keep
        if checkpoint is not None:
            checkpoint.add(row)
        with lock:
            rows.append(row)
            progress.update(1)
            progress.set_postfix_str(
                f"{graph.name}: " + (f"{row.vs_default:.4f}" if row.vs_default is not None else "failed")
            )

    executor = ThreadPoolExecutor(max_workers=max(1, workers))
    try:
        list(executor.map(run, sorted(graphs, key=lambda graph: -graph.instruction_count)))
    except BaseException:
        cancel.set()
        executor.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        executor.shutdown()
        progress.close()
    return sorted(rows, key=lambda row: row.name)


def _evaluate_on_ray(
    address: str,
    graphs: list[Graph],
    strategy: str,
    options: dict[str, Any],
    runtime: bool,
    repeats: int,
    progress: Any,
    checkpoint: Checkpoint | None,
    settings: Settings,
) -> list[EvaluationRow]:
    """One Ray task per graph; a policy travels as its metadata and tensors, not as an object, and what
    the command chose of its settings goes with each task (`Settings.carried`: a Ray worker is another
    process, perhaps on another machine, with its own caches and cores)."""

    ray = connect(address)
    shipped = dict(options)
    if "policy" in shipped:
        artifact = shipped.pop("policy").artifact
        shipped["artifact"] = (str(artifact.path), artifact.metadata, artifact.tensors)
    task = ray.remote(num_cpus=1)(_evaluate_graph_task)
    pending = [
        task.remote(graph, graph.hlo_text(), strategy, shipped, runtime, repeats, settings.carried())
        for graph in graphs
    ]
    rows: list[EvaluationRow] = []
    try:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            row = ray.get(done[0])
            if checkpoint is not None:
                checkpoint.add(row)
            rows.append(row)
            progress.update(1)
            progress.set_postfix_str(
                f"{row.name}: " + (f"{row.vs_default:.4f}" if row.vs_default is not None else "failed")
            )
    except BaseException:
        for future in pending:
            ray.cancel(future, force=True)
        raise
    return sorted(rows, key=lambda row: row.name)


def _evaluate_graph_task(
    graph: Graph,
    text: str,
    strategy: str,
    options: dict[str, Any],
    runtime: bool,
    repeats: int,
    carried: dict[str, Any],
) -> EvaluationRow:
    """`evaluate_graph` on a Ray worker, from the graph's text, with a compiler pool of its own under what
    the caller chose (`Settings.carried`)."""
    settings = carried_over(carried)
    options = dict(options)
    if "artifact" in options:
        path, metadata, tensors = options.pop("artifact")
        options["policy"] = Policy(Artifact(Path(path), metadata, tensors))
    pool = CompilerPool(size=1, settings=settings)
    try:
        with tempfile.TemporaryDirectory() as directory:
            local = dataclasses.replace(graph, path=Path(directory) / f"{graph.name}.hlo")
            local.path.write_text(text)
            driver = PassDriver(pool=pool, settings=settings)
            return evaluate_graph(driver, local, strategy, options, runtime, repeats)
    finally:
        pool.close()
