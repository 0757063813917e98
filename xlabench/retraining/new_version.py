"""A new policy version, made as `xlabench retrain` makes it: train, choose a seed, evaluate, write.

Train (one seed, or several judged on `select_on`), evaluate the greedy rollout on each eval SPEC (op
counts, and outputs executed and judged against XLA's default: `judge_outputs`), then save atomically
-- unless some graph's outputs are numerically worse than the default's: then nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.agents.algorithm_config import AlgorithmConfig, hyperparameters_of
from xlabench.agents.seeds import (
    SEED_SCORES_FORMAT,
    SeedScores,
    best_seed,
    curves_figure,
    parse_seeds,
    statistics,
)
from xlabench.baselines.baseline_store import baselines_directory
from xlabench.errors import UserInputError
from xlabench.eval.evaluate import evaluate_graphs
from xlabench.eval.evaluation_records import summarize
from xlabench.files import write_json
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import Artifact, check_name, policies_directory, save, seed_statistics_line
from xlabench.policies.policy import Policy
from xlabench.settings import Settings, current, runs_under_its_settings
from xlabench.xla import PassDriver, default_driver
from xlabench.xla.compilers.worker_pool import CompilerPool

if TYPE_CHECKING:  # `xlabench --help` stays quick: training is imported when retrain runs
    from xlabench.agents.retrain_checkpoint import SeedCheckpoint
    from xlabench.eval.evaluation_records import EvaluationRow, Summary

DEFAULT_STEPS = 20_000
# Timed runs of each executable in retrain's evaluation: it executes to judge outputs; the runtime ratio
# it stores on the side is a rough one (`xlabench baselines update` measures the real ones).
EVAL_REPEATS = 3


@dataclass(frozen=True)
class RetrainRequest:
    """What `xlabench retrain` is asked for (its options, `docs/reference.md`)."""

    name: str = "general"
    algorithm: str = "ppo"
    graphs: str = "train"
    steps: int = DEFAULT_STEPS
    seed: int = 0
    seeds: str | None = None  # "0-4": several seeds, the best on `select_on` ships
    select_on: str = "val"
    seed_scores: str | None = None  # a file for every seed's scores
    reward_baseline: str | None = None  # default: the environment's
    set_pairs: tuple[str, ...] = ()  # KEY=VALUE hyperparameters
    validate_every: int = 0
    logdir: str | None = None
    workers: int = 2
    ray: str | None = None
    checkpoint: str | None = None
    warm_start: str = "xla-order"
    eval_graphs: str = "val,test,unseen"


@dataclass(frozen=True)
class RetrainOutcome:
    """Where the version was written (None: refused), why it was refused (a line a graph), and the
    closing line."""

    written: Path | None
    refused: list[str]
    message: str


def parse_hyperparameters(algorithm: str, pairs: list[str]) -> AlgorithmConfig:
    """`algorithm`'s hyperparameters with `--set KEY=VALUE` pairs applied (values read as JSON: 0.01,
    64, null, true)."""

    overrides: dict[str, Any] = {}
    for pair in pairs:
        key, equals, text = pair.partition("=")
        if not equals or not key:
            raise UserInputError(f"--set {pair}: expected KEY=VALUE")
        try:
            overrides[key] = json.loads(text)
        except json.JSONDecodeError:
            raise UserInputError(f"--set {pair}: {text!r} is not a number, true/false or null") from None
    try:
        return hyperparameters_of(algorithm, overrides)
    except ValueError as error:
        raise UserInputError(f"--set: {error}") from None


def numerically_worse(rows: list[EvaluationRow]) -> list[str]:
    """One line for each evaluated graph whose outputs are numerically worse than XLA's default's."""
    return [f"{row.name}: {row.outputs_differ[0]}" for row in rows if row.outputs_differ]


@runs_under_its_settings
def retrain(
    request: RetrainRequest,
    say: Callable[[str], None] = lambda line: None,
    *,
    settings: Settings | None = None,
) -> RetrainOutcome:
    """Make a new version of `request.name` (module docstring); `say` hears progress lines; every compiler
    call, the policy written and the baselines it is held to follow `settings` (default: in effect)."""
    from xlabench.agents.imitation import EXPERT
    from xlabench.agents.retrain_checkpoint import SeedCheckpoint
    from xlabench.agents.train import ENVIRONMENT, WARM_START, Validation, package_versions, train

    settings = settings or current()
    check_name(request.name)  # before hours of training, not after
    if request.steps < 0 or (request.steps == 0 and request.warm_start == "none"):
        raise UserInputError(f"--steps must be positive (0 only with a warm start), not {request.steps}")
    eval_specs = [spec for spec in request.eval_graphs.split(",") if spec]
    eval_graphs = {spec: resolve_graphs(spec) for spec in eval_specs}  # bad SPECs fail before training
    resolve_graphs(request.graphs)
    hyperparameters = parse_hyperparameters(request.algorithm, request.set_pairs)
    if request.seed_scores and not request.seeds:
        raise UserInputError("--seed-scores needs --seeds: one seed has no statistics over seeds")
    seeds = parse_seeds(request.seeds) if request.seeds else [request.seed]
    select_graphs = resolve_graphs(request.select_on) if request.seeds else []
    environment = ENVIRONMENT
    if request.reward_baseline is not None:
        environment = environment.replace(reward_baseline=request.reward_baseline)
    warm_start = WARM_START if request.warm_start == "xla-order" and request.algorithm != "dqn" else None
    if warm_start is not None:
        previous, starts = _previous_starts(request.name, request.graphs, baselines_directory(settings))
        if starts:
            warm_start = warm_start.with_starts(previous, starts)
            say(
                f"retrain: the warm start starts from {previous}'s sequences where they beat XLA's order "
                f"({len(starts)} training graphs stored)"
            )
    if request.validate_every < 0:
        raise UserInputError(f"--validate-every must be 0 or more steps, not {request.validate_every}")
    validation = Validation(request.select_on, request.validate_every) if request.validate_every else None
    checkpoint = None
    if request.checkpoint:
        # What makes a seed's run what it is; not --name, --eval-graphs or --ray (where it runs).
        described = {
            "algorithm": request.algorithm,
            "graphs": request.graphs,
            "steps": request.steps,
            "environment": environment.to_json(),
            "hyperparameters": hyperparameters.to_json(),
            "warm_start": warm_start.to_json() if warm_start is not None else None,
            "validation": [request.select_on, request.validate_every] if validation is not None else None,
            "environments": request.workers,
            "packages": package_versions(),
            "compiler": default_driver(settings).compiler.name,  # the compiler it trains with (--compiler)
        }
        if warm_start is not None:  # how its demonstrations are made (a key only then: older DIRs resume)
            described["expert"] = EXPERT[environment.observe_xla_order]
        checkpoint = SeedCheckpoint(Path(request.checkpoint), described)
        finished = [seed for seed in checkpoint.open() if seed in seeds]
        if finished:
            say(f"retrain: seeds {', '.join(map(str, finished))} already trained in {request.checkpoint}")
    runs = []
    for seed in seeds:
        run = checkpoint.load(seed, hyperparameters, environment) if checkpoint is not None else None
        if run is None:
            run = train(
                algorithm=request.algorithm,
                graphs=request.graphs,
                steps=request.steps,
                seed=seed,
                environments=request.workers,
                logdir=request.logdir,
                ray_address=request.ray,
                warm_start=warm_start,
                environment=environment,
                hyperparameters=hyperparameters,
                validation=validation,
                settings=settings,
            )
            if checkpoint is not None:
                checkpoint.save(run)
        runs.append(run)
    pool = CompilerPool(size=request.workers, settings=settings)
    driver = PassDriver(pool=pool, settings=settings)
    worse: list[str] = []
    summaries: dict[str, Summary] = {}  # per eval SPEC
    try:
        selection = None
        run = runs[0]
        if request.seeds:
            scores = [_kept_seed_scores(run, request, driver, select_graphs, checkpoint, say) for run in runs]
            selection = statistics(scores)
            best = best_seed(scores)
            if best is None:
                refused = [f"seed {score.seed}: {line}" for score in scores for line in score.outputs_worse]
                _write_seed_scores(request, scores, selection, None, refused)
                return RetrainOutcome(
                    None,
                    refused,
                    f"{request.name} not written: every seed's outputs are numerically worse than XLA's "
                    f"default on some graph of {request.select_on} (above); on {request.select_on}, "
                    f"{seed_statistics_line(selection)}",
                )
            run = runs[scores.index(best)]
            say(f"retrain: on {request.select_on}, {seed_statistics_line(selection)}; seed {run.seed} ships")
        metadata = run.metadata(request.name, driver)
        if selection is not None:
            metadata["selected_on"] = request.select_on
            metadata["seeds"] = [score.to_json() for score in scores]
            metadata["seed_statistics"] = selection
        policy = _policy(metadata, run.weights)
        for spec, graphs in eval_graphs.items():
            rows = evaluate_graphs(
                driver, graphs, "policy", {"policy": policy}, True, EVAL_REPEATS, request.workers,
                f"eval {spec}", request.ray,
            )  # fmt: skip
            per_graph = [row.result_json(details=False) for row in rows]
            summaries[spec] = summarize(rows)
            metadata["eval"][spec] = {**summaries[spec].to_json(), "per_graph": per_graph}
            worse += numerically_worse(rows)
    finally:
        pool.close()
    if worse:
        if selection is not None:
            _write_seed_scores(request, scores, selection, None, worse)
        return RetrainOutcome(
            None,
            worse,
            f"{request.name} not written: its outputs are numerically worse than XLA's default on "
            f"{len(worse)} graph(s) (above)",
        )
    scores_text = ", ".join(
        f"{spec} {summary.geomean_vs_default:.4f}"
        for spec, summary in summaries.items()
        if summary.geomean_vs_default is not None
    )
    made = f"{run.algorithm}: {run.steps} steps" if run.steps > 0 else "warm start only (no PPO update)"
    chosen = ""
    if selection is not None:
        chosen = f" (best of seeds {request.seeds} on {request.select_on}: {seed_statistics_line(selection)})"
    change = (
        f"{made} on {request.graphs}, {run.episodes} episodes, {run.seconds / 60:.0f} min, seed {run.seed}"
        + chosen
        + f". Geomean vs_default: {scores_text or 'not evaluated'}."
    )
    files = {}
    if selection is not None:
        title = f"{request.name}: {run.algorithm} on {request.graphs}, seeds {request.seeds}"
        files["training_curves.png"] = curves_figure(scores, title)
    path = save(request.name, run.weights, metadata, change, policies_directory(settings), files=files)
    if selection is not None:  # after the version: a seed-scores file that names a shipped seed has one
        _write_seed_scores(request, scores, selection, run.seed, [])
    if checkpoint is not None:
        checkpoint.remove()
    return RetrainOutcome(path, [], f"wrote {path} ({change})")


def _previous_starts(
    name: str, graphs: str, baselines_root: Path | None = None
) -> tuple[str, dict[str, tuple[str, ...]]]:
    """The version before (the label of `name`'s stored baselines in `baselines_root`, default the
    baselines directory) and its stored sequences on the training graphs: what the new version is held to."""
    from xlabench.baselines import baseline_store

    stored = baseline_store.load(name, root=baselines_root)
    if stored is None:
        return "", {}
    starts = {}
    for graph in resolve_graphs(graphs):
        entry = stored.get(graph.name)
        if entry is not None and entry.sequence is not None:
            starts[graph.name] = tuple(entry.sequence)
    return stored.policy, starts


def _write_seed_scores(
    request: RetrainRequest,
    scores: list[SeedScores],
    selection: dict[str, Any],
    shipped_seed: int | None,
    not_written: list[str],
) -> None:
    """`--seed-scores FILE`: every seed's scores and their statistics, whether or not a version ships
    (`not_written`: why none does, one line per graph)."""
    if not request.seed_scores:
        return
    document = {
        "format": SEED_SCORES_FORMAT,
        "name": request.name,
        "algorithm": request.algorithm,
        "selected_on": request.select_on,
        "shipped_seed": shipped_seed,
        "not_written": not_written,
        "seeds": [score.to_json() for score in scores],
        "seed_statistics": selection,
    }
    write_json(request.seed_scores, document)


def _policy(metadata: dict[str, Any], tensors: dict[str, Any]) -> Any:
    """A policy held in memory, as it will be stored."""

    return Policy(Artifact(Path("(in memory)"), metadata, tensors))


def _kept_seed_scores(
    run: Any,
    request: RetrainRequest,
    driver: Any,
    graphs: list[Any],
    checkpoint: SeedCheckpoint | None,
    say: Callable[[str], None],
) -> SeedScores:
    """`_seed_scores`, kept in the checkpoint once measured (and read back from it on a resumed run)."""
    if checkpoint is not None:
        kept = checkpoint.load_scores(run.seed, request.select_on)
        if kept is not None and sorted(kept.get("graphs", [])) == sorted(g.name for g in graphs):
            scores = SeedScores.from_json(kept)
            say(f"retrain: seed {run.seed} on {request.select_on}: policy {scores.geomean():.4f} (kept)")
            return scores
    scores = _seed_scores(run, request, driver, graphs, say)
    if checkpoint is not None:
        checkpoint.save_scores(run.seed, request.select_on, scores.to_json())
    return scores


def _seed_scores(
    run: Any, request: RetrainRequest, driver: Any, graphs: list[Any], say: Callable[[str], None]
) -> Any:
    """One seed's policy and warm start rolled out on the selection graphs (op counts), the policy's
    outputs executed and judged as the final evaluation judges them (one run each: no timing)."""

    metadata = run.metadata(request.name, driver)
    judged = {}
    worse: list[str] = []
    for which, tensors in (("policy", run.weights), ("warm start", run.warm_start_tensors)):
        if tensors is None:
            judged[which] = None
            continue
        execute = which == "policy"
        rows = evaluate_graphs(
            driver, graphs, "policy", {"policy": _policy(metadata, tensors)}, execute, 1 if execute else 0,
            request.workers, f"seed {run.seed}: {which} on {request.select_on}", request.ray,
        )  # fmt: skip
        if execute:
            worse = numerically_worse(rows)
        failed = [row.name for row in rows if row.vs_default is None]
        if failed:
            raise UserInputError(
                f"seed {run.seed}: the {which} could not be rolled out on {', '.join(failed)}"
            )
        judged[which] = [row.vs_default for row in sorted(rows, key=lambda row: row.name)]
    names = sorted(graph.name for graph in graphs)
    scores = SeedScores(
        run.seed, judged["policy"], judged["warm start"], list(run.curve), names, list(run.validation_curve),
        outputs_worse=worse,
    )  # fmt: skip
    warm = f", warm start {scores.geomean('warm_start'):.4f}" if scores.warm_start else ""
    numerics = f", outputs worse than the default's on {len(worse)} graph(s)" if worse else ""
    say(f"retrain: seed {run.seed} on {request.select_on}: policy {scores.geomean():.4f}{warm}{numerics}")
    return scores
