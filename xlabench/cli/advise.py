"""`xlabench advise`: a policy advises a compiler speaking MLGO's protocol
(`xlabench.interactive.advisor`)."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.cli.arguments import seconds
from xlabench.interactive.advisor import advise
from xlabench.interactive.serve import DEFAULT_TIMEOUT
from xlabench.settings import Settings


def register(subparsers: Any) -> None:
    """Add the `advise` subcommand."""
    parser = subparsers.add_parser(
        "advise", help="serve a policy's advice to a compiler speaking MLGO's interactive protocol"
    )
    parser.add_argument("--policy", default="general", help="NAME or NAME@vX.Y (default general)")
    parser.add_argument(
        "--channel-base", required=True, metavar="BASE", help="the FIFOs to make: BASE.in, BASE.out"
    )
    parser.add_argument(
        "--timeout",
        type=seconds(above=True),
        default=DEFAULT_TIMEOUT,
        help="seconds to wait for the compiler (default 300)",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ...: the compiler to start")
    parser.set_defaults(handler=run_advise)


def run_advise(args: argparse.Namespace, settings: Settings) -> int:
    """Start the compiler, advise it until it closes its channel, exit with its exit code."""
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    return advise(args.policy, args.channel_base, command, args.timeout, settings=settings)
