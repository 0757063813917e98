"""Single-pass compiles and runs of XLA's pipeline, read from the dumps of a stopped compile.

Each function compiles once with the stop marker (`xlabench.xla.worker.stopped_compiles`) and reads what it
needs of the modules XLA dumped on the way: the module after one run of one pass, the module at a point of
the pipeline, or the passes that changed the module and the state after each.
"""

from __future__ import annotations

import collections
import re
import time
from collections.abc import Callable
from typing import Any

from xlabench.xla.shared.failures import CompilerFailure, DriverFailure
from xlabench.xla.shared.module_structure import INSTRUCTION, structural_fingerprint
from xlabench.xla.worker.module_analysis import describe
from xlabench.xla.worker.module_text import disabled_pass_overrides
from xlabench.xla.worker.stopped_compiles import (
    dump_step,
    dump_text,
    dumps_until_stop,
    hlo_module_field,
    numbered_dumps,
    read_bytes,
    strip_stop_marker,
)


def run_pass(
    text: str,
    pass_name: str,
    disabled_passes: list[str],
    pipeline: str | None = None,
    occurrence: int = 1,
    successors: list[str] | None = None,
    cleanup_pass: str | None = None,
) -> dict[str, Any]:
    """Run one pass: every name in `disabled_passes` is off; return the module after one run.

    The run returned is the `occurrence`-th run of the pass inside `pipeline` (the first run
    anywhere when `pipeline` is None): XLA may add one pass several times with different options.
    When XLA's module is byte for byte the same before and after the pass, the answer is
    {"unchanged": True}: the input stands as it is (and canonicalizing it again is skipped).
    "read_from" says which dumps gave the module: "successors" or, failing them, "pass".

    `cleanup_pass` ("dce") undoes what the compile's import adds to a module with a `while` (see
    `_run_cleaned`): XLA's pass is then given the module as XLA's own pipeline would give it.

    `successors` (`PassCatalogue.successors`) name what runs right after the pass in `pipeline`:
    only the dumps "before" them in that pipeline are written, one a run. Dumping the pass itself
    also writes the dump before each of its runs, and a pass in a fixed-point pipeline runs again
    and again in memory after the run kept (reshape-mover to the 25-round limit): half the files.
    """
    started = time.perf_counter()
    overrides = {"xla_disable_hlo_passes": ",".join(disabled_passes)}
    dumped, read_from = None, "successors"
    if cleanup_pass is not None and cleanup_pass != pass_name and _needs_loop_cleanup(text):
        read_from = "cleaned"
        dumped = _run_cleaned(text, pass_name, disabled_passes, cleanup_pass, pipeline, occurrence)
    if dumped is None and successors and pipeline is not None:
        read_from = "successors"
        narrow = {**overrides, "xla_dump_hlo_pipeline_re": f"^{re.escape(pipeline)}$"}
        regex = "^(" + "|".join(re.escape(name) for name in successors) + ")$"
        dumped = _run_dumped(text, narrow, regex, pass_name, pipeline, occurrence, successors)
    if dumped is None:  # no successors given, or not what followed the pass: dump the pass itself
        read_from = "pass"
        dumped = _run_dumped(text, overrides, f"^{re.escape(pass_name)}$", pass_name, pipeline, occurrence)
    if dumped is None:
        where = f" in pipeline {pipeline}" if pipeline is not None else ""
        runs = "no run" if occurrence == 1 else f"fewer than {occurrence} runs"
        raise CompilerFailure(f"pass {pass_name} did not run{where} (XLA's dumps of the compile show {runs})")
    given, chosen = dumped
    # Every other pass is off, so the module XLA started from is the one the pass was given.
    if given == chosen:
        return {"unchanged": True, "seconds": time.perf_counter() - started, "read_from": read_from}
    result = describe(strip_stop_marker(chosen))
    result.update(seconds=time.perf_counter() - started, read_from=read_from)
    return result


