"""What a compiler worker does with XLA; runs only inside isolated worker processes.

jaxlib's internals are reached through `xlabench.xla.adapter` (the one module a jaxlib release
should have to change); everything read of a module is read from its printed text. Nothing here
is imported by the parent process: the pool (`xlabench.xla.pool`) calls these functions by name in
a worker, so a CHECK abort or a hang kills a worker, never the caller.

How one pass is applied (no per-pass Python API exists in jaxlib): the module is compiled with
`xla_disable_hlo_passes` naming every pass and pipeline except the requested pass, the pipelines
that contain it, and `copy-insertion`; XLA's dumps (`xla_dump_hlo_pass_re`, narrowed to the pass's
pipeline and to what runs right after it) give the module after every run of the pass. A stop
marker added to the entry computation -- two `call`s of one computation -- leaves the call graph
unflattened, so `copy-insertion` fails at once with
FAILED_PRECONDITION and the compile ends right after the pass instead of going on to LLVM. The
marker's side-effecting custom call to an unregistered target is the second stop: should a pass
flatten the call graph, the compile still fails before any code generation.

Single-pass and counting-point compiles dump text (large constants in, metadata out), which XLA
writes in half the time of a proto: a pass in a fixed-point pipeline runs again and again in memory
after the run xlabench keeps (reshape-mover to the 25-iteration limit), and every run is dumped.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import glob
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from xlabench.xla import adapter, executable_cache, payloads
from xlabench.xla.pool import CompilerFailure
from xlabench.xla.releases import UnsupportedCompiler
from xlabench.xla.structure import (
    COMPUTATION_HEADER,
    INSTRUCTION,
    callees,
    donated_parameters,
    normalized_text_and_fingerprint,
    split_computations,
    structural_fingerprint,
)

STOP_MARKER = "xlabench_stop"
_STOP_COMPUTATION = (
    f"%{STOP_MARKER}_body () -> () {{\n"
    f'  %{STOP_MARKER}_effect = () custom-call(), custom_call_target="{STOP_MARKER}", '
    "custom_call_has_side_effect=true\n"
    f"  ROOT %{STOP_MARKER}_tuple = () tuple()\n"
    "}\n\n"
)
_STOP_CALLS = (
    f"  %{STOP_MARKER}_call_a = () call(), to_apply=%{STOP_MARKER}_body\n"
    f"  %{STOP_MARKER}_call_b = () call(), to_apply=%{STOP_MARKER}_body\n"
)
# Errors that mean "the stop marker did its job", not "the pass failed".
_EXPECTED_STOPS = (
    "Call graph must be flattened before copy insertion",
    f"custom call to {STOP_MARKER}",
)


def jaxlib_version() -> str:
    """Return the version of the jaxlib that provides the compiler."""
    return adapter.jaxlib_version()


def parse(text: str) -> Any:
    """Parse HLO text into an XLA HloModule; malformed text raises CompilerFailure.

    Constants named by payload digest (`xlabench.xla.payloads`) get their values back: the elided
    text is parsed, then each literal is patched into the module's proto.
    """
    named: dict[str, str] = {}
    if payloads.has_payloads(text):
        text, named = payloads.without_markers(text)
    try:
        module = adapter.parse_module(text)
    except UnsupportedCompiler:
        raise
    except Exception as error:  # jaxlib raises its own runtime error type
        raise CompilerFailure(_parse_error_summary(str(error))) from None
    if not named:
        return module
    try:
        literals = {name: payloads.load(digest) for name, digest in named.items()}
    except payloads.MissingPayload as error:
        raise CompilerFailure(str(error)) from None
    proto = payloads.patch_literals(module.as_serialized_hlo_module_proto(), literals)
    return adapter.module_from_proto(proto)


def _parse_error_summary(message: str) -> str:
    """XLA's parse error as one line: "HLO syntax error at line:column: what"."""
    match = re.search(r"was parsing (\d+):(\d+): error: (.*)", message)
    if match:
        return f"HLO syntax error at line {match.group(1)}, column {match.group(2)}: {match.group(3)}"
    lines = message.strip().splitlines()
    return lines[0] if lines else "HLO parse error"


