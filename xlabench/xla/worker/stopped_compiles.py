"""Compiles that stop right after the passes asked for, and the module dumps XLA writes on the way.

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

import contextlib
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any

from xlabench.settings import worker_start
from xlabench.xla.shared import payloads
from xlabench.xla.shared.failures import CompilerFailure, DriverFailure
from xlabench.xla.shared.module_names import INTERNAL_MODULE_NAME
from xlabench.xla.worker import adapter
from xlabench.xla.worker.module_text import compile_text, to_text

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


def compile_until_stop(text: str, overrides: dict[str, Any]) -> None:
    """Compile the module with the stop marker added; any failure but the marker's stop is raised."""
    try:
        compile_text(add_stop_marker(text), overrides)
    except CompilerFailure as failure:
        if not any(stop in str(failure) for stop in _EXPECTED_STOPS):
            raise
    else:
        raise DriverFailure("the compile was not stopped by the stop marker: it ran to the end")


def _scratch_dir() -> str:
    """A fresh dump directory inside the one the parent gave this worker (it removes that one)."""
    return tempfile.mkdtemp(prefix="dump-", dir=worker_start().scratch_directory)


@contextlib.contextmanager
def dumps_until_stop(
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
        compile_until_stop(text, settings)
        yield dump_files(dump_dir, ".txt" if as_text else ".hlo.pb")
    finally:
        shutil.rmtree(dump_dir, ignore_errors=True)


# module_0001.xlabench_module.0003.pipeline.after_x.before_y.txt: XLA's dump file of the module
# (every worker compiles under INTERNAL_MODULE_NAME), the module id being the process's counter.
_DUMP_FILE = re.compile(rf"^module_(\d{{4,}})\.{re.escape(INTERNAL_MODULE_NAME)}\.(.+)$")


def dump_files(dump_dir: str, extension: str) -> dict[str, str]:
    """{dump suffix: path} of the module dumps (files ending in `extension`) in a stopped compile's folder.

    The suffix is what follows the module prefix, e.g. "0003.simplification.after_algsimp.before_dce"
    or "before_optimizations". A file of another module, or a folder without the module as XLA was
    given it, is the driver's failure to find XLA's work: raised, never read as "no pass ran".
    """
    dumps: dict[str, str] = {}
    modules: set[str] = set()
    for name in sorted(os.listdir(dump_dir)):
        match = _DUMP_FILE.match(name)
        if match is None:
            raise DriverFailure(f"XLA wrote a dump file the driver cannot place: {name}")
        modules.add(match.group(1))
        if name.endswith(extension):
            dumps[match.group(2).removesuffix(extension)] = os.path.join(dump_dir, name)
    if len(modules) > 1:  # two modules' dumps would overwrite each other under one suffix
        raise DriverFailure(
            f"XLA dumped {len(modules)} modules (ids {', '.join(sorted(modules))}) in one compile"
        )
    steps = sorted(dump_step(suffix) for suffix in dumps if suffix[:4].isdigit())
    if steps != list(range(len(steps))):  # XLA numbers the dumps it writes 0, 1, 2, ...
        missing = next(step for step in range(len(steps) + 1) if step not in steps)
        raise DriverFailure(f"XLA's dump number {missing:04d} is missing from the stopped compile's dumps")
    if "before_optimizations" not in dumps:
        raise DriverFailure(
            f"XLA's dump of the module as given (before_optimizations{extension}) is missing from the "
            f"stopped compile's {len(dumps)} dump(s)"
        )
    return dumps


def read_bytes(path: str) -> bytes:
    """The whole content of a dump file."""
    with open(path, "rb") as handle:
        return handle.read()


def dump_text(path: str) -> str:
    """A dump's module as xlabench text: a text dump as written, a proto dump printed (payloads named)."""
    if path.endswith(".pb"):
        return to_text(adapter.module_from_proto(hlo_module_field(read_bytes(path))))
    return read_bytes(path).decode()


def hlo_module_field(hlo_proto: bytes) -> bytes:
    """Extract field 1 (`hlo_module`) of a serialized xla.HloProto, the format of .hlo.pb dumps."""
    try:
        for field, wire_type, _, value, end in payloads.message_fields(hlo_proto):
            if field == 1 and wire_type == 2:
                return hlo_proto[value:end]
    except ValueError:
        pass  # a wire type no HloProto field has: not a dump
    raise CompilerFailure("dump file holds no HloModuleProto")


def dump_step(suffix: str) -> int:
    """The step number a dump suffix starts with ("0003.simplification..." -> 3); -1 for none."""
    return int(suffix.split(".", 1)[0]) if suffix[:4].isdigit() else -1


def numbered_dumps(dumps: dict[str, str]) -> list[str]:
    """The suffixes of the dumps XLA wrote after a pass ran, in the order it ran them."""
    return sorted((suffix for suffix in dumps if suffix[:4].isdigit()), key=dump_step)


def stopped_compile_seconds(text: str, disabled_passes: list[str]) -> float:
    """Wall time of the least compile a step makes: parse, export, every pass off, stopped at the marker.

    Every single-pass step goes through such a compile (jaxlib runs passes only inside one): what a
    step costs beyond it is xlabench's, what it costs itself scales with what the compiler must move.
    """
    started = time.perf_counter()
    compile_until_stop(text, {"xla_disable_hlo_passes": ",".join(disabled_passes)})
    return time.perf_counter() - started
