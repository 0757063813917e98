"""What xlabench reads of a module inside a compiler worker: features, cost, canonical description.

Everything is read from the module's printed text (opcode and element-type histograms over the
computations reachable from ENTRY, entry parameters); only the cost analysis is XLA's own.
"""

from __future__ import annotations

import collections
import re
from typing import Any

from xlabench.xla.shared import element_types
from xlabench.xla.shared.failures import CompilerFailure
from xlabench.xla.shared.module_names import under_internal_name
from xlabench.xla.shared.module_structure import (
    COMPUTATION_HEADER,
    INSTRUCTION,
    callees,
    normalized_text_and_fingerprint,
    split_computations,
)
from xlabench.xla.shared.releases import UnsupportedCompiler
from xlabench.xla.worker import adapter
from xlabench.xla.worker.module_text import canonical_module, first_line, parse, to_text


def describe(text: str) -> dict[str, Any]:
    """Return name, canonical text, fingerprint and `features` of module text (canonicalizing it first).

    The name is the one the text gives; the canonical text names the module INTERNAL_MODULE_NAME,
    so that it does not depend on the name (the caller puts its own name back).
    """
    try:
        module = canonical_module(parse(text))
    except (CompilerFailure, UnsupportedCompiler):
        raise  # a bad module is said as such, and so is a jaxlib the adapter does not fit
    except Exception as error:
        raise CompilerFailure(f"XLA cannot import the module: {first_line(error)}") from None
    printed = to_text(module)
    canonical, fingerprint = normalized_text_and_fingerprint(printed)
    # Features from the canonical module in hand: the next thing every caller asks for.
    return {
        "name": under_internal_name(text)[1],
        "text": canonical,
        "fingerprint": fingerprint,
        "features": module_features(module, printed),
    }


def features(text: str) -> dict[str, Any]:
    """Opcode and element-type histograms over reachable computations, op count, cost analysis."""
    return module_features(parse(text))


def module_features(module: Any, printed: str | None = None) -> dict[str, Any]:
    """`features` of a parsed module (`printed`: its text, when already printed)."""
    histogram, computations, element_types = reachable_histograms(printed or to_text(module))
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


def reachable_histograms(printed: str) -> tuple[dict[str, int], int, dict[str, int]]:
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
        dtype_name = element_types.numpy_dtype_name(element_type)
        if dtype_name is None:
            raise CompilerFailure(f"entry parameter of element type {element_type} is not supported")
        params[int(index)] = (shape, dtype_name)
    return [params[i] for i in sorted(params)]