def to_text(module: Any) -> str:
    """Print a parsed module as canonical xlabench text (no metadata, full constants; constants of
    `payloads.PAYLOAD_MIN_BYTES` or more in all are named by payload digest instead)."""
    elided = adapter.module_text(module, adapter.print_options(large_constants=False))
    if "constant({...})" not in elided:
        return elided  # nothing was elided: the full print is this very text
    if payloads.elided_bytes(elided) < payloads.PAYLOAD_MIN_BYTES:
        return adapter.module_text(module, adapter.print_options())
    names = payloads.elided_names(elided)
    return payloads.with_markers(elided, payloads.literals(module.as_serialized_hlo_module_proto(), names))


def full_text(text: str) -> str:
    """Module text with every constant in full, payloads included: what a user's tools read."""
    return adapter.module_text(parse(text), adapter.print_options())


def entry_computation_name(text: str) -> str:
    """Return the name of the ENTRY computation of module text."""
    match = re.search(r"^ENTRY %?([\w.\-]+)", text, re.MULTILINE)
    if match is None:
        raise CompilerFailure("module has no ENTRY computation")
    return match.group(1)


def add_stop_marker(text: str) -> str:
    """Insert the stop marker: a computation before ENTRY and two calls before the entry ROOT."""
    lines = text.splitlines(keepends=True)
    entry = next((i for i, line in enumerate(lines) if line.startswith("ENTRY")), None)
    if entry is None:
        raise CompilerFailure("module has no ENTRY computation")
    root = next((i for i in range(entry, len(lines)) if lines[i].lstrip().startswith("ROOT")), None)
    if root is None:
        raise CompilerFailure("ENTRY computation has no ROOT instruction")
    lines[root:root] = [_STOP_CALLS]
    lines[entry:entry] = [_STOP_COMPUTATION]
    return "".join(lines)


def strip_stop_marker(text: str) -> str:
    """Remove every trace of the stop marker from module text printed by XLA."""
    kept: list[str] = []
    in_marker_computation = False
    for line in text.splitlines(keepends=True):
        if line.startswith(f"%{STOP_MARKER}_body") or line.startswith(f"{STOP_MARKER}_body"):
            in_marker_computation = True
            continue
        if in_marker_computation:
            if line.startswith("}"):
                in_marker_computation = False
            continue
        if STOP_MARKER in line:
            continue
        kept.append(line)
    return "".join(kept)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _scratch_dir() -> str:
    """A fresh dump directory inside the one the parent gave this worker (it removes that one)."""
    return tempfile.mkdtemp(prefix="dump-", dir=os.environ.get("XLABENCH_SCRATCH_DIR"))


def _compile(text: str, overrides: dict[str, Any]) -> Any:
    """Compile module text with DebugOptions overrides; return the executable or raise."""
    stablehlo = adapter.to_stablehlo(parse(text))
    try:
        return adapter.compile_stablehlo(stablehlo, overrides)
    except UnsupportedCompiler:
        raise
    except Exception as error:
        raise CompilerFailure(_first_line(error)) from None


@contextlib.contextmanager
def _dumps_until_stop(
    text: str, overrides: dict[str, Any], dump_regex: str, as_text: bool = False
) -> Iterator[dict[str, str]]:
    """Compile with the stop marker and dumps on; yield {dump file suffix: path of its dump}.

    A dump is an HloProto, or with `as_text` XLA's text of the module (every constant in full,
    no metadata). The suffix is what follows the module prefix, e.g.
    "0003.simplification.after_algsimp.before_dce". The files are removed when the context ends.
    """
    dump_dir = _scratch_dir()
    if as_text and payloads.has_payloads(text):
        as_text = False  # large constants: a proto dump moves their bytes, text would print every one
    try:
        settings = dict(overrides)
        settings.update(
            {
                "xla_dump_to": dump_dir,
                "xla_dump_hlo_pass_re": dump_regex,
                "xla_dump_hlo_as_proto": not as_text,
                "xla_dump_hlo_as_text": as_text,
            }
        )
        if as_text:
            settings.update({"xla_dump_large_constants": True, "xla_dump_disable_metadata": True})
        try:
            _compile(add_stop_marker(text), settings)
        except CompilerFailure as failure:
            if not any(stop in str(failure) for stop in _EXPECTED_STOPS):
                raise
        else:
            raise CompilerFailure("compile was not stopped by the stop marker")
        dumps: dict[str, str] = {}
        for path in glob.glob(os.path.join(dump_dir, "*.txt" if as_text else "*.pb")):
            # module_0001.jit_f.0003.pipeline.after_x.before_y.hlo.pb -> 0003.pipeline.after_x.before_y
            stem = os.path.basename(path).removesuffix(".txt").removesuffix(".pb").removesuffix(".hlo")
            # The module name may itself hold dots: cut at the first field that is a step number.
            match = re.search(r"\.(\d{4}\..*|before_optimizations)$", stem)
            dumps[match.group(1) if match else stem] = path
        yield dumps
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def _dump_text(path: str) -> str:
    """A dump's module as xlabench text: a text dump as written, a proto dump printed (payloads named)."""
    if path.endswith(".pb"):
        return to_text(adapter.module_from_proto(_hlo_module_field(_read_bytes(path))))
    return _read_bytes(path).decode()


