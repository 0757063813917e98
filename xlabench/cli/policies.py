"""`xlabench policies list|show`: the stored policy versions."""

from __future__ import annotations

import argparse
from typing import Any

from xlabench.policies.artifact import how_made, policies_directory, summary_line
from xlabench.policies.policy import describe, load_policy
from xlabench.policies.policy_listing import every_version, stored_policies
from xlabench.settings import Settings

_NONE = "no policies in {} (train one with `xlabench retrain`)"


def register(subparsers: Any) -> None:
    """Add the `policies` subcommand."""
    parser = subparsers.add_parser("policies", help="list stored policies, show one version")
    commands = parser.add_subparsers(dest="policies_command", required=True)
    listing = commands.add_parser("list", help="every policy and its latest version")
    listing.add_argument(
        "--markdown",
        action="store_true",
        help="a Markdown table of every version: how it was made, on what, its geomeans per split",
    )
    listing.set_defaults(handler=run_list)
    show = commands.add_parser("show", help="one version's metadata, verified")
    show.add_argument("policy", help="NAME (latest), NAME@vX.Y or a version directory")
    show.set_defaults(handler=run_show)


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    """One line per policy: its latest version's summary and how many versions exist."""

    root = policies_directory(settings)
    if args.markdown:
        documents = every_version(root)
        if not documents:
            print(_NONE.format(root))
        print(markdown_table(documents))
        return 0
    policies = stored_policies(root)
    if not policies:
        print(_NONE.format(root))
    for policy in policies:
        print(f"{summary_line(policy.latest)}  [{len(policy.versions)} version(s)]")
    return 0


def markdown_table(documents: list[dict[str, Any]]) -> str:
    """Shipped versions as a Markdown table, from their metadata: made how, on what, geomean per split."""

    splits = sorted({split for document in documents for split in document.get("eval", {})})
    header = ["version", "made", "created", "trained on", "steps", "selected on", *splits]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for document in documents:
        training = document.get("training", {})
        scores = [document.get("eval", {}).get(split, {}).get("geomean_vs_default") for split in splits]
        cells = [
            f"{document['name']}@{document['version']}",
            how_made(document),
            str(document.get("created", "-"))[:10],
            str(training.get("graphs", "-")),
            str(training.get("steps", "-")),
            str(document.get("selected_on", "-")),
            *("-" if score is None else f"{score:.4f}" for score in scores),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def run_show(args: argparse.Namespace, settings: Settings) -> int:
    """A version's metadata, after loading it the way `xlabench eval` does (checksum, spaces)."""

    policy = load_policy(args.policy, root=policies_directory(settings))  # nor on the compiler
    print(describe(policy.artifact.metadata))
    print(f"  path        {policy.artifact.path}")
    return 0
