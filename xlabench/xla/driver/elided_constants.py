"""Constants printed without their values (`constant({...})`, XLA's default for large literals).

XLA's parser fills such a constant with a counter that runs on across every parse in the process,
so the same file would give another module -- and another fingerprint -- each time it is read.
xlabench fills them itself, before XLA sees the text, with values that depend only on the
constant's position among the elided ones and its shape: floats drawn from a standard normal
(rounded to the element type), integers from 0..7 (they may be indices), predicates at random.
Op counts, pass behaviour and runtimes are those of a module with weights of that shape; outputs
are not the original model's.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

from xlabench.errors import UserInputError
from xlabench.xla.shared.element_types import FLOAT_TYPES, INTEGER_TYPES, numpy_dtype

ELIDED_CONSTANT = re.compile(
    r"^(?P<head>\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*(?P<type>[a-z][a-z0-9]*)\[(?P<dims>[\d,]*)\]"
    r"(?:\{[^}]*\})?\s+constant\()\{\.\.\.\}\)",
    re.MULTILINE,
)


def fill_elided_constants(text: str, source: str = "<text>") -> tuple[str, int]:
    """The text with every elided constant given deterministic values, and how many there were."""
    if "{...}" not in text:
        return text, 0  # the common case, without two regex scans of a text that may be 100s of MB
    count = 0

    def fill(match: re.Match[str]) -> str:
        nonlocal count
        element_type, dims = match.group("type"), match.group("dims")
        shape = tuple(int(d) for d in dims.split(",") if d)
        seed = hashlib.sha256(f"{count}:{element_type}[{dims}]".encode()).digest()
        count += 1
        generator = np.random.default_rng(int.from_bytes(seed[:8], "little"))
        return match.group("head") + _literal(_values(generator, element_type, shape, source)) + ")"

    filled = ELIDED_CONSTANT.sub(fill, text)
    left = re.search(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=.*constant\(\{\.\.\.\}\)", filled, re.MULTILINE)
    if left:  # a tuple-shaped or dynamic constant: XLA would fill it from its counter, differently each time
        raise UserInputError(f"{source}: cannot fill the elided constant {left.group(1)} (only array shapes)")
    return filled, count


def _values(generator: np.random.Generator, element_type: str, shape: tuple[int, ...], source: str) -> list:
    """The constant's values as Python numbers (text-exact), in row-major order, shaped."""
    if element_type in FLOAT_TYPES:
        rounded = generator.standard_normal(shape).astype(np.float32).astype(numpy_dtype(element_type))
        return rounded.astype(np.float64).tolist()  # exact: every value is representable
    if element_type in INTEGER_TYPES:
        return generator.integers(0, 8, size=shape).tolist()
    if element_type == "pred":
        return (generator.random(shape) < 0.5).tolist()
    raise UserInputError(f"{source}: cannot fill an elided constant of element type {element_type}")


def _literal(values: list | float | int | bool) -> str:
    """HLO literal text: nested braces, one level per dimension."""
    if isinstance(values, bool):
        return "true" if values else "false"
    if not isinstance(values, list):
        return repr(values)
    if values and isinstance(values[0], list):
        return "{ " + ", ".join(_literal(part) for part in values) + " }"
    return "{" + ", ".join(_literal(value) for value in values) + "}"