def pipeline_changes(text: str, point_pass: str, disabled_passes: list[str] | None = None) -> dict[str, Any]:
    """Run the whole default CPU pipeline once, up to `point_pass`; list the passes that changed the module.

    Every pass is dumped; a run whose module differs from the one before it changed something.
    The answer is {"changes": [[pipeline, pass], ...]} in the order XLA ran them (a pass in a
    fixed-point pipeline once per round in which it changed the module): XLA's own order, with
    its no-ops left out, from one compile instead of one compile per pass.
    """
    started = time.perf_counter()
    changes: list[list[str]] = []
    overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)} if disabled_passes else {}
    with _dumps_until_stop(text, overrides, dump_regex=".*") as dumps:
        previous = _hlo_module_field(_read_bytes(dumps["before_optimizations"]))
        for suffix in sorted((s for s in dumps if s[:4].isdigit()), key=_dump_step):
            pipeline, _, passes = suffix[5:].partition(".after_")
            pass_name = passes.split(".before_", 1)[0]
            if pass_name == point_pass:
                break
            current = _hlo_module_field(_read_bytes(dumps[suffix]))
            if current != previous and pass_name != "pipeline-start":
                changes.append([pipeline, pass_name])  # the pipeline as dumped: spaces are underscores
            previous = current
        else:
            raise CompilerFailure(f"pipeline did not reach {point_pass}")
    return {"changes": changes, "seconds": time.perf_counter() - started}


def pipeline_fingerprints(
    text: str, point_pass: str, disabled_passes: list[str] | None = None
) -> dict[str, Any]:
    """Run the CPU pipeline once up to `point_pass`; the module's fingerprint after every pass run.

    The answer: "start", the fingerprint of the module XLA started from, and "runs", [pipeline,
    round, pass, k, fingerprint after] for every run (the k-th run of that pass in that round of
    that pipeline: a fixed-point pipeline runs its passes once a round), no-ops included, in the
    order XLA ran them. XLA dumps every run when the dump regex is not literally
    ".*" (with ".*" it dumps only the runs that changed the module), so the regex here is ".+".
    Fingerprints are structural (names and order do not count), so two releases that run the same
    passes to the same effect give the same runs: where they part is the pass that made a
    difference (`xlabench.xla.attribution`).
    """
    started = time.perf_counter()
    overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)} if disabled_passes else {}
    runs: list[list[Any]] = []
    rounds: collections.Counter[str] = collections.Counter()
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    with _dumps_until_stop(text, overrides, dump_regex=".+", as_text=True) as dumps:
        previous_text = _dump_text(dumps["before_optimizations"])
        start = previous = structural_fingerprint(strip_stop_marker(previous_text))
        for suffix in sorted((s for s in dumps if s[:4].isdigit()), key=_dump_step):
            pipeline, _, passes = suffix[5:].partition(".after_")
            pass_name = passes.split(".before_", 1)[0]
            if pass_name == point_pass:
                break
            if pass_name == "pipeline-start":  # a pipeline begins (again: the next round of its loop)
                rounds[pipeline] += 1
                for key in [key for key in seen if key[0] == pipeline]:
                    del seen[key]
                continue
            current_text = _dump_text(dumps[suffix])
            if current_text != previous_text:  # an unchanged text keeps its fingerprint
                previous_text = current_text
                previous = structural_fingerprint(strip_stop_marker(current_text))
            seen[pipeline, pass_name] += 1
            runs.append([pipeline, rounds[pipeline], pass_name, seen[pipeline, pass_name], previous])
        else:
            raise CompilerFailure(f"pipeline did not reach {point_pass}")
    return {"start": start, "runs": runs, "seconds": time.perf_counter() - started}