# A compile imports its module through MLIR, whose export extracts every result of a `while`, and
# every element of a loop's state parameter, with a get-tuple-element, used or not. XLA's pipeline
# imports once and its first dce removes the unused ones; a replay imports before every pass, and an
# unused extraction keeps its loop-state element alive: simplify-while-loops then keeps state XLA's
# drops (design.md, "Replay gaps"). So a pass's output leaves out the unused extractions the import
# made, and a pass given a module with a `while` and no dead code runs after XLA's dce, which then
# removes exactly what the import added.
_LOOP_CALL = re.compile(r"\swhile\(")
_OPCODE = re.compile(r"(?:^|\s)([a-z][\w\-]*)\(")
_OPERAND = re.compile(r"%([\w.\-]+)")
_Instruction = tuple[str, str, bool]  # opcode, line, is the root


def _instructions(text: str) -> dict[str, _Instruction]:
    """{name: (opcode, instruction line, is root)} of every instruction in an HLO text."""
    found = {}
    for line in text.splitlines():
        match = INSTRUCTION.match(line)
        if match is not None:
            opcode = _OPCODE.search(match.group(3))
            found[match.group(2)] = (opcode.group(1) if opcode else "", line, bool(match.group(1)))
    return found


def _unused(instructions: dict[str, _Instruction]) -> set[str]:
    """Names of the instructions nothing uses: neither an operand nor the root nor a parameter."""
    used: set[str] = set()
    for _, line, _ in instructions.values():
        used.update(_OPERAND.findall(line.split("=", 1)[1]))
    return {
        name
        for name, (opcode, _, is_root) in instructions.items()
        if name not in used and not is_root and opcode != "parameter"
    }


def _is_extraction(instruction: _Instruction, instructions: dict[str, _Instruction]) -> bool:
    """Whether the instruction is a get-tuple-element of a `while` result or of a parameter."""
    opcode, line, _ = instruction
    if opcode != "get-tuple-element":
        return False
    operand = _OPERAND.search(line.split("get-tuple-element(", 1)[1])
    return operand is not None and instructions.get(operand.group(1), ("",))[0] in ("while", "parameter")


def _needs_loop_cleanup(text: str) -> bool:
    """Whether the module has a `while` and no dead code but unused extractions.

    Other dead code is what XLA's pass would see too: then the pass runs on the module as imported.
    """
    if _LOOP_CALL.search(text) is None:
        return False
    instructions = _instructions(text)
    return all(_is_extraction(instructions[name], instructions) for name in _unused(instructions))


def _only_extractions_removed(imported: str, cleaned: str) -> bool:
    """Whether `cleaned` is `imported` less some unused extractions, and nothing else."""
    instructions, kept = _instructions(imported), _instructions(cleaned)
    removed = {name for name in instructions if name not in kept}
    if not all(_is_extraction(instructions[name], instructions) for name in removed):
        return False
    dropped = {instructions[name][1] for name in removed}
    # Removing instructions changes the order XLA prints the rest in (post order), not the rest.
    left = [line for line in imported.splitlines() if line not in dropped]
    return collections.Counter(left) == collections.Counter(cleaned.splitlines())


