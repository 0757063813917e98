"""The `xlabench` command line: each subcommand lives beside the code it drives."""

from __future__ import annotations

import argparse
import os
import sys

from xlabench.errors import XlabenchError
from xlabench.xla.compilers import COMPILER_VARIABLE, resolve_compiler


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    from xlabench.agents import cli as agents_cli
    from xlabench.baselines import cli as baselines_cli
    from xlabench.env import bench as env_bench
    from xlabench.eval import cli as eval_cli
    from xlabench.eval import compare as eval_compare
    from xlabench.eval import compiler_diff
    from xlabench.graphs import cli as graphs_cli
    from xlabench.interactive import advise as interactive_advise
    from xlabench.interactive import serve as interactive_serve
    from xlabench.policies import cli as policies_cli
    from xlabench.xla import bench as xla_bench
    from xlabench.xla import cli as xla_cli
    from xlabench.xla import scaling as xla_scaling

    parser = argparse.ArgumentParser(prog="xlabench", description=__doc__)
    subparsers = parser.add_subparsers(dest="command", required=True)
    xla_cli.register(subparsers)
    graphs_cli.register(subparsers)
    eval_cli.register(subparsers)
    eval_compare.register(subparsers)
    agents_cli.register(subparsers)
    policies_cli.register(subparsers)
    baselines_cli.register(subparsers)
    interactive_serve.register(subparsers)
    interactive_advise.register(subparsers)
    bench = subparsers.add_parser("bench", help="benchmarks that print figures (speed, robustness)")
    bench_subparsers = bench.add_subparsers(dest="benchmark", required=True)
    xla_bench.register(bench_subparsers)
    xla_scaling.register(bench_subparsers)
    env_bench.register(bench_subparsers)
    compilers = subparsers.add_parser("compilers", help="other jaxlib releases side by side: add, list, diff")
    compilers_subparsers = compilers.add_subparsers(dest="compilers_command", required=True)
    xla_cli.register_compilers(compilers_subparsers)
    compiler_diff.register(compilers_subparsers)
    for command in COMPILING_COMMANDS:
        for leaf in _leaf_parsers(subparsers.choices[command]):
            leaf.add_argument(
                "--compiler",
                metavar="VERSION",
                help=f"the jaxlib release to compile with: the installed one (default; ${COMPILER_VARIABLE}) "
                "or one added with `xlabench compilers add`",
            )
    return parser


# Commands that compile, and so take --compiler: every subcommand under them.
COMPILING_COMMANDS = (
    "passes", "stats", "apply", "eval", "retrain", "policies", "baselines", "bench", "interactive",
)  # fmt: skip


def _leaf_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parser itself, or every parser under its subcommands."""
    groups = [action for action in parser._actions if isinstance(action, argparse._SubParsersAction)]
    if not groups:
        return [parser]
    return [leaf for group in groups for child in group.choices.values() for leaf in _leaf_parsers(child)]


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; user mistakes become a single `xlabench: error: ...` line and exit 2."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if getattr(args, "compiler", None):
            # Every driver, pool and worker process of this run resolves the compiler from here.
            os.environ[COMPILER_VARIABLE] = resolve_compiler(args.compiler).version
        return int(args.handler(args) or 0)
    except XlabenchError as error:
        print(f"xlabench: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("xlabench: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as Unix tools do.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