def pipeline_states(text: str, point_pass: str) -> dict[str, Any]:
    """Run the CPU pipeline once up to `point_pass`; XLA's module after every run that changed it, in
    xlabench's canonical form: [pipeline, pass, fingerprint, op count] in the order XLA ran them.

    Canonical fingerprints are those of `HloModule`s, so a replay's states can be matched against
    XLA's (`xlabench.xla.replay.trace_replay`). With ".*" XLA dumps only the runs that changed its module.
    """
    started = time.perf_counter()
    states: list[list[Any]] = []
    with _dumps_until_stop(text, {}, dump_regex=".*", as_text=True) as dumps:
        previous_text = _dump_text(dumps["before_optimizations"])
        for suffix in sorted((s for s in dumps if s[:4].isdigit()), key=_dump_step):
            pipeline, _, passes = suffix[5:].partition(".after_")
            pass_name = passes.split(".before_", 1)[0]
            if pass_name == point_pass:
                break
            current_text = _dump_text(dumps[suffix])
            if pass_name == "pipeline-start" or current_text == previous_text:
                continue
            previous_text = current_text
            described = describe(strip_stop_marker(current_text))
            states.append([pipeline, pass_name, described["fingerprint"], described["features"]["op_count"]])
        else:
            raise CompilerFailure(f"pipeline did not reach {point_pass}")
    return {"states": states, "seconds": time.perf_counter() - started}


def _hlo_module_field(hlo_proto: bytes) -> bytes:
    """Extract field 1 (`hlo_module`) of a serialized xla.HloProto, the format of .hlo.pb dumps."""
    try:
        for field, wire_type, _, value, end in payloads.message_fields(hlo_proto):
            if field == 1 and wire_type == 2:
                return hlo_proto[value:end]
    except ValueError:
        pass  # a wire type no HloProto field has: not a dump
    raise CompilerFailure("dump file holds no HloModuleProto")


def _dump_step(suffix: str) -> int:
    return int(suffix.split(".", 1)[0]) if suffix[:4].isdigit() else -1


def canonical_module(module: Any) -> Any:
    """The module as every compile sees it: exported to StableHLO and imported back.

    Each compile starts with this round trip, and it is not neutral after some passes (it splits
    constants that CSE merged, one per use), so xlabench keeps modules in this form: the state a
    pass's output is counted in is the state the next pass starts from.
    """
    return adapter.from_stablehlo(adapter.to_stablehlo(module))


def describe(text: str) -> dict[str, Any]:
    """Return name, canonical text, fingerprint and `features` of module text (canonicalizing it first)."""
    try:
        module = canonical_module(parse(text))
    except (CompilerFailure, UnsupportedCompiler):
        raise  # a bad module is said as such, and so is a jaxlib the adapter does not fit
    except Exception as error:
        raise CompilerFailure(f"XLA cannot import the module: {_first_line(error)}") from None
    printed = to_text(module)
    canonical, fingerprint = normalized_text_and_fingerprint(printed)
    # Features from the canonical module in hand: the next thing every caller asks for.
    return {
        "name": adapter.module_name(module),
        "text": canonical,
        "fingerprint": fingerprint,
        "features": _module_features(module, printed),
    }


def run_pass(
    text: str,
    pass_name: str,
    disabled_passes: list[str],
    pipeline: str | None = None,
    occurrence: int = 1,
    successors: list[str] | None = None,
) -> dict[str, Any]:
    """Run one pass: every name in `disabled_passes` is off; return the module after one run.

    The run returned is the `occurrence`-th run of the pass inside `pipeline` (the first run
    anywhere when `pipeline` is None): XLA may add one pass several times with different options.
    When XLA's module is byte for byte the same before and after the pass, the answer is
    {"unchanged": True}: the input stands as it is (and canonicalizing it again is skipped).
    "read_from" says which dumps gave the module: "successors" or, failing them, "pass".

    `successors` (`PassCatalogue.successors`) name what runs right after the pass in `pipeline`:
    only the dumps "before" them in that pipeline are written, one a run. Dumping the pass itself
    also writes the dump before each of its runs, and a pass in a fixed-point pipeline runs again
    and again in memory after the run kept (reshape-mover to the 25-round limit): half the files.
    """
    started = time.perf_counter()
    overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)}
    dumped, read_from = None, "successors"
    if successors and pipeline is not None:
        narrow = {**overrides, "xla_dump_hlo_pipeline_re": f"^{re.escape(pipeline)}$"}
        regex = "^(" + "|".join(re.escape(name) for name in successors) + ")$"
        dumped = _run_dumped(text, narrow, regex, pass_name, pipeline, occurrence, successors)
    if dumped is None:  # no successors given, or not what followed the pass: dump the pass itself
        read_from = "pass"
        dumped = _run_dumped(text, overrides, f"^{re.escape(pass_name)}$", pass_name, pipeline, occurrence)
    if dumped is None:
        where = f" in pipeline {pipeline}" if pipeline is not None else ""
        raise CompilerFailure(f"pass {pass_name} did not run{where} (is it in this jaxlib's CPU pipeline?)")
    given, chosen = dumped
    # Every other pass is off, so the module XLA started from is the one the pass was given.
    if given == chosen:
        return {"unchanged": True, "seconds": time.perf_counter() - started, "read_from": read_from}
    result = describe(strip_stop_marker(chosen))
    result.update(seconds=time.perf_counter() - started, read_from=read_from)
    return result


