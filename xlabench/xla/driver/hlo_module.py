"""HloModule: an HLO module as xlabench passes it around -- canonical text plus its fingerprint.

"Canonical" means as XLA itself holds the module after importing it (HLO -> StableHLO -> HLO, the
path every compile takes), printed without metadata and with full constants. Canonical text parses
back to the same fingerprint, so a module can go through any number of pass applications.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from xlabench.errors import UserInputError
from xlabench.files import write_atomically

if TYPE_CHECKING:
    from xlabench.xla.driver.features import Features


class ModuleServices(Protocol):
    """What the convenience API of `HloModule` asks of a driver
    (`xlabench.xla.driver.pass_driver.PassDriver`)."""

    def load(self, text: str, source: str = "<text>") -> HloModule: ...

    def features(self, module: HloModule) -> Features: ...

    def full_text(self, module: HloModule) -> str: ...


# The process-wide driver behind `HloModule.from_text`, `features` and `write`: handed over by
# `xlabench.xla.driver.pass_driver` when it is imported (`_driver` imports it if no one has), so that this
# module, which the driver builds on, does not import the driver back.
_default_driver: Callable[[], ModuleServices] | None = None


def use_default_driver(provider: Callable[[], ModuleServices]) -> None:
    """Set what gives the driver `HloModule`'s shortcuts run on
    (`xlabench.xla.driver.pass_driver.default_driver`)."""
    global _default_driver
    _default_driver = provider


def _driver() -> ModuleServices:
    """The default driver, from the provider `xlabench.xla.driver.pass_driver` set."""
    if _default_driver is None:  # the driver registers itself on import; here it was not imported yet
        importlib.import_module("xlabench.xla.driver.pass_driver")
    assert _default_driver is not None, "xlabench.xla.driver.pass_driver sets the default driver on import"
    return _default_driver()


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
    def from_text(cls, text: str, source: str = "<text>", driver: ModuleServices | None = None) -> HloModule:
        """Parse and canonicalize HLO text with XLA (`driver`, default the process's); malformed text
        raises UserInputError."""
        if not text.strip():
            raise UserInputError(f"{source}: empty file, expected HLO module text")
        return (driver or _driver()).load(text, source)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], driver: ModuleServices | None = None) -> HloModule:
        """Read an .hlo file (HLO text, e.g. an XLA dump) with `driver` (default the process's); bad paths
        raise UserInputError."""
        return cls.from_text(read_hlo_file(path), source=str(path), driver=driver)

    def features(self) -> Features:
        """Op count, opcode histogram and cost analysis (computed by XLA, memoized)."""
        return _driver().features(self)

    @property
    def op_count(self) -> int:
        """Instructions in reachable computations, parameters excluded (see xlabench.xla.driver.features)."""
        return self.features().op_count

    @property
    def histogram(self) -> dict[str, int]:
        """Instruction count per opcode."""
        return self.features().histogram

    def write(self, path: str | os.PathLike[str]) -> None:
        """Write the canonical text atomically (temporary file, then rename), every constant in full."""
        write_atomically(os.fspath(path), _driver().full_text(self).encode())


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
