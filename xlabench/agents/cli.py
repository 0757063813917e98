"""`xlabench retrain`: train a policy, evaluate it on held-out graphs, write it as a new version."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from xlabench.agents.train import ALGORITHMS

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
    parser.add_argument("--steps", type=int, default=DEFAULT_STEPS, help="environment steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--logdir", default=None, help="TensorBoard log directory")
    parser.add_argument("--workers", type=int, default=2, help="environment processes (one compiler each)")
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


def numerically_worse(rows: list[dict[str, Any]]) -> list[str]:
    """One line for each evaluated graph whose outputs are numerically worse than XLA's default's."""
    return [f"{row['name']}: {row['outputs_differ'][0]}" for row in rows if row.get("outputs_differ")]


def run_retrain(args: argparse.Namespace) -> int:
    """Train, evaluate the greedy rollout on each eval SPEC (op counts, and outputs executed and judged
    against XLA's default: `judge_outputs`), then save atomically -- unless some graph's outputs are
    numerically worse than the default's: then nothing is written."""
    from xlabench.agents.train import train
    from xlabench.errors import UserInputError
    from xlabench.eval.evaluate import RESULT_FIELDS, evaluate_graphs, summarize
    from xlabench.graphs import resolve_graphs
    from xlabench.policies.artifact import Artifact, check_name, save
    from xlabench.policies.policy import Policy
    from xlabench.xla import PassDriver
    from xlabench.xla.pool import CompilerPool

    check_name(args.name)  # before hours of training, not after
    if args.steps < 0 or (args.steps == 0 and args.warm_start == "none"):
        raise UserInputError(f"--steps must be positive (0 only with a warm start), not {args.steps}")
    eval_specs = [spec for spec in args.eval_graphs.split(",") if spec]
    eval_graphs = {spec: resolve_graphs(spec) for spec in eval_specs}  # bad SPECs fail before training
    resolve_graphs(args.graphs)
    warm_start = args.warm_start == "xla-order" and args.algo != "dqn"
    run = train(
        args.algo, args.graphs, args.steps, args.seed, args.workers, args.logdir, True, args.ray, warm_start
    )
    pool = CompilerPool(size=max(1, args.workers))
    driver = PassDriver(pool=pool)
    worse: list[str] = []
    try:
        metadata = run.metadata(args.name, driver)
        tensors = run.model.policy.state_dict()
        policy = Policy(Artifact(Path("(in memory)"), metadata, tensors))
        for spec, graphs in eval_graphs.items():
            rows = evaluate_graphs(
                driver, graphs, "policy", {"policy": policy}, True, EVAL_REPEATS, args.workers,
                f"eval {spec}", args.ray,
            )  # fmt: skip
            per_graph = [{key: row.get(key) for key in RESULT_FIELDS} for row in rows]
            metadata["eval"][spec] = {**summarize(rows), "per_graph": per_graph}
            worse += numerically_worse(rows)
    finally:
        pool.close()
    if worse:
        for line in worse:
            print(f"xlabench: retrain: {line}", file=sys.stderr)
        print(
            f"xlabench: retrain: {args.name} not written: its outputs are numerically worse than XLA's "
            f"default on {len(worse)} graph(s) (above)",
            file=sys.stderr,
        )
        return 1
    scores = ", ".join(
        f"{spec} {part['geomean_vs_default']:.4f}"
        for spec, part in metadata["eval"].items()
        if part.get("geomean_vs_default") is not None
    )
    change = (
        f"{run.algorithm} on {args.graphs}: {run.steps} steps, {run.episodes} episodes, "
        f"{run.seconds / 60:.0f} min, seed {run.seed}. Geomean vs_default: {scores or 'not evaluated'}."
    )
    path = save(args.name, tensors, metadata, change)
    print(f"wrote {path} ({change})")
    return 0