def _run_dumped(
    text: str,
    overrides: dict[str, Any],
    regex: str,
    pass_name: str,
    pipeline: str | None,
    occurrence: int,
    successors: list[str] | None = None,
) -> tuple[str | None, str] | None:
    """Compile with dumps; (the module XLA started from, the module after the chosen run) or None.

    From proto dumps the module XLA started from is not printed: ("", "") when the two are equal,
    (None, the module after) when not.

    With `successors`, None also when the pass's dumps are not followed by every one of them: what
    XLA runs after the pass is then not what the catalogue says, and the chosen run could be another.
    """
    with _dumps_until_stop(text, overrides, regex, as_text=True) as dumps:
        after = sorted((s for s in dumps if f".after_{pass_name}." in s), key=_dump_step)
        if pipeline is not None:
            # Dump names spell the running pipeline with underscores: "0003.simplification.after_dce...".
            dumped_name = pipeline.replace(" ", "_")
            after = [s for s in after if s.split(".", 2)[1] == dumped_name]
        followed = {s.rsplit(".before_", 1)[-1] for s in after}  # spaces spelled as underscores
        expected = {name.replace(" ", "_") for name in successors or ()}
        if len(after) < occurrence or not followed.issuperset(expected):
            return None
        given, chosen = dumps.get("before_optimizations"), dumps[after[occurrence - 1]]
        if given is not None and chosen.endswith(".pb"):
            # Proto dumps (large constants): equal modules need not be printed to be compared.
            before, after_pass = (_hlo_module_field(_read_bytes(path)) for path in (given, chosen))
            return ("", "") if before == after_pass else (None, _dump_text(chosen))
        return (_dump_text(given) if given is not None else None, _dump_text(chosen))


def run_pipeline_to_point(
    text: str,
    disabled_passes: list[str],
    point_pass: str,
    sibling_passes: list[str],
    point_pipeline: str | None = None,
) -> dict[str, Any]:
    """Run the CPU pipeline (minus `disabled_passes`) and return the module just before `point_pass`.

    With `point_pipeline` (the pipeline holding `point_pass`) only that pipeline's dump "before
    `point_pass`" is written: a dump names the pass before and the pass after it. Without it,
    `sibling_passes` (the passes of that pipeline) are each dumped, and the last dump before
    `point_pass` first runs is the module at that point.
    """
    started = time.perf_counter()
    module_text = None
    overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)} if disabled_passes else {}
    if point_pipeline is not None:
        narrow = {**overrides, "xla_dump_hlo_pipeline_re": f"^{re.escape(point_pipeline)}$"}
        with _dumps_until_stop(text, narrow, f"^{re.escape(point_pass)}$", as_text=True) as dumps:
            before = sorted((s for s in dumps if s.endswith(f".before_{point_pass}")), key=_dump_step)
            if before:
                module_text = _dump_text(dumps[before[0]])
    if module_text is None:
        names = sorted({*sibling_passes, point_pass, "pipeline-start"})
        regex = "^(" + "|".join(re.escape(name) for name in names) + ")$"
        with _dumps_until_stop(text, overrides, regex, as_text=True) as dumps:
            ordered = sorted((s for s in dumps if s != "before_optimizations"), key=_dump_step)
            point = next((i for i, s in enumerate(ordered) if f".after_{point_pass}." in s), None)
            if point is None or point == 0:
                raise CompilerFailure(f"pipeline did not reach {point_pass}")
            module_text = _dump_text(dumps[ordered[point - 1]])
    result = describe(strip_stop_marker(module_text))
    result["seconds"] = time.perf_counter() - started
    return result


def features(text: str) -> dict[str, Any]:
    """Opcode and element-type histograms over reachable computations, op count, cost analysis."""
    return _module_features(parse(text))


