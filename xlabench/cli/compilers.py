"""`xlabench passes`, `xlabench stats`, `xlabench apply`: the pass driver from the command line."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from xlabench.cli.arguments import NON_NEGATIVE
from xlabench.errors import UserInputError
from xlabench.graphs.loader import load_module
from xlabench.settings import Settings
from xlabench.xla.compilers.named_compilers import (
    add_compiler,
    add_python_compiler,
    add_variant_compiler,
    add_wheel_compiler,
    broken_compilers,
    compiler_build,
    installed_compiler,
    managed_compilers,
    remove_compiler,
)
from xlabench.xla.compilers.pass_catalogue import ACTION_SETS, load_catalogue
from xlabench.xla.driver.execution import judge_sequence
from xlabench.xla.driver.module_stats import module_stats
from xlabench.xla.driver.pass_driver import default_driver
from xlabench.xla.shared.releases import supported_range


def register(subparsers: Any) -> None:
    """Add the driver's subcommands to the top-level parser."""
    passes = subparsers.add_parser("passes", help="list the XLA CPU pipeline's passes and classes")
    passes.add_argument("--json", action="store_true", help="print one JSON object")
    passes.add_argument("--refresh", action="store_true", help="rediscover instead of using the cache")
    passes.set_defaults(handler=run_passes)

    stats = subparsers.add_parser("stats", help="op count, histogram and cost of one HLO module")
    stats.add_argument("graph", help="an .hlo file (HLO text) or the name of a suite graph")
    stats.add_argument("--json", action="store_true", help="print one JSON object")
    stats.set_defaults(handler=run_stats)

    apply = subparsers.add_parser("apply", help="apply XLA passes one at a time to an HLO module")
    apply.add_argument("graph", help="an .hlo file (HLO text) or the name of a suite graph")
    apply.add_argument("passes", nargs="+", metavar="PASS", help="pass names, applied in order")
    apply.add_argument("-o", "--output", required=True, help="where to write the resulting module")
    apply.add_argument("--json", action="store_true", help="print one JSON object")
    apply.add_argument(
        "--check-outputs",
        action="store_true",
        help="run the result and XLA's default executable of the input on random inputs; exit 1 if "
        "an output differs (low precision: is less accurate against the module lifted to f32); replays "
        "a reproducer of the pytest plugin's semantics check",
    )
    apply.add_argument(
        "--input-seed", type=NON_NEGATIVE, default=0, help="--check-outputs: the inputs' seed (0)"
    )
    apply.add_argument(
        "--signed-inputs",
        action="store_true",
        help="--check-outputs: normal inputs (default: their absolute values)",
    )
    apply.set_defaults(handler=run_apply)


def register_compilers(subparsers: Any) -> None:
    """Add `compilers add|list|remove` to the `compilers` group's parser."""
    add = subparsers.add_parser(
        "add",
        help="add a compiler by name: a jaxlib release, a local jaxlib wheel, an interpreter, or a "
        "variant with XLA options",
        description="One of: VERSION (a published release; its name is the version); --wheel PATH "
        "--name NAME (a venv from a jaxlib wheel, e.g. your own build); --python PATH --name NAME (an "
        "interpreter whose jaxlib is used as it is); --base NAME --xla-flags OPTIONS --name NAME (another "
        "compiler with XLA options passed to every compile).",
    )
    add.add_argument("version", nargs="?", help=f"a jaxlib release ({supported_range()})")
    add.add_argument("--wheel", metavar="PATH", help="a jaxlib wheel file (.whl)")
    add.add_argument("--jax", metavar="VERSION", help="--wheel: the jax release to install with it")
    add.add_argument("--jax-wheel", metavar="PATH", help="--wheel: a jax wheel to install with it")
    add.add_argument("--python", metavar="PATH", help="an interpreter with jax and jaxlib installed")
    add.add_argument("--base", metavar="NAME", help="the compiler a variant runs (with --xla-flags)")
    add.add_argument(
        "--xla-flags",
        metavar="OPTIONS",
        help='XLA options of a variant, as XLA_FLAGS holds them ("--xla_a=1 --xla_b=false")',
    )
    add.add_argument("--name", help="the new compiler's name (every kind but a release)")
    add.set_defaults(handler=run_compilers_add)
    listing = subparsers.add_parser("list", help="the installed compiler and the added ones")
    listing.add_argument("--json", action="store_true", help="print one JSON object")
    listing.set_defaults(handler=run_compilers_list)
    remove = subparsers.add_parser("remove", help="delete an added compiler")
    remove.add_argument("name")
    remove.set_defaults(handler=run_compilers_remove)


