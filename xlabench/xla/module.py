"""HloModule: an HLO module as xlabench passes it around -- canonical text plus its fingerprint.

"Canonical" means as XLA itself holds the module after importing it (HLO -> StableHLO -> HLO, the
path every compile takes), printed without metadata and with full constants. Canonical text parses
back to the same fingerprint, so a module can go through any number of pass applications.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlabench.errors import UserInputError
from xlabench.files import write_atomically

if TYPE_CHECKING:
    from xlabench.xla.features import Features


@dataclass(frozen=True)
class HloModule:
    """Canonical HLO text, the module's name, its fingerprint, and where it came from."""

    text: str = field(repr=False)
    name: str
    fingerprint: str
    source: str = "<text>"
    # Seconds XLA took to produce this module from the one before (as first measured: a cached
    # transition keeps its time); None for a module that was loaded, not produced by a pass.
    compile_seconds: float | None = field(default=None, compare=False)

    @classmethod
    def from_text(cls, text: str, source: str = "<text>") -> HloModule:
        """Parse and canonicalize HLO text with XLA; malformed text raises UserInputError."""
        from xlabench.xla.driver import default_driver

        if not text.strip():
            raise UserInputError(f"{source}: empty file, expected HLO module text")
        return default_driver().load(text, source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> HloModule:
        """Read an .hlo file (HLO text, e.g. an XLA dump); bad paths raise UserInputError."""
        return cls.from_text(read_hlo_file(path), source=str(path))

    def features(self) -> Features:
        """Op count, opcode histogram and cost analysis (computed by XLA, memoized)."""
        from xlabench.xla.driver import default_driver

        return default_driver().features(self)

    @property
    def op_count(self) -> int:
        """Instructions in reachable computations, parameters excluded (see xlabench.xla.features)."""
        return self.features().op_count

    @property
    def histogram(self) -> dict[str, int]:
        """Instruction count per opcode."""
        return self.features().histogram

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the canonical text atomically (temporary file, then rename), every constant in full."""
        from xlabench.xla.driver import default_driver

        write_atomically(os.fspath(path), default_driver().full_text(self).encode())


def read_hlo_file(path: str | os.PathLike[str]) -> str:
    """Return the text of an HLO file, or raise UserInputError naming what is wrong with the path."""
    path = os.fspath(path)
    if os.path.isdir(path):
        raise UserInputError(f"{path}: is a directory, expected an HLO text file")
    if not os.path.exists(path):
        raise UserInputError(f"{path}: no such file")
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as error:
        raise UserInputError(f"{path}: cannot read: {error.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserInputError(f"{path}: not a text file (expected HLO module text)") from None
    if not text.strip():
        raise UserInputError(f"{path}: empty file, expected HLO module text")
    return text