def _module_features(module: Any, printed: str | None = None) -> dict[str, Any]:
    histogram, computations, element_types = _reachable_histograms(printed or to_text(module))
    op_count = sum(count for opcode, count in histogram.items() if opcode != "parameter")
    return {
        "op_count": op_count,
        "histogram": histogram,
        "computations": computations,
        "cost": cost_analysis(module),
        "element_types": element_types,
    }


# XLA's text spells these opcodes otherwise than its HloOpcode enum (hlo_opcode.h); the features'
# vocabulary uses the enum's spelling (kExp -> exp), as xlabench read it before it read the text.
_ENUM_SPELLING = {
    "count-leading-zeros": "clz", "cosine": "cos", "exponential": "exp", "exponential-minus-one": "expm1",
    "log-plus-one": "log1p", "opt-barrier": "optimization-barrier", "popcnt": "population-count",
    "sine": "sin", "topk": "top-k",
}  # fmt: skip
_OPCODE = re.compile(r"([a-z][a-z0-9\-]*)\(")


def instruction_opcode(right_hand_side: str) -> str:
    """The opcode of an instruction from the text after its `=`: `f32[2]{0} add(...)` -> add."""
    text = right_hand_side.lstrip()
    if text.startswith("("):  # a tuple shape: skip to its closing parenthesis
        depth = 0
        for index, character in enumerate(text):
            depth += character == "("
            depth -= character == ")"
            if depth == 0:
                text = text[index + 1 :]
                break
    else:
        text = text.split(" ", 1)[1] if " " in text else ""
    match = _OPCODE.match(text.lstrip())
    if match is None:
        raise CompilerFailure(f"cannot read the opcode of instruction: {right_hand_side[:80]}")
    return _ENUM_SPELLING.get(match.group(1), match.group(1))


def _entry_instructions(printed: str) -> tuple[str, dict[str, list[tuple[str, str]]]]:
    """The entry's name and {computation: [(instruction name, text after `=`)]} of printed module text."""
    parts = split_computations(printed)
    if parts is None:
        raise CompilerFailure("module text has no computations")
    entry, computations = None, {}
    for block in parts[1]:
        header = COMPUTATION_HEADER.match(block[0])
        if header.group(1):
            entry = header.group(2)
        computations[header.group(2)] = [
            (match.group(2), match.group(3)) for match in map(INSTRUCTION.match, block[1:]) if match
        ]
    if entry is None:
        raise CompilerFailure("module has no ENTRY computation")
    return entry, computations


def _reachable_histograms(printed: str) -> tuple[dict[str, int], int, dict[str, int]]:
    """Opcode counts, reachable computations and result element-type counts, from ENTRY."""
    entry, computations = _entry_instructions(printed)
    histogram: collections.Counter[str] = collections.Counter()
    element_types: collections.Counter[str] = collections.Counter()
    reachable, frontier = {entry}, [entry]
    while frontier:
        for _, right_hand_side in computations.get(frontier.pop(), []):
            histogram[instruction_opcode(right_hand_side)] += 1
            element_types[_result_element_type(right_hand_side)] += 1
            for callee in callees(right_hand_side):
                if callee not in reachable:
                    reachable.add(callee)
                    frontier.append(callee)
    return dict(sorted(histogram.items())), len(reachable), dict(sorted(element_types.items()))


def _result_element_type(right_hand_side: str) -> str:
    """`bf16[2,3]{1,0} add(...)` -> bf16; a tuple-shaped result -> tuple."""
    shape = right_hand_side.lstrip()
    if shape.startswith("("):
        return "tuple"
    match = re.match(r"[a-z][a-z0-9]*", shape)
    return match.group(0) if match else "other"


def cost_analysis(module: Any) -> dict[str, float]:
    """XLA's HloCostAnalysis totals: flops, transcendentals, bytes accessed."""
    raw = adapter.cost_analysis(module)
    return {
        "flops": float(raw.get("flops", 0.0)),
        "transcendentals": float(raw.get("transcendentals", 0.0)),
        "bytes_accessed": float(raw.get("bytes accessed", 0.0)),
    }