def run_compilers_add(args: argparse.Namespace, settings: Settings) -> int:
    """Add one compiler of the kind the options name, showing progress on stderr."""

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    kinds = {
        "VERSION": args.version,
        "--wheel": args.wheel,
        "--python": args.python,
        "--base": args.base,
    }
    given = [option for option, value in kinds.items() if value is not None]
    if len(given) != 1:
        raise UserInputError(
            "compilers add: give one of VERSION, --wheel PATH, --python PATH or --base NAME"
            + (f" (got {' and '.join(given)})" if given else "")
        )
    if (args.jax or args.jax_wheel) and args.wheel is None:
        raise UserInputError("--jax and --jax-wheel go with --wheel")
    if (args.xla_flags is None) != (args.base is None):
        raise UserInputError("--base and --xla-flags go together: a variant is a base and its options")
    if args.version is not None:
        if args.name is not None and args.name != args.version:
            raise UserInputError(f"a release's name is its version: drop --name {args.name}")
        add_compiler(args.version, progress=progress, settings=settings)
        return 0
    if args.name is None:
        raise UserInputError(f"compilers add {given[0]}: name it (--name NAME)")
    if args.wheel is not None:
        add_wheel_compiler(
            args.wheel, args.name, args.jax, args.jax_wheel, progress=progress, settings=settings
        )
    elif args.python is not None:
        add_python_compiler(args.python, args.name, progress=progress, settings=settings)
    else:
        add_variant_compiler(args.base, args.xla_flags, args.name, progress=progress, settings=settings)
    return 0


def run_compilers_list(args: argparse.Namespace, settings: Settings) -> int:
    """List the compilers this install can run: name, kind, jaxlib, options, build digest."""
    installed = installed_compiler()
    compilers = ([installed] if installed is not None else []) + managed_compilers(settings)
    broken = broken_compilers(settings)
    if args.json:
        rows = [
            {
                "name": c.name,
                "kind": c.kind,
                "jaxlib": c.version,
                "version": c.version,
                "managed": c.managed,
                "python": c.python,
                "xla_flags": list(c.xla_flags),
                "base": c.base,
                "build": compiler_build(c),
            }
            for c in compilers
        ]
        problems = [{"name": name, "problem": why} for name, why in broken]
        print(json.dumps({"compilers": rows, "broken": problems, "supported": supported_range()}))
        return 0
    width = max([len("name")] + [len(c.name) for c in compilers] + [len(name) for name, _ in broken])
    print(f"{'name':{width}} {'kind':9} {'jaxlib':20} {'build':38} options / interpreter")
    for compiler in compilers:
        where = " ".join(compiler.xla_flags) or (
            "this environment (the default)" if not compiler.managed else compiler.python
        )
        if compiler.base:
            where = f"{compiler.base} + {where}"
        print(
            f"{compiler.name:{width}} {compiler.kind:9} {compiler.version:20} "
            f"{compiler_build(compiler):38} {where}"
        )
    for name, why in broken:
        print(f"{name:{width}} BROKEN    {why}")
    print(
        f"supported: {supported_range()} and builds with their API; add one with `xlabench compilers add "
        "VERSION` (or --wheel, --python, --base; see --help)"
    )
    return 0


def run_compilers_remove(args: argparse.Namespace, settings: Settings) -> int:
    """Delete one managed compiler."""
    print(f"removed {remove_compiler(args.name, settings)}")
    return 0


