"""`xlabench interactive`: let an MLGO host order XLA's passes on a graph (`xlabench.interactive.serve`)."""

from __future__ import annotations

import argparse
from dataclasses import asdict, replace
from typing import Any

from xlabench.cli.arguments import POSITIVE, seconds
from xlabench.errors import UserInputError
from xlabench.files import write_json
from xlabench.interactive.serve import (
    DEFAULT_ACTION_SET,
    DEFAULT_ENVIRONMENT,
    DEFAULT_MAX_STEPS,
    DEFAULT_TIMEOUT,
    policy_environment,
    serve_episode,
)
from xlabench.settings import Settings


def register(subparsers: Any) -> None:
    """Add the `interactive` subcommand."""
    parser = subparsers.add_parser(
        "interactive", help="let an MLGO host order XLA's passes on a graph through two FIFOs"
    )
    parser.add_argument("graph", help="one graph: a suite graph's name or an .hlo file")
    parser.add_argument(
        "--channel-base", required=True, metavar="BASE", help="the host's FIFOs: BASE.in, BASE.out"
    )
    parser.add_argument(
        "--policy",
        metavar="NAME[@vX.Y]",
        help="serve the environment this policy was made in (its actions, step cap, whether it observes "
        "XLA's order), so `xlabench advise --policy` with it gives the rollout `xlabench eval` makes",
    )
    parser.add_argument("--actions", help=f"action set (default {DEFAULT_ACTION_SET})")
    parser.add_argument("--max-steps", type=POSITIVE, help=f"decisions at most (default {DEFAULT_MAX_STEPS})")
    parser.add_argument(
        "--observe-xla-order",
        action="store_true",
        help="add XLA's next pass and the share of its order done to the features (env/xla_order.py)",
    )
    parser.add_argument("--score", action="store_true", help="also send each decision's reward (float)")
    parser.add_argument(
        "--timeout",
        type=seconds(above=True),
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for the host (default 300)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the result as JSON to FILE")
    parser.set_defaults(handler=run_interactive)


def run_interactive(args: argparse.Namespace, settings: Settings) -> int:
    """Serve one episode to the host; print the result. Bad advice or a host gone: one line, exit 2."""
    environment = replace(
        DEFAULT_ENVIRONMENT,
        action_set=args.actions or DEFAULT_ACTION_SET,
        max_steps=args.max_steps or DEFAULT_MAX_STEPS,
        observe_xla_order=args.observe_xla_order,
    )
    actions = None
    if args.policy:
        environment, actions = policy_environment(args.policy, settings=settings)
        given = {"--actions": args.actions, "--max-steps": args.max_steps}
        made = {"--actions": environment.action_set, "--max-steps": environment.max_steps}
        differing = [flag for flag, value in given.items() if value is not None and value != made[flag]]
        if args.observe_xla_order and not environment.observe_xla_order:
            differing.append("--observe-xla-order")
        if differing:
            raise UserInputError(f"{args.policy} was made with another {', '.join(differing)}: leave it out")
    result = serve_episode(
        args.graph, args.channel_base, environment, actions, args.score, args.timeout, settings=settings
    )
    print(
        f"{result.name}: I {result.I}, D {result.D}, R {result.R}, vs_default {result.vs_default:.4f}, "
        f"{result.calls} compiler calls; sequence: {' '.join(result.sequence) or '(none)'}"
    )
    if args.json:
        write_json(args.json, asdict(result))
    return 0
