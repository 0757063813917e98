"""`xlabench graphs build|list`: regenerate the stored suite, and show what a graph spec resolves to."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from xlabench.cli.arguments import POSITIVE
from xlabench.errors import UserInputError
from xlabench.graphs import build as builder
from xlabench.graphs import graph_sets
from xlabench.graphs.loader import resolve_graphs
from xlabench.graphs.suite_definition import SPLITS, GraphSpec, families, suite
from xlabench.graphs.suite_summary import summary
from xlabench.settings import Settings


def register(subparsers: Any) -> None:
    """Add the `graphs` command with its `build` and `list` subcommands."""
    graphs = subparsers.add_parser("graphs", help="build and list the benchmark HLO graph suite")
    commands = graphs.add_subparsers(dest="graphs_command", required=True)

    build = commands.add_parser("build", help="lower suite graphs to HLO and write them with their manifest")
    build.add_argument(
        "specs", nargs="*", metavar="SPEC", help="graph names, families or splits to rebuild (default: all)"
    )
    build.add_argument(
        "--out",
        type=Path,
        default=graph_sets.DATA_DIR,
        help="output directory (default: the package's stored suite)",
    )
    build.add_argument("--jobs", type=POSITIVE, default=builder.default_jobs(), help="worker processes")
    build.set_defaults(handler=run_build)

    show = commands.add_parser("list", help="list graphs: name, family, split, instruction count")
    show.add_argument(
        "spec",
        nargs="?",
        default="all",
        help="all, a split, a family, a graph name, an .hlo file or a directory (default: all)",
    )
    show.add_argument(
        "--summary", action="store_true", help="counts per family and split, and a size histogram"
    )
    show.add_argument("--json", action="store_true", help="print one JSON value on stdout")
    show.set_defaults(handler=run_list)


def select_specs(selectors: list[str]) -> list[GraphSpec]:
    """Suite entries matching any of `selectors` (names, families, splits, `all`), in suite order."""
    specs = suite()
    if not selectors:
        return specs
    names = {spec.name for spec in specs}
    for selector in selectors:
        if selector not in names and selector not in families() and selector not in (*SPLITS, "all"):
            raise UserInputError(f"unknown graph, family or split {selector!r} for `graphs build`")
    wanted = set(selectors)
    return [s for s in specs if {"all", s.name, s.family, s.split} & wanted]


def run_build(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `xlabench graphs build`."""
    specs = select_specs(args.specs)
    report = builder.build(specs, args.out, jobs=args.jobs, settings=settings)
    print(
        f"built {len(report.built)} graphs into {report.directory} in {report.seconds:.1f} s "
        f"({report.stored_bytes / 2**20:.1f} MiB stored)"
    )
    return 0


def _table(rows: list[list[str]], right_aligned: set[int]) -> str:
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]))]
    lines = []
    for row in rows:
        cells = [
            cell.rjust(widths[i]) if i in right_aligned else cell.ljust(widths[i])
            for i, cell in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines)


def _print_summary(info: dict[str, Any]) -> None:
    splits = sorted(
        {split for counts in info["families"].values() for split in counts},
        key=lambda s: (SPLITS + (s,)).index(s),
    )
    rows = [["family", *splits, "total"]]
    for family, counts in info["families"].items():
        rows.append([family, *(str(counts.get(split, 0)) for split in splits), str(sum(counts.values()))])
    rows.append(["total", *(str(info["splits"].get(split, 0)) for split in splits), str(info["graphs"])])
    print(_table(rows, set(range(1, len(rows[0])))))
    sizes = info["instructions"]
    print(f"\ninstructions per graph: min {sizes['min']}, max {sizes['max']}")
    largest = max(b["count"] for b in info["histogram"]) or 1
    for bin_ in info["histogram"]:
        label = f"{bin_['low']}-{bin_['high'] - 1}" if bin_["high"] is not None else f">={bin_['low']}"
        print(f"{label:>10} {bin_['count']:4d} {'#' * round(40 * bin_['count'] / largest)}")


def run_list(args: argparse.Namespace, settings: Settings) -> int:
    """Handler of `xlabench graphs list`."""
    graphs = resolve_graphs(args.spec)
    if args.summary:
        info = summary(graphs)
        if args.json:
            json.dump(info, sys.stdout, indent=1)
            print()
        else:
            _print_summary(info)
        return 0
    if args.json:
        records = [
            {
                "name": g.name,
                "family": g.family,
                "split": g.split,
                "instruction_count": g.instruction_count,
                "sha256": g.sha256,
                "path": str(g.path),
                "config": g.config,
            }
            for g in graphs
        ]
        json.dump(records, sys.stdout, indent=1)
        print()
        return 0
    rows = [["name", "family", "split", "instructions"]]
    rows += [[g.name, g.family, g.split, str(g.instruction_count)] for g in graphs]
    print(_table(rows, {3}))
    return 0