def run_passes(args: argparse.Namespace, settings: Settings) -> int:
    """Print the pass catalogue."""

    catalogue = load_catalogue(refresh=args.refresh, settings=settings)
    action_sets = {name: catalogue.action_passes(name) for name in ACTION_SETS}
    if args.json:
        print(json.dumps({**catalogue.to_dict(), "action_sets": action_sets}))
        return 0
    print(f"XLA CPU pipeline of jaxlib {catalogue.jaxlib_version}")
    print(f"{'pass':42} {'class':14} {'runs':>4}  pipeline / note")
    for info in sorted(catalogue.passes.values(), key=lambda info: info.position):
        if info.kind == "pipeline":
            continue
        where = " > ".join(info.ancestors) or "-"
        note = f"  [{info.description}]" if info.description else ""
        print(f"{info.name:42} {info.kind:14} {info.runs:>4}  {where}{note}")
    kinds = [info.kind for info in catalogue.passes.values()]
    print(
        f"{kinds.count('simplification')} simplification, {kinds.count('orderable')} orderable, "
        f"{kinds.count('excluded')} excluded, {kinds.count('required')} required passes; "
        f"{kinds.count('pipeline')} pipelines"
    )
    print("action sets: " + ", ".join(f"{name} ({len(passes)})" for name, passes in action_sets.items()))
    return 0


def run_stats(args: argparse.Namespace, settings: Settings) -> int:
    """Print what xlabench measures of one module."""
    driver = default_driver(settings)
    stats = module_stats(load_module(args.graph, driver), driver)
    if args.json:
        print(json.dumps(stats.to_json()))
        return 0
    features = stats.features
    print(f"{stats.source}: module {stats.name}, fingerprint {stats.fingerprint[:16]}")
    print(f"  op count            {features.op_count}")
    print(f"  default pipeline    {stats.default_op_count} ops (counted before layout assignment)")
    print(f"  full compile        {stats.full_compile_seconds:.3f} s")
    cost = features.cost
    print(
        f"  cost                {cost.flops:.4g} flops, {cost.transcendentals:.4g} transcendentals, "
        f"{cost.bytes_accessed:.4g} bytes accessed"
    )
    top = sorted(features.histogram.items(), key=lambda item: (-item[1], item[0]))
    print("  opcodes             " + ", ".join(f"{opcode} {count}" for opcode, count in top))
    return 0


def run_apply(args: argparse.Namespace, settings: Settings) -> int:
    """Apply passes in order, report each step, write the result atomically."""
    driver = default_driver(settings)
    output = args.output
    if os.path.isdir(output):
        raise UserInputError(f"{output}: is a directory, expected an output file path")
    for pass_name in args.passes:
        driver.check_pass(pass_name)
    module = load_module(args.graph, driver)
    applied = driver.apply_passes(module, args.passes)  # stops at the first pass that fails
    failure = applied[-1].error if applied else None
    current = next((step.module for step in reversed(applied) if step.module is not None), module)
    steps: list[dict[str, Any]] = [
        {
            "pass": step.pass_name,
            "op_count": step.module.op_count if step.module is not None else None,
            "seconds": step.seconds,
            "error": step.error.to_dict() if step.error is not None else None,
        }
        for step in applied
    ]
    if not args.json:
        for step in applied:
            result = f"{step.module.op_count} ops" if step.error is None else f"FAILED: {step.error}"
            print(f"{step.pass_name:40} {result:>12}  {step.seconds:.3f} s")
    if failure is None:
        current.write(output)
    if args.json:
        print(
            json.dumps(
                {
                    "graph": module.source,
                    "op_count": module.op_count,
                    "steps": steps,
                    "output": output if failure is None else None,
                }
            )
        )
    elif failure is None:
        print(f"{module.op_count} -> {current.op_count} ops; wrote {output}")
    if failure is not None:
        print(f"xlabench: error: {failure}; nothing written to {output}", file=sys.stderr)
        return 1
    if args.check_outputs:
        verdict, _ = judge_sequence(
            module, current, args.passes, args.input_seed, driver, non_negative=not args.signed_inputs
        )
        problems = verdict.problems
        if verdict.outside_domain:
            headline = (
                "outputs: not compared: on these inputs the program itself (XLA's simplifications off) "
                "computes NaN or inf where XLA's default does not"
            )
        elif verdict.errors:  # low precision: judged against the module lifted to f32
            headline = (
                "outputs LESS ACCURATE than XLA's default executable against the module lifted to f32: "
                if problems
                else "outputs: every buffer as accurate as XLA's default's against the module lifted to f32"
            )
        else:
            headline = (
                "outputs DIFFER from XLA's default executable: "
                if problems
                else "outputs: every buffer matches XLA's default executable"
            )
        print(
            "\n".join(
                [headline + "; ".join(problems), *(f"  {error.describe()}" for error in verdict.errors)]
            ),
            file=sys.stderr if args.json else sys.stdout,
        )
        return 1 if problems else 0
    return 0