def stopped_compile_seconds(text: str, disabled_passes: list[str]) -> float:
    """Wall time of the least compile a step makes: parse, export, every pass off, stopped at the marker.

    Every single-pass step goes through such a compile (jaxlib runs passes only inside one): what a
    step costs beyond it is xlabench's, what it costs itself scales with what the compiler must move.
    """
    started = time.perf_counter()
    try:
        _compile(add_stop_marker(text), {"xla_disable_hlo_passes": ",".join(disabled_passes)})
    except CompilerFailure as failure:
        if not any(stop in str(failure) for stop in _EXPECTED_STOPS):
            raise
    else:
        raise CompilerFailure("compile was not stopped by the stop marker")
    return time.perf_counter() - started


def full_compile_seconds(text: str) -> float:
    """Wall time of a full XLA CPU compile (all passes and LLVM code generation)."""
    started = time.perf_counter()
    _compile(text, {})
    return time.perf_counter() - started


# ---------------------------------------------------------------------------------------------
# Executables: compile, run on deterministic inputs, time.
# ---------------------------------------------------------------------------------------------


def compile_and_run(
    text: str, disabled_passes: list[str], inputs: list[np.ndarray], repeats: int, warmup: int
) -> dict[str, Any]:
    """Compile for execution (with `disabled_passes` off), run once for outputs, then time repeats.

    Also returns the opcode histogram of the module XLA generated code for (after every pass).
    """
    return compile_and_run_interleaved(text, disabled_passes, inputs, repeats, warmup)[0]


MAX_TIMED_ROUNDS = 2000  # timed rounds of `compile_and_run_interleaved` at most


@contextlib.contextmanager
def _one_core() -> Iterator[None]:
    """Run every thread of this process on one core while inside, then give each its cores back.

    Why: XLA's executables use its thread pool unevenly, so on a shared machine a policy/default
    ratio of two multi-threaded executables depends on the load beside them (README, "One core").
    On one core both run serially and the load falls on them alike.
    """
    try:
        cores = sorted(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no per-thread affinity here (not Linux): time on every core
        yield
        return
    core = cores[_timing_slot() % len(cores)]
    saved: dict[int, set[int]] = {}
    try:
        # Threads may start while others are pinned: list again until no thread is new.
        for _ in range(10):
            new = [tid for tid in _thread_ids() if tid not in saved]
            if not new:
                break
            for tid in new:
                with contextlib.suppress(OSError):  # a thread that ended meanwhile
                    saved[tid] = os.sched_getaffinity(tid)
                    os.sched_setaffinity(tid, {core})
        yield
    finally:
        for tid in _thread_ids():
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, saved.get(tid, cores))


def _timing_slot() -> int:
    """Which core this process times on: $XLABENCH_TIMING_SLOT, else the pytest-xdist worker's number
    (gw0, gw1, ...: one core each, never two on one), else the pid (spread by chance)."""
    for value in (os.environ.get("XLABENCH_TIMING_SLOT"), os.environ.get("PYTEST_XDIST_WORKER", "")[2:]):
        if value and value.isdigit():
            return int(value)
    return os.getpid()


def _thread_ids() -> list[int]:
    """Every thread of this process (Linux), none where /proc cannot tell."""
    try:
        return [int(tid) for tid in os.listdir("/proc/self/task")]
    except OSError:
        return []


