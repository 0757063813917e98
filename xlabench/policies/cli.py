"""`xlabench policies list|show`: the stored policy versions."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    """Add the `policies` subcommand."""
    parser = subparsers.add_parser("policies", help="list stored policies, show one version")
    commands = parser.add_subparsers(dest="policies_command", required=True)
    commands.add_parser("list", help="every policy and its latest version").set_defaults(handler=run_list)
    show = commands.add_parser("show", help="one version's metadata, verified")
    show.add_argument("policy", help="NAME (latest), NAME@vX.Y or a version directory")
    show.set_defaults(handler=run_show)


def run_list(args: argparse.Namespace) -> int:
    """One line per policy: its latest version's summary and how many versions exist."""
    from xlabench.policies.artifact import (
        policies_directory,
        policy_names,
        read_metadata,
        resolve,
        summary_line,
        versions,
    )

    names = policy_names()
    if not names:
        print(f"no policies in {policies_directory()} (train one with `xlabench retrain`)")
    for name in names:
        print(f"{summary_line(read_metadata(resolve(name)))}  [{len(versions(name))} version(s)]")
    return 0


def run_show(args: argparse.Namespace) -> int:
    """A version's metadata, after loading it the way `xlabench eval` does (checksum, spaces)."""
    from xlabench.policies.policy import describe, load_policy
    from xlabench.xla import default_driver

    policy = load_policy(args.policy, default_driver())
    print(describe(policy.artifact.metadata))
    print(f"  path        {policy.artifact.path}")
    return 0