def _run_cleaned(
    text: str,
    pass_name: str,
    disabled_passes: list[str],
    cleanup_pass: str,
    pipeline: str | None,
    occurrence: int,
) -> tuple[str, str] | None:
    """(module the pass was given, module after the chosen run) with `cleanup_pass` on; None if unusable.

    The cleanup pass runs where XLA runs it before the pass in the pass's pipelines. It is kept only
    where all it removed is unused extractions of `while` results and loop parameters, what the
    import added; otherwise None, and the
    pass runs without it.
    """
    enabled = [name for name in disabled_passes if name != cleanup_pass]
    overrides = {"xla_disable_hlo_passes": ",".join(enabled)}
    with dumps_until_stop(text, overrides, f"^{re.escape(pass_name)}$", as_text=True) as dumps:
        dumped_name = None if pipeline is None else pipeline.replace(" ", "_")

        def runs(found: Callable[[str], bool]) -> list[str]:
            chosen = [
                s for s in dumps if found(s) and (dumped_name is None or s.split(".", 2)[1] == dumped_name)
            ]
            return sorted(chosen, key=dump_step)

        began = runs(lambda suffix: suffix.endswith(f".before_{pass_name}"))
        after = runs(lambda suffix: f".after_{pass_name}." in suffix)
        if len(began) < occurrence or len(after) < occurrence:
            return None
        imported = dump_text(dumps["before_optimizations"])
        given, chosen = dump_text(dumps[began[occurrence - 1]]), dump_text(dumps[after[occurrence - 1]])
    if given != imported and not _only_extractions_removed(imported, given):
        return None
    return given, chosen


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
    with dumps_until_stop(text, overrides, regex, as_text=True) as dumps:

        def runs(found: Callable[[str], bool]) -> list[str]:
            # Dump names spell the running pipeline with underscores: "0003.simplification.after_dce...".
            dumped_name = None if pipeline is None else pipeline.replace(" ", "_")
            chosen = [
                s for s in dumps if found(s) and (dumped_name is None or s.split(".", 2)[1] == dumped_name)
            ]
            return sorted(chosen, key=dump_step)

        after = runs(lambda suffix: f".after_{pass_name}." in suffix)
        followed = {s.rsplit(".before_", 1)[-1] for s in after}  # spaces spelled as underscores
        expected = {name.replace(" ", "_") for name in successors or ()}
        if successors is None and len(after) < occurrence:
            # Dumping the pass dumps the module before each of its runs too: a run that began and
            # left no module after it is a dump the driver lost, not a pass that did not run.
            began = runs(lambda suffix: suffix.endswith(f".before_{pass_name}"))
            if len(began) >= occurrence:
                raise DriverFailure(
                    f"XLA began run {occurrence} of {pass_name} ({began[occurrence - 1]}), "
                    "but its dump of the module after the run is missing"
                )
        if len(after) < occurrence or not followed.issuperset(expected):
            return None
        given, chosen = dumps["before_optimizations"], dumps[after[occurrence - 1]]
        if chosen.endswith(".pb"):
            # Proto dumps (large constants): equal modules need not be printed to be compared.
            before, after_pass = (hlo_module_field(read_bytes(path)) for path in (given, chosen))
            return ("", "") if before == after_pass else (None, dump_text(chosen))
        return dump_text(given), dump_text(chosen)


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
    overrides = disabled_pass_overrides(disabled_passes)
    if point_pipeline is not None:
        narrow = {**overrides, "xla_dump_hlo_pipeline_re": f"^{re.escape(point_pipeline)}$"}
        with dumps_until_stop(text, narrow, f"^{re.escape(point_pass)}$", as_text=True) as dumps:
            before = sorted((s for s in dumps if s.endswith(f".before_{point_pass}")), key=dump_step)
            if before:
                module_text = dump_text(dumps[before[0]])
    if module_text is None:
        names = sorted({*sibling_passes, point_pass, "pipeline-start"})
        regex = "^(" + "|".join(re.escape(name) for name in names) + ")$"
        with dumps_until_stop(text, overrides, regex, as_text=True) as dumps:
            ordered = sorted((s for s in dumps if s != "before_optimizations"), key=dump_step)
            point = next((i for i, s in enumerate(ordered) if f".after_{point_pass}." in s), None)
            if point is None or point == 0:
                raise DriverFailure(f"XLA's dumps of the pipeline never reach {point_pass}")
            module_text = dump_text(dumps[ordered[point - 1]])
    result = describe(strip_stop_marker(module_text))
    result["seconds"] = time.perf_counter() - started
    return result


def _pipeline_and_pass(suffix: str) -> tuple[str, str]:
    """The pipeline and the pass a numbered dump follows: "0003.simplification.after_dce.before_cse"."""
    pipeline, _, passes = suffix[5:].partition(".after_")
    return pipeline, passes.split(".before_", 1)[0]


