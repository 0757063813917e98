"""The jaxlib releases xlabench's adapter serves, and the one its shipped artifacts were made with.

Pure Python (no jaxlib): the caller checks a release before it starts a worker, the worker's adapter
checks its own jaxlib at import.
"""

from __future__ import annotations

import re

from xlabench.errors import UserInputError

# Oldest and newest jaxlib the adapter (`xlabench.xla.worker.adapter`) is tested on, both included.
SUPPORTED_JAXLIB = ("0.8.0", "0.10.2")
# The compiler of the shipped policies and baselines: the one the default install pins.
REFERENCE_JAXLIB = "0.10.2"
# Set ("1") in the workers of a compiler registered as a build (`compilers add --wheel/--python`): its
# jaxlib may carry any version (a development build's "0.10.3.dev20261205"), and is served when the
# adapter finds the API of a supported release in it. The compiler build a worker serves
# (`xlabench.xla.compilers.build_identity`), set by the pool: the executable cache files executables
# under it. Both are read in `xlabench.settings` (`worker_start`), with every other variable.


class UnsupportedCompiler(UserInputError):
    """A jaxlib release outside the supported range, or whose internals the adapter does not fit."""


def parse_version(version: str) -> tuple[int, ...]:
    """ "0.10.2" -> (0, 10, 2); "0.9.0.1" -> (0, 9, 0, 1); anything else raises UserInputError."""
    if not re.fullmatch(r"\d+(\.\d+){1,3}", version):
        raise UserInputError(f"{version}: not a jaxlib release number (e.g. 0.10.1)")
    return tuple(int(part) for part in version.split("."))


def supported_range() -> str:
    """The supported range, said in words."""
    return f"jaxlib {SUPPORTED_JAXLIB[0]} to {SUPPORTED_JAXLIB[1]}"


def is_release(version: str) -> bool:
    """Whether `version` is a plain release number ("0.10.2"), not a build's ("0.10.3.dev20261205+local")."""
    return re.fullmatch(r"\d+(\.\d+){1,3}", version) is not None


def compiler_title(name: str) -> str:
    """A compiler as messages name it: "jaxlib 0.10.1" for a release, "compiler NAME" for any other."""
    return f"jaxlib {name}" if is_release(name) else f"compiler {name}"


def check_supported(version: str, accept_build: bool = False) -> None:
    """Raise UnsupportedCompiler unless `version` lies in SUPPORTED_JAXLIB (any version of a build
    accepted as one: the adapter's own checks of jaxlib's API decide)."""
    if accept_build:
        return
    lowest, highest = (parse_version(bound) for bound in SUPPORTED_JAXLIB)
    if not lowest <= parse_version(version) <= highest:
        raise UnsupportedCompiler(f"jaxlib {version} is not supported: xlabench supports {supported_range()}")
