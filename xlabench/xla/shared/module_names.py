"""The module's name at the compiler boundary: one fixed name inside the workers, the user's outside.

XLA names its dump files after the module ("module_0001.NAME.0003.simplification.after_algsimp....")
and a user's name may hold anything XLA's parser takes: torch-xla's "SyncTensorsGraph.2081",
TensorFlow's "cluster_0__XlaCompiledKernel_true__..._.2963", dots, digits, dashes, 300 characters.
Every worker therefore compiles, dumps and prints a module under INTERNAL_MODULE_NAME, so dump files
are read exactly and no answer (nor any cached record) depends on the name; the caller gives the
module its own name back. Pure Python: both sides of the boundary import it.
"""

from __future__ import annotations

import re

from xlabench.errors import DriverError

INTERNAL_MODULE_NAME = "xlabench_module"
# XLA's header: comments and blank lines, then "HloModule [%]NAME" (a name token: letters, digits,
# "_", ".", "-", not starting with a digit). Possessive quantifiers: a text without a header fails to
# match at once, whatever whitespace it starts with; a block comment ends at its first "*/".
_NAME = r"[A-Za-z_][A-Za-z0-9_.\-]*"
_HEADER = re.compile(
    rf"\A(?:[ \t\r\n]++|//[^\n]*+|/\*(?:[^*]|\*(?!/))*+\*/)*+HloModule(?:[ \t\r\n]++%?|%)({_NAME})"
)
_ENTRY_NAME = re.compile(rf"^[ \t]*ENTRY[ \t]+%?({_NAME})", re.M)
_INTERNAL_HEADER = f"HloModule {INTERNAL_MODULE_NAME}"
_PRINTED_HEADER = re.compile(rf"\A{_INTERNAL_HEADER}(?=,|\n|\Z)")


def under_internal_name(text: str) -> tuple[str, str]:
    """The module text with its module named INTERNAL_MODULE_NAME, and the name it had.

    A text without a header (XLA's parser takes a bare ENTRY computation) gets one; its name is
    its entry computation's.
    """
    match = _HEADER.match(text)
    if match is not None:
        return text[: match.start(1)] + INTERNAL_MODULE_NAME + text[match.end(1) :], match.group(1)
    entry = _ENTRY_NAME.search(text)
    # On the text's first line: XLA's parse errors keep the user's line numbers.
    return f"{_INTERNAL_HEADER} {text}", entry.group(1) if entry else "module"


def with_module_name(text: str, name: str) -> str:
    """Text a worker printed (named INTERNAL_MODULE_NAME) with the module's own name in its header."""
    if _PRINTED_HEADER.match(text) is None:
        raise DriverError(f"a worker's module text does not start with {_INTERNAL_HEADER!r}: {text[:60]!r}")
    return f"HloModule {name}{text[len(_INTERNAL_HEADER) :]}"
