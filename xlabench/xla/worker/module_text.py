"""Module text in and out of XLA, inside a compiler worker: parse, print, canonicalize, compile.

Everything xlabench reads of a module is read from its printed text; jaxlib itself is reached only
through `xlabench.xla.worker.adapter`.
"""

from __future__ import annotations

import re
from typing import Any

from xlabench.xla.shared import payloads
from xlabench.xla.shared.failures import CompilerFailure, DriverFailure, TransientFailure
from xlabench.xla.shared.module_names import INTERNAL_MODULE_NAME, under_internal_name
from xlabench.xla.shared.releases import UnsupportedCompiler
from xlabench.xla.worker import adapter


def parse(text: str) -> Any:
    """Parse HLO text into an XLA HloModule named INTERNAL_MODULE_NAME; malformed text raises
    CompilerFailure.

    Constants named by payload digest (`xlabench.xla.shared.payloads`) get their values back: the elided
    text is parsed, then each literal is patched into the module's proto.
    """
    text, _ = under_internal_name(text)
    named: dict[str, str] = {}
    if payloads.has_payloads(text):
        text, named = payloads.without_markers(text)
    try:
        module = adapter.parse_module(text)
    except UnsupportedCompiler:
        raise
    except Exception as error:  # jaxlib raises its own runtime error type
        raise CompilerFailure(_parse_error_summary(str(error))) from None
    if adapter.module_name(module) != INTERNAL_MODULE_NAME:  # a header the pattern misread
        read = adapter.module_name(module)
        raise DriverFailure(f"the module's name could not be replaced (XLA read the name {read!r})")
    if not named:
        return module
    try:
        literals = {name: payloads.load(digest) for name, digest in named.items()}
    except payloads.MissingPayload as error:  # the store's loss, not the module's: never kept as an answer
        raise TransientFailure(str(error)) from None
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
    try:
        return payloads.with_markers(
            elided, payloads.literals(module.as_serialized_hlo_module_proto(), names)
        )
    except OSError:  # the payload store cannot be written (the caller has said so): every value in the text
        return adapter.module_text(module, adapter.print_options())


def full_text(text: str) -> str:
    """Module text with every constant in full, payloads included: what a user's tools read."""
    return adapter.module_text(parse(text), adapter.print_options())


def canonical_module(module: Any) -> Any:
    """The module as every compile sees it: exported to StableHLO and imported back.

    Each compile starts with this round trip, and it is not neutral after some passes (it splits
    constants that CSE merged, one per use), so xlabench keeps modules in this form: the state a
    pass's output is counted in is the state the next pass starts from.
    """
    return adapter.from_stablehlo(adapter.to_stablehlo(module))


def first_line(error: BaseException) -> str:
    """The first line of an error's message (its type's name when it has none)."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def compile_text(text: str, overrides: dict[str, Any]) -> Any:
    """Compile module text with DebugOptions overrides; return the executable or raise."""
    stablehlo = adapter.to_stablehlo(parse(text))
    try:
        return adapter.compile_stablehlo(stablehlo, overrides)
    except UnsupportedCompiler:
        raise
    except Exception as error:
        raise CompilerFailure(first_line(error)) from None


def disabled_pass_overrides(disabled_passes: list[str] | None) -> dict[str, Any]:
    """DebugOptions overrides that turn `disabled_passes` off (none when there are none)."""
    return {"xla_disable_hlo_passes": ",".join(disabled_passes)} if disabled_passes else {}
