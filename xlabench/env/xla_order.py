"""XLA's own order on a module, as the environment's actions, and where an episode stands in it.

The order comes from one compile of XLA's default pipeline with every pass dumped
(`PassDriver.default_pipeline_changes`, cached): the runs that changed the module, in XLA's order,
each as the action that runs it as XLA does (its fixed-point variant when offered), a pass's unmet
requirement put first. Where an episode stands: the sequence so far matched against the order as a
subsequence, greedily; the next pass is the order's first after the last one matched, so a pass the
policy skipped stays skipped and a pass it added does not move the cursor. Policies that observe it
(`observe_xla_order`) see XLA's next move on any module, their own or a user's.
"""

from __future__ import annotations

from collections.abc import Sequence

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


def cursor(order: Sequence[str], sequence: Sequence[str]) -> int:
    """How far `sequence` has come along `order`: the index after its last pass matched in order (a
    single run matches its pass's fixed-point variant: the same pass, run once)."""
    position = 0
    for name in sequence:
        for index in range(position, len(order)):
            if base_pass(order[index]) == base_pass(name):
                position = index + 1
                break
    return position


def next_action(order: Sequence[str], sequence: Sequence[str], actions: Sequence[str]) -> int:
    """The action XLA's order takes next after `sequence` (the stop action, `len(actions)`, at its end)."""
    position = cursor(order, sequence)
    return actions.index(order[position]) if position < len(order) else len(actions)
