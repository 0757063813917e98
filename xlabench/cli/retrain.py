"""`xlabench retrain`: train a policy, evaluate it on held-out graphs, write it as a new version."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xlabench.agents.algorithm_config import ALGORITHMS, AlgorithmConfig, hyperparameters_of
from xlabench.agents.seeds import (
    SEED_SCORES_FORMAT,
    SeedScores,
    best_seed,
    curves_figure,
    parse_seeds,
    statistics,
)
from xlabench.cli.arguments import NON_NEGATIVE, POSITIVE
from xlabench.errors import UserInputError
from xlabench.eval.evaluate import evaluate_graphs
from xlabench.eval.evaluation_records import summarize
from xlabench.files import write_json
from xlabench.graphs import resolve_graphs
from xlabench.policies.artifact import Artifact, check_name, save, seed_statistics_line
from xlabench.policies.policy import Policy
from xlabench.xla import PassDriver, default_driver
from xlabench.xla.compilers.worker_pool import CompilerPool

if TYPE_CHECKING:  # `xlabench --help` stays quick: the evaluation is imported when retrain runs
    from xlabench.agents.retrain_checkpoint import SeedCheckpoint
    from xlabench.eval.evaluation_records import EvaluationRow, Summary

DEFAULT_STEPS = 20_000
# Timed runs of each executable in retrain's evaluation: it executes to judge outputs; the runtime ratio
# it stores on the side is a rough one (`xlabench baselines update` measures the real ones).
EVAL_REPEATS = 3


def register(subparsers: Any) -> None:
    """Add the `retrain` subcommand."""
    parser = subparsers.add_parser("retrain", help="train a pass-ordering policy and store a new version")
    parser.add_argument("--name", default="general", help="policy name under policies/ (default general)")
    parser.add_argument("--algo", default="ppo", choices=ALGORITHMS)
    parser.add_argument("--graphs", default="train", help="SPEC to train on (default: the train split)")
    parser.add_argument("--steps", type=NON_NEGATIVE, default=DEFAULT_STEPS, help="environment steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds",
        help="train one policy per seed (0-4, or 0,2,5): each, and its warm start, judged on --select-on; "
        "the best ships, with statistics over seeds (rliable)",
    )
    parser.add_argument(
        "--select-on", default="val", metavar="SPEC", help="graphs the seeds are judged on (default val)"
    )
    parser.add_argument(
        "--reward-baseline",
        choices=("unoptimized", "default"),
        help="measure the return against the raw module's count or XLA's default count "
        "(default: the environment's, `EnvironmentConfig` in xlabench/env/environment_config.py)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="replace one of the algorithm's hyperparameters (HYPERPARAMETERS in "
        "xlabench/agents/algorithm_config.py), e.g. --set ent_coef=0.01; repeatable, stored in the policy's "
        "metadata",
    )
    parser.add_argument(
        "--validate-every",
        type=NON_NEGATIVE,
        default=0,
        metavar="STEPS",
        help="roll the policy out greedily on --select-on every STEPS environment steps of training "
        "(and before the first update): the curve goes to the metadata and training_curves.png (0: never)",
    )
    parser.add_argument(
        "--checkpoint",
        metavar="DIR",
        help="keep each seed in DIR once it is trained: the same command, interrupted, trains only the "
        "seeds DIR lacks (DIR is removed once the version is written)",
    )
    parser.add_argument(
        "--seed-scores",
        metavar="FILE",
        help="with --seeds: write every seed's scores on --select-on and their statistics to FILE, also "
        "when no seed ships (`xlabench compare` reads it)",
    )
    parser.add_argument("--logdir", default=None, help="TensorBoard log directory")
    parser.add_argument(
        "--workers", type=POSITIVE, default=2, help="environment processes (one compiler each)"
    )
    parser.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run environments and evaluation on this Ray cluster (auto, HOST:PORT)",
    )
    parser.add_argument(
        "--warm-start",
        choices=("xla-order", "none"),
        default="xla-order",
        help="first imitate XLA's own order on the training graphs (default) or start from scratch",
    )
    parser.add_argument(
        "--eval-graphs",
        default="val,test,unseen",
        help="comma-separated SPECs to evaluate on ('' for none)",
    )
    parser.set_defaults(handler=run_retrain)


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


def run_retrain(args: argparse.Namespace) -> int:
    """Train (one seed, or several judged on --select-on), evaluate the greedy rollout on each eval SPEC
    (op counts, and outputs executed and judged against XLA's default: `judge_outputs`), then save
    atomically -- unless some graph's outputs are numerically worse than the default's: then nothing is
    written."""
    from xlabench.agents.imitation import EXPERT
    from xlabench.agents.retrain_checkpoint import SeedCheckpoint
    from xlabench.agents.train import ENVIRONMENT, WARM_START, Validation, package_versions, train

    check_name(args.name)  # before hours of training, not after
    if args.steps < 0 or (args.steps == 0 and args.warm_start == "none"):
        raise UserInputError(f"--steps must be positive (0 only with a warm start), not {args.steps}")
    eval_specs = [spec for spec in args.eval_graphs.split(",") if spec]
    eval_graphs = {spec: resolve_graphs(spec) for spec in eval_specs}  # bad SPECs fail before training
    resolve_graphs(args.graphs)
    hyperparameters = parse_hyperparameters(args.algo, args.set)
    if args.seed_scores and not args.seeds:
        raise UserInputError("--seed-scores needs --seeds: one seed has no statistics over seeds")
    seeds = parse_seeds(args.seeds) if args.seeds else [args.seed]
    select_graphs = resolve_graphs(args.select_on) if args.seeds else []
    environment = ENVIRONMENT
    if args.reward_baseline is not None:
        environment = environment.replace(reward_baseline=args.reward_baseline)
    warm_start = WARM_START if args.warm_start == "xla-order" and args.algo != "dqn" else None
    if warm_start is not None:
        previous, starts = _previous_starts(args.name, args.graphs)
        if starts:
            warm_start = warm_start.with_starts(previous, starts)
            print(
                f"retrain: the warm start starts from {previous}'s sequences where they beat XLA's order "
                f"({len(starts)} training graphs stored)"
            )
    if args.validate_every < 0:
        raise UserInputError(f"--validate-every must be 0 or more steps, not {args.validate_every}")
    validation = Validation(args.select_on, args.validate_every) if args.validate_every else None
    checkpoint = None
    if args.checkpoint:
        # What makes a seed's run what it is; not --name, --eval-graphs or --ray (where it runs).
        settings = {
            "algorithm": args.algo,
            "graphs": args.graphs,
            "steps": args.steps,
            "environment": environment.to_json(),
            "hyperparameters": hyperparameters.to_json(),
            "warm_start": warm_start.to_json() if warm_start is not None else None,
            "validation": [args.select_on, args.validate_every] if validation is not None else None,
            "environments": args.workers,
            "packages": package_versions(),
            "compiler": default_driver().compiler.name,  # the compiler it trains with (--compiler)
        }
        if warm_start is not None:  # how its demonstrations are made (a key only then: older DIRs resume)
            settings["expert"] = EXPERT[environment.observe_xla_order]
        checkpoint = SeedCheckpoint(Path(args.checkpoint), settings)
        finished = [seed for seed in checkpoint.open() if seed in seeds]
        if finished:
            print(f"retrain: seeds {', '.join(map(str, finished))} already trained in {args.checkpoint}")
    runs = []
    for seed in seeds:
        run = checkpoint.load(seed, hyperparameters, environment) if checkpoint is not None else None
        if run is None:
            run = train(
                algorithm=args.algo,
                graphs=args.graphs,
                steps=args.steps,
                seed=seed,
                environments=args.workers,
                logdir=args.logdir,
                ray_address=args.ray,
                warm_start=warm_start,
                environment=environment,
                hyperparameters=hyperparameters,
                validation=validation,
            )
            if checkpoint is not None:
                checkpoint.save(run)
        runs.append(run)
    pool = CompilerPool(size=args.workers)
    driver = PassDriver(pool=pool)
    worse: list[str] = []
    summaries: dict[str, Summary] = {}  # per eval SPEC
    try:
        selection = None
        run = runs[0]
        if args.seeds:
            scores = [_kept_seed_scores(run, args, driver, select_graphs, checkpoint) for run in runs]
            selection = statistics(scores)
            best = best_seed(scores)
            if best is None:
                refused = [f"seed {score.seed}: {line}" for score in scores for line in score.outputs_worse]
                _write_seed_scores(args, scores, selection, None, refused)
                for line in refused:
                    print(f"xlabench: retrain: {line}", file=sys.stderr)
                print(
                    f"xlabench: retrain: {args.name} not written: every seed's outputs are numerically "
                    f"worse than XLA's default on some graph of {args.select_on} (above); on "
                    f"{args.select_on}, {seed_statistics_line(selection)}",
                    file=sys.stderr,
                )
                return 1
            run = runs[scores.index(best)]
            print(f"retrain: on {args.select_on}, {seed_statistics_line(selection)}; seed {run.seed} ships")
        metadata = run.metadata(args.name, driver)
        if selection is not None:
            metadata["selected_on"] = args.select_on
            metadata["seeds"] = [score.to_json() for score in scores]
            metadata["seed_statistics"] = selection
        policy = _policy(metadata, run.weights)
        for spec, graphs in eval_graphs.items():
            rows = evaluate_graphs(
                driver, graphs, "policy", {"policy": policy}, True, EVAL_REPEATS, args.workers,
                f"eval {spec}", args.ray,
            )  # fmt: skip
            per_graph = [row.result_json(details=False) for row in rows]
            summaries[spec] = summarize(rows)
            metadata["eval"][spec] = {**summaries[spec].to_json(), "per_graph": per_graph}
            worse += numerically_worse(rows)
    finally:
        pool.close()
    if worse:
        if selection is not None:
            _write_seed_scores(args, scores, selection, None, worse)
        for line in worse:
            print(f"xlabench: retrain: {line}", file=sys.stderr)
        print(
            f"xlabench: retrain: {args.name} not written: its outputs are numerically worse than XLA's "
            f"default on {len(worse)} graph(s) (above)",
            file=sys.stderr,
        )
        return 1
    scores_text = ", ".join(
        f"{spec} {summary.geomean_vs_default:.4f}"
        for spec, summary in summaries.items()
        if summary.geomean_vs_default is not None
    )
    made = f"{run.algorithm}: {run.steps} steps" if run.steps > 0 else "warm start only (no PPO update)"
    chosen = ""
    if selection is not None:
        chosen = f" (best of seeds {args.seeds} on {args.select_on}: {seed_statistics_line(selection)})"
    change = (
        f"{made} on {args.graphs}, {run.episodes} episodes, {run.seconds / 60:.0f} min, seed {run.seed}"
        + chosen
        + f". Geomean vs_default: {scores_text or 'not evaluated'}."
    )
    files = {}
    if selection is not None:
        title = f"{args.name}: {run.algorithm} on {args.graphs}, seeds {args.seeds}"
        files["training_curves.png"] = curves_figure(scores, title)
    path = save(args.name, run.weights, metadata, change, files=files)
    if selection is not None:  # after the version: a seed-scores file that names a shipped seed has one
        _write_seed_scores(args, scores, selection, run.seed, [])
    if checkpoint is not None:
        checkpoint.remove()
    print(f"wrote {path} ({change})")
    return 0


def _previous_starts(name: str, graphs: str) -> tuple[str, dict[str, tuple[str, ...]]]:
    """The version before (the label of `name`'s stored baselines) and its stored sequences on the
    training graphs: what the new version is held to."""
    from xlabench.baselines import baseline_store

    stored = baseline_store.load(name)
    if stored is None:
        return "", {}
    starts = {}
    for graph in resolve_graphs(graphs):
        entry = stored.get(graph.name)
        if entry is not None and entry.sequence is not None:
            starts[graph.name] = tuple(entry.sequence)
    return stored.policy, starts


def _write_seed_scores(
    args: argparse.Namespace,
    scores: list[SeedScores],
    selection: dict[str, Any],
    shipped_seed: int | None,
    not_written: list[str],
) -> None:
    """`--seed-scores FILE`: every seed's scores and their statistics, whether or not a version ships
    (`not_written`: why none does, one line per graph)."""
    if not args.seed_scores:
        return
    document = {
        "format": SEED_SCORES_FORMAT,
        "name": args.name,
        "algorithm": args.algo,
        "selected_on": args.select_on,
        "shipped_seed": shipped_seed,
        "not_written": not_written,
        "seeds": [score.to_json() for score in scores],
        "seed_statistics": selection,
    }
    write_json(args.seed_scores, document)


def _policy(metadata: dict[str, Any], tensors: dict[str, Any]) -> Any:
    """A policy held in memory, as it will be stored."""

    return Policy(Artifact(Path("(in memory)"), metadata, tensors))


def _kept_seed_scores(
    run: Any, args: argparse.Namespace, driver: Any, graphs: list[Any], checkpoint: SeedCheckpoint | None
) -> SeedScores:
    """`_seed_scores`, kept in the checkpoint once measured (and read back from it on a resumed run)."""
    if checkpoint is not None:
        kept = checkpoint.load_scores(run.seed, args.select_on)
        if kept is not None and sorted(kept.get("graphs", [])) == sorted(g.name for g in graphs):
            scores = SeedScores.from_json(kept)
            print(f"retrain: seed {run.seed} on {args.select_on}: policy {scores.geomean():.4f} (kept)")
            return scores
    scores = _seed_scores(run, args, driver, graphs)
    if checkpoint is not None:
        checkpoint.save_scores(run.seed, args.select_on, scores.to_json())
    return scores


def _seed_scores(run: Any, args: argparse.Namespace, driver: Any, graphs: list[Any]) -> Any:
    """One seed's policy and warm start rolled out on the selection graphs (op counts), the policy's
    outputs executed and judged as the final evaluation judges them (one run each: no timing)."""

    metadata = run.metadata(args.name, driver)
    judged = {}
    worse: list[str] = []
    for which, tensors in (("policy", run.weights), ("warm start", run.warm_start_tensors)):
        if tensors is None:
            judged[which] = None
            continue
        execute = which == "policy"
        rows = evaluate_graphs(
            driver, graphs, "policy", {"policy": _policy(metadata, tensors)}, execute, 1 if execute else 0,
            args.workers, f"seed {run.seed}: {which} on {args.select_on}", args.ray,
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
    print(f"retrain: seed {run.seed} on {args.select_on}: policy {scores.geomean():.4f}{warm}{numerics}")
    return scores
