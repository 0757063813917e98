"""XLA's own order on a module, as the environment's actions, and where an episode stands in it.

The order comes from one compile of XLA's default pipeline with every pass dumped
(`PassDriver.default_pipeline_changes`, cached): the runs that changed the module, in XLA's order,
each as the action that runs it as XLA does (its fixed-point variant when offered), a pass's unmet
requirement put first. Where an episode stands (`OrderCursor`): XLA's next pass is the order's first
entry at or after the cursor that can still do something here (an entry the mask forbids, or known to
leave the current module as it is, is passed over); taking it -- or its single run, or trying it and
failing -- moves the cursor past it, and any other pass leaves the cursor where it is. Policies that
observe it (`observe_xla_order`) see XLA's next move on any module, their own or a user's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xlabench.xla import HloModule, PassDriver
from xlabench.xla.catalogue import base_pass


def xla_order(driver: PassDriver, module: HloModule, actions: Sequence[str]) -> tuple[str, ...]:
    """XLA's order on `module` as actions of `actions` (passes it has no action for left out)."""
    catalogue = driver.catalogue
    order: list[str] = []
    for _, name in driver.default_pipeline_changes(module):
        required = catalogue.unmet_requirement(name, order)
        for pass_name in (required, name):
            if pass_name is None:
                continue
            action = catalogue.action_for(pass_name, list(actions))
            if action is not None:
                order.append(action)
    return tuple(order)


class OrderCursor:
    """An episode's place in XLA's order; `useless(action)` says an action can do nothing now."""

    def __init__(self, order: Sequence[str]) -> None:
        self.order = tuple(order)
        self.position = 0  # entries before it are done (taken, or passed over when taking a later one)

    def next_index(self, useless: Callable[[str], bool]) -> int:
        """The index of XLA's next pass that can still do something here (`len(order)`: none left)."""
        index = self.position
        while index < len(self.order) and useless(self.order[index]):
            index += 1
        return index

    def step(self, pass_name: str, useless: Callable[[str], bool]) -> None:
        """The episode ran (or tried) `pass_name`: past XLA's next pass if it is that pass, else as before."""
        index = self.next_index(useless)
        if index < len(self.order) and base_pass(self.order[index]) == base_pass(pass_name):
            self.position = index + 1

    def observed(self, actions: Sequence[str], useless: Callable[[str], bool]) -> tuple[int, int, int]:
        """(XLA's next action, or `len(actions)` (stop) past the order's end; its index; the length)."""
        index = self.next_index(useless)
        action = actions.index(self.order[index]) if index < len(self.order) else len(actions)
        return action, index, len(self.order)
