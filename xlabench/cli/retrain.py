"""`xlabench retrain`: train a policy, evaluate it on held-out graphs, write it as a new version."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from xlabench.agents.algorithm_config import ALGORITHMS
from xlabench.cli.arguments import NON_NEGATIVE, POSITIVE
from xlabench.retraining.new_version import DEFAULT_STEPS, RetrainRequest, retrain
from xlabench.settings import Settings


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


def run_retrain(args: argparse.Namespace, settings: Settings) -> int:
    """Train, evaluate and write a new version (`xlabench.retraining.new_version.retrain`); print why not."""
    request = RetrainRequest(
        name=args.name,
        algorithm=args.algo,
        graphs=args.graphs,
        steps=args.steps,
        seed=args.seed,
        seeds=args.seeds,
        select_on=args.select_on,
        seed_scores=args.seed_scores,
        reward_baseline=args.reward_baseline,
        set_pairs=tuple(args.set),
        validate_every=args.validate_every,
        logdir=args.logdir,
        workers=args.workers,
        ray=args.ray,
        checkpoint=args.checkpoint,
        warm_start=args.warm_start,
        eval_graphs=args.eval_graphs,
    )
    outcome = retrain(request, say=print, settings=settings)
    if outcome.written is None:
        for line in outcome.refused:
            print(f"xlabench: retrain: {line}", file=sys.stderr)
        print(f"xlabench: retrain: {outcome.message}", file=sys.stderr)
        return 1
    print(outcome.message)
    return 0
