"""A simulated compiler change: passes turned off in every compile a driver makes.

Set per driver (`disabled_passes`), else by the settings (`XLABENCH_DISABLE_PASSES=algsimp,cse`,
`--xlabench-disable-pass`; `xlabench.settings`):
the default pipeline, the required passes and the executables all run without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from xlabench.xla.compilers.pass_catalogue import PassCatalogue
from xlabench.xla.compilers.pass_names import check_disablable

# Passes to turn off in every compile (comma-separated): a simulated compiler change.
DISABLE_PASSES_VARIABLE = "XLABENCH_DISABLE_PASSES"


class CompilerChange:
    """Passes off in every compile, added to each compiler call's disabled lists (checked on first use)."""

    def __init__(self, disabled_passes: Iterable[str], catalogue: Callable[[], PassCatalogue]) -> None:
        self.disabled_passes: tuple[str, ...] = tuple(dict.fromkeys(disabled_passes))
        self._catalogue = catalogue  # called only when there is a change to check
        self._checked = not self.disabled_passes

    def check(self) -> None:
        """Raise UnknownPassError unless every pass of the change is in the catalogue."""
        if not self._checked:
            check_disablable(self._catalogue(), self.disabled_passes)
            self._checked = True

    def apply(self, arguments: dict[str, Any]) -> dict[str, Any]:
        """Compiler-call arguments with the change's passes added to every disabled list."""
        if not self.disabled_passes:
            return arguments
        self.check()
        changed = dict(arguments)
        if "disabled_passes" in changed:
            changed["disabled_passes"] = self._add(changed["disabled_passes"])
        if "others" in changed:  # further programs compiled in the same call: (text, disabled passes)
            changed["others"] = [(text, self._add(disabled)) for text, disabled in changed["others"]]
        return changed

    def _add(self, disabled: list[str]) -> list[str]:
        """`disabled` plus the change's passes, in order."""
        # Already off (a single-pass compile turns off all but one pass): the very same compile, and
        # its cache key stays valid across the change.
        if set(self.disabled_passes) <= set(disabled):
            return disabled
        return list(dict.fromkeys([*disabled, *self.disabled_passes]))