def pipeline_changes(text: str, point_pass: str, disabled_passes: list[str] | None = None) -> dict[str, Any]:
    """Run the whole default CPU pipeline once, up to `point_pass`; list the passes that changed the module.

    Every pass is dumped; a run whose module differs from the one before it changed something.
    The answer is {"changes": [[pipeline, pass], ...]} in the order XLA ran them (a pass in a
    fixed-point pipeline once per round in which it changed the module): XLA's own order, with
    its no-ops left out, from one compile instead of one compile per pass.
    """
    started = time.perf_counter()
    changes: list[list[str]] = []
    overrides = disabled_pass_overrides(disabled_passes)
    with dumps_until_stop(text, overrides, dump_regex=".*") as dumps:
        previous = hlo_module_field(read_bytes(dumps["before_optimizations"]))
        for suffix in numbered_dumps(dumps):
            pipeline, pass_name = _pipeline_and_pass(suffix)
            if pass_name == point_pass:
                break
            current = hlo_module_field(read_bytes(dumps[suffix]))
            if current != previous and pass_name != "pipeline-start":
                changes.append([pipeline, pass_name])  # the pipeline as dumped: spaces are underscores
            previous = current
        else:
            raise DriverFailure(f"XLA's dumps of the pipeline never reach {point_pass}")
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
    difference (`xlabench.xla.diagnosis.attribution`).
    """
    started = time.perf_counter()
    overrides = disabled_pass_overrides(disabled_passes)
    runs: list[list[Any]] = []
    rounds: collections.Counter[str] = collections.Counter()
    seen: collections.Counter[tuple[str, str]] = collections.Counter()
    with dumps_until_stop(text, overrides, dump_regex=".+", as_text=True) as dumps:
        previous_text = dump_text(dumps["before_optimizations"])
        start = previous = structural_fingerprint(strip_stop_marker(previous_text))
        for suffix in numbered_dumps(dumps):
            pipeline, pass_name = _pipeline_and_pass(suffix)
            if pass_name == point_pass:
                break
            if pass_name == "pipeline-start":  # a pipeline begins (again: the next round of its loop)
                rounds[pipeline] += 1
                for key in [key for key in seen if key[0] == pipeline]:
                    del seen[key]
                continue
            current_text = dump_text(dumps[suffix])
            if current_text != previous_text:  # an unchanged text keeps its fingerprint
                previous_text = current_text
                previous = structural_fingerprint(strip_stop_marker(current_text))
            seen[pipeline, pass_name] += 1
            runs.append([pipeline, rounds[pipeline], pass_name, seen[pipeline, pass_name], previous])
        else:
            raise DriverFailure(f"XLA's dumps of the pipeline never reach {point_pass}")
    return {"start": start, "runs": runs, "seconds": time.perf_counter() - started}


def pipeline_states(text: str, point_pass: str) -> dict[str, Any]:
    """Run the CPU pipeline once up to `point_pass`; XLA's module after every run that changed it, in
    xlabench's canonical form: [pipeline, pass, fingerprint, op count] in the order XLA ran them.

    Canonical fingerprints are those of `HloModule`s, so a replay's states can be matched against
    XLA's (`xlabench.xla.diagnosis.pipeline_replay.trace_replay`). With ".*" XLA dumps only the runs that
    changed its module.
    """
    started = time.perf_counter()
    states: list[list[Any]] = []
    with dumps_until_stop(text, {}, dump_regex=".*", as_text=True) as dumps:
        previous_text = dump_text(dumps["before_optimizations"])
        for suffix in numbered_dumps(dumps):
            pipeline, pass_name = _pipeline_and_pass(suffix)
            if pass_name == point_pass:
                break
            current_text = dump_text(dumps[suffix])
            if pass_name == "pipeline-start" or current_text == previous_text:
                continue
            previous_text = current_text
            described = describe(strip_stop_marker(current_text))
            states.append([pipeline, pass_name, described["fingerprint"], described["features"]["op_count"]])
        else:
            raise DriverFailure(f"XLA's dumps of the pipeline never reach {point_pass}")
    return {"states": states, "seconds": time.perf_counter() - started}
