"""The `xlabench` command line: one module per subcommand, over the library packages it drives."""

from __future__ import annotations

import argparse
import os
import sys
from typing import NoReturn

from xlabench.errors import XlabenchError
from xlabench.settings import from_environment, in_effect
from xlabench.xla.compilers.named_compilers import COMPILER_VARIABLE, resolve_compiler


class OneLineParser(argparse.ArgumentParser):
    """A parser whose mistakes are one line (`xlabench eval: error: argument --budget: ...`), exit 2."""

    def error(self, message: str) -> NoReturn:
        """Print the mistake on one line, with where the usage is, and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (usage: {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    """Return the top-level parser with every subcommand registered."""
    from xlabench.cli import advise as advise_cli
    from xlabench.cli import baselines as baselines_cli
    from xlabench.cli import compare as compare_cli
    from xlabench.cli import compilers as compilers_cli
    from xlabench.cli import compilers_diff as compilers_diff_cli
    from xlabench.cli import eval as eval_cli
    from xlabench.cli import graphs as graphs_cli
    from xlabench.cli import interactive as interactive_cli
    from xlabench.cli import policies as policies_cli
    from xlabench.cli import retrain as retrain_cli
    from xlabench.cli.bench import driver as driver_bench
    from xlabench.cli.bench import env as env_bench
    from xlabench.cli.bench import scaling as scaling_bench

    parser = OneLineParser(prog="xlabench", description=__doc__)  # its subcommands' parsers too
    subparsers = parser.add_subparsers(dest="command", required=True)
    compilers_cli.register(subparsers)
    graphs_cli.register(subparsers)
    eval_cli.register(subparsers)
    compare_cli.register(subparsers)
    retrain_cli.register(subparsers)
    policies_cli.register(subparsers)
    baselines_cli.register(subparsers)
    interactive_cli.register(subparsers)
    advise_cli.register(subparsers)
    bench = subparsers.add_parser("bench", help="benchmarks that print figures (speed, robustness)")
    bench_subparsers = bench.add_subparsers(dest="benchmark", required=True)
    driver_bench.register(bench_subparsers)
    scaling_bench.register(bench_subparsers)
    env_bench.register(bench_subparsers)
    compilers = subparsers.add_parser("compilers", help="other jaxlib releases side by side: add, list, diff")
    compilers_subparsers = compilers.add_subparsers(dest="compilers_command", required=True)
    compilers_cli.register_compilers(compilers_subparsers)
    compilers_diff_cli.register(compilers_subparsers)
    for command in COMPILING_COMMANDS:
        for leaf in _leaf_parsers(subparsers.choices[command]):
            leaf.add_argument(
                "--compiler",
                metavar="NAME",
                help=f"the compiler to compile with: the installed jaxlib (default; ${COMPILER_VARIABLE}), "
                "or a release or name added with `xlabench compilers add` (`xlabench compilers list`)",
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


def _options_as_one_value(argv: list[str]) -> list[str]:
    """`--xla-flags --xla_a=1` as `--xla-flags=--xla_a=1`: argparse takes a value that starts with
    dashes for an option of its own, and XLA's options all do."""
    joined: list[str] = []
    for word in argv:
        if joined and joined[-1] == "--xla-flags" and word.startswith("--xla_"):
            joined[-1] = f"--xla-flags={word}"
        else:
            joined.append(word)
    return joined


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand; user mistakes become a single `xlabench: error: ...` line and exit 2."""
    parser = build_parser()
    try:
        args = parser.parse_args(_options_as_one_value(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit:  # a parse mistake (one line, 2) or --help (0)
        return int(exit.code or 0)
    try:
        # Resolved once: the environment's settings with the command's options over them, handed to the
        # handler, which passes them to every library function it calls. In effect too, for the length of
        # the command, so that library code called without settings still runs under them.
        settings = from_environment()
        if getattr(args, "compiler", None):
            settings = settings.with_options(compiler=resolve_compiler(args.compiler, settings).name)
        with in_effect(settings):
            return int(args.handler(args, settings) or 0)
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