def compile_and_run_interleaved(
    text: str,
    disabled_passes: list[str],
    inputs: list[np.ndarray],
    repeats: int,
    warmup: int,
    others: list[tuple[str, list[str]]] = (),
    min_seconds: float = 0.0,
) -> list[dict[str, Any]]:
    """Compile the module and each of `others` (text, disabled passes); run each once, then time them.

    Timed runs alternate between the programs (A B A B ...), so that the machine's noise falls on
    all of them alike and their ratio is meaningful. There are `repeats` rounds, or more, until every
    program has run for `min_seconds` in all (at most MAX_TIMED_ROUNDS): a 0.3 ms executable needs
    hundreds of runs for a stable median on a busy machine. Answers come in order: the module, then others.
    """
    programs = [(text, disabled_passes), *others]
    values = [np.asarray(value) for value in inputs]
    buffers = [adapter.put_on_device(value) for value in values]
    compiled = []
    for text, disabled_passes in programs:
        started = time.perf_counter()
        overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)} if disabled_passes else {}
        executable, loaded = executable_cache.compiled(
            text, overrides, functools.partial(_compile, text, overrides)
        )
        compile_seconds = time.perf_counter() - started
        optimized = to_text(adapter.optimized_module(executable))
        compiled.append((executable, compile_seconds, loaded, optimized, donated_parameters(optimized)))

    def arguments(donated: frozenset[int]) -> list[Any]:
        """The buffers for one run: a donated parameter gets a fresh copy (its buffer is consumed)."""
        if not donated:
            return buffers
        return [
            # Copied first: on the CPU a device buffer may share the numpy array's memory, and a donated
            # buffer is written by the run.
            adapter.put_on_device(np.array(values[index], copy=True)) if index in donated else buffer
            for index, buffer in enumerate(buffers)
        ]

    answers: list[dict[str, Any]] = []
    try:
        with _one_core():
            for executable, compile_seconds, loaded, optimized, donated in compiled:
                answers.append(
                    {
                        "outputs": [
                            np.asarray(array) for array in adapter.execute(executable, arguments(donated))
                        ],
                        "compile_seconds": compile_seconds,
                        "from_executable_cache": loaded,
                        "run_seconds": [],
                        "optimized_histogram": _reachable_histograms(optimized)[0],
                    }
                )
            for _ in range(warmup):
                for executable, _, _, _, donated in compiled:
                    adapter.execute(executable, arguments(donated))
            rounds = 0
            while rounds < repeats or (
                rounds < MAX_TIMED_ROUNDS
                and min(sum(answer["run_seconds"]) for answer in answers) < min_seconds
            ):
                for (executable, _, _, _, donated), answer in zip(compiled, answers, strict=True):
                    run_arguments = arguments(donated)  # copies made before the clock starts
                    begun = time.perf_counter()
                    adapter.execute(executable, run_arguments)
                    answer["run_seconds"].append(time.perf_counter() - begun)
                rounds += 1
    except UnsupportedCompiler:
        raise
    except Exception as error:
        raise CompilerFailure(f"execution failed: {_first_line(error)}") from None
    return answers


def parameter_specs(text: str) -> list[tuple[tuple[int, ...], str]]:
    """Shapes and numpy dtype names of the entry parameters, in order."""
    entry, computations = _entry_instructions(to_text(parse(text)))
    params: dict[int, tuple[tuple[int, ...], str]] = {}
    for _, right_hand_side in computations[entry]:
        if instruction_opcode(right_hand_side) != "parameter":
            continue
        match = re.match(
            r"\s*([a-z]+[0-9]*[a-z0-9]*)\[([0-9,]*)\](?:\{[^}]*\})?\s+parameter\((\d+)\)", right_hand_side
        )
        if match is None:
            raise CompilerFailure(
                f"entry parameter with a type xlabench cannot feed: {right_hand_side.strip()}"
            )
        element_type, dims, index = match.groups()
        shape = tuple(int(d) for d in dims.split(",") if d)
        params[int(index)] = (shape, _numpy_dtype_name(element_type))
    return [params[i] for i in sorted(params)]


_XLA_TO_NUMPY = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "c64": "complex64", "c128": "complex128",
}  # fmt: skip


def _numpy_dtype_name(element_type: str) -> str:
    if element_type not in _XLA_TO_NUMPY:
        raise CompilerFailure(f"entry parameter of element type {element_type} is not supported")
    return _XLA_TO_NUMPY[element_type]


def probe_module_text() -> str:
    """A small module with a while loop, a conditional, gather, scatter, a convolution and bf16."""
    import jax
    import jax.numpy as jnp

    def probe(x, indices, kernel):
        def body(carry):
            step, value = carry
            return step + 1, jnp.tanh(value) * 0.5

        _, x = jax.lax.while_loop(lambda carry: carry[0] < 3, body, (0, x))
        x = jax.lax.cond(x.sum() > 0, lambda v: v * 2.0, lambda v: v - 1.0, x)
        gathered = x[indices]
        scattered = jnp.zeros_like(x).at[indices].add(gathered)
        image = scattered.reshape(1, 1, 4, 4).astype(jnp.bfloat16)
        convolved = jax.lax.conv(image, kernel.astype(jnp.bfloat16), (1, 1), "SAME")
        return convolved.astype(jnp.float32).sum() + scattered.sum()

    arguments = (
        jax.ShapeDtypeStruct((16,), jnp.float32),
        jax.ShapeDtypeStruct((4,), jnp.int32),
        jax.ShapeDtypeStruct((1, 1, 3, 3), jnp.float32),
    )
    return jax.jit(probe).lower(*arguments).compiler_ir("hlo").as_hlo_text()


def discover_pipeline() -> str:
    """Fully compile the probe module; with TF_CPP_VMODULE=hlo_pass_pipeline=1 stderr shows the pipeline."""
    text = probe_module_text()
    _compile(text, {})
    return jaxlib_version()
