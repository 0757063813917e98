"""XLA's own order on a module, as the environment's actions, and where an episode stands in it.

The order comes from one compile of XLA's default pipeline with every pass dumped
(`PassDriver.default_pipeline_changes`, cached): the runs that changed the module, in XLA's order,
each as the action that runs it as XLA does (its fixed-point variant when offered), a pass's unmet
requirement put first. Where an episode stands (`OrderCursor`): XLA's next pass is the order's first
entry at or after the cursor that can still do something here (an entry the mask forbids, or known to
leave the current module as it is, is passed over); taking it -- or its single run, or trying it and
failing -- moves the cursor past it. With `skip` (the environment's `xla_order_skip`), taking exactly
the action of one of the `skip` entries after it moves the cursor past that one: the entries between
are left out (a pass left out no longer holds the cursor, where every later step would be a departure
from it). Any other pass leaves the cursor where it is. Policies that
observe it (`observe_xla_order`) see XLA's next move on any module, their own or a user's.

Where XLA's order, followed through xlabench's canonical form, counts above D, the order is that of
the replay of XLA's pipeline pass by pass when the replay counts lower: on a TensorFlow cluster whose
conditional has constant branches, XLA's `constant_folding` folds its in-memory module to one op and
the imported module not at all, where the replay's `simplify-conditional` does (12 ops -> 1 = D).
That costs the replay (~130 single-pass compiles) on the graphs where it is needed.

Claims: a sequence's count runs every orderable pass it did not apply (`required-only`), on its final
module. XLA runs reduce-window-rewriter and reduce-window-resizer before the simplification loop, so
never on the reduce-windows `tree_reduction_rewriter` makes there; run on the final module they add a
reshape pair to each (eqx_transformer-train-l1-d64 f32: +16 ops over D). XLA ran such a pass without
a change, at its place: the order holds it there too (a claim, `claimed_passes`), a no-op that the
sequence applies so that the count does not run it again. The cursor never passes a claim over.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from xlabench.errors import CompilerError
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.compilers.pass_catalogue import base_pass
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline


def xla_order(driver: PassDriver, module: HloModule, actions: Sequence[str]) -> tuple[str, ...]:
    """XLA's order on `module` as actions of `actions` (passes it has no action for left out), claims
    included (`xla_order_and_claims`)."""
    return xla_order_and_claims(driver, module, actions)[0]


def xla_order_and_claims(
    driver: PassDriver, module: HloModule, actions: Sequence[str]
) -> tuple[tuple[str, ...], frozenset[str]]:
    """XLA's order on `module` as actions, its claims put at XLA's place, and the claims.

    Where that order, followed, counts above XLA's D and the replay of XLA's pipeline pass by pass
    (`xlabench.xla.diagnosis.pipeline_replay`) counts lower, the order is the replay's: the passes that
    changed the module there, in its order (see the module docstring).
    """
    target = driver.features(driver.run_default_pipeline(module)).op_count
    changes = [name for _, name in driver.default_pipeline_changes(module)]
    order, claims = _with_claims(driver, module, _as_actions(driver, changes, actions), actions)
    followed = _followed_count(driver, module, order)
    if followed <= target:
        return order, claims
    replay = replay_default_pipeline(driver, module)
    try:
        replayed = driver.fair_op_count(replay.module, replay.passes)
    except CompilerError:
        return order, claims
    if replayed >= followed:
        return order, claims
    effective = [key.split("@", 1)[0] for key in replay.effective]
    replay_order, replay_claims = _with_claims(
        driver, module, _as_actions(driver, effective, actions), actions
    )
    if _followed_count(driver, module, replay_order) >= followed:
        return order, claims
    return replay_order, replay_claims


def _as_actions(driver: PassDriver, passes: Sequence[str], actions: Sequence[str]) -> list[str]:
    """Passes XLA ran, in order, as actions: an unmet requirement first, a pass without an action left out."""
    catalogue = driver.catalogue
    order: list[str] = []
    for name in passes:
        required = catalogue.unmet_requirement(name, order)
        for pass_name in (required, name):
            if pass_name is None:
                continue
            action = catalogue.action_for(pass_name, list(actions))
            if action is not None:
                order.append(action)
    return order


def _with_claims(
    driver: PassDriver, module: HloModule, order: list[str], actions: Sequence[str]
) -> tuple[tuple[str, ...], frozenset[str]]:
    """`order` with its claims (`claimed_passes`) put at XLA's place, and the claims."""
    catalogue = driver.catalogue
    claims = claimed_passes(driver, module, order, actions)
    order = list(order)
    for claim in sorted(claims, key=lambda name: catalogue.passes[name].position):
        position = catalogue.passes[claim].position
        later = [i for i, name in enumerate(order) if catalogue.passes[base_pass(name)].position > position]
        order.insert(later[0] if later else len(order), claim)
    return tuple(order), frozenset(claims)


def _followed_count(driver: PassDriver, module: HloModule, order: Sequence[str]) -> float:
    """The count of `order` applied to `module` (a pass that fails is left out, as an episode would)."""
    applied: list[str] = []
    for name in order:
        try:
            module = driver.apply_action(module, name)[0]
        except CompilerError:
            continue
        applied.append(name)
    try:
        return driver.fair_op_count(module, applied)
    except CompilerError:
        return float("inf")


def claimed_passes(
    driver: PassDriver, module: HloModule, order: Sequence[str], actions: Sequence[str]
) -> list[str]:
    """The passes XLA ran without a change that its order must apply for XLA's own module to count
    as little as it can: the fewest of them that give the lowest count (none where the order alone
    counts as D, the common case: one compile).

    XLA's module after its pipeline, counted as the result of `order` (required-only), lands above
    D exactly when a pass XLA ran early is run again on it. Candidates: each orderable pass with one
    instance (XLA disables by name: a pass XLA adds twice stays on anyway), offered, not in `order`.
    """
    catalogue = driver.catalogue
    default = driver.run_default_pipeline(module)
    target = driver.features(default).op_count

    def count(claims: Sequence[str]) -> float:
        try:
            return driver.fair_op_count(default, [*order, *claims])
        except CompilerError:  # not countable so: no lower than anything (never a claim's reason)
            return float("inf")

    alone = count(())
    if alone <= target:
        return []
    enabled = set(catalogue.passes) - set(catalogue.disabled_for_required_only(order))
    taken = {base_pass(name) for name in order}
    candidates = [
        name
        for name in catalogue.candidate_passes()
        if name in enabled
        and name in actions
        and name not in taken
        and catalogue.passes[name].kind == "orderable"
        and len(catalogue.passes[name].instances) == 1
    ]
    lowest = count(candidates) if candidates else alone
    if lowest >= alone:
        return []
    # The fewest claims that keep the lowest count: drop halves, then quarters, ... while it holds.
    needed, chunk = list(candidates), max(1, len(candidates) // 2)
    while True:
        index = 0
        while index < len(needed):
            trial = needed[:index] + needed[index + chunk :]
            if count(trial) == lowest:
                needed = trial
            else:
                index += chunk
        if chunk == 1:
            return needed
        chunk = max(1, chunk // 2)


class OrderCursor:
    """An episode's place in XLA's order; `useless(action)` says an action can do nothing now."""

    def __init__(self, order: Sequence[str], claims: frozenset[str] = frozenset(), skip: int = 0) -> None:
        self.order = tuple(order)
        self.claims = claims  # no-ops a sequence must apply: never passed over as useless or left out
        self.skip = skip  # how many entries after XLA's next pass taking one may leave out
        self.position = 0  # entries before it are done (taken, or passed over when taking a later one)

    def next_index(self, useless: Callable[[str], bool], start: int | None = None) -> int:
        """The index of XLA's next pass that can still do something here (`len(order)`: none left)."""
        index = self.position if start is None else start
        while index < len(self.order) and self.order[index] not in self.claims and useless(self.order[index]):
            index += 1
        return index

    def step(self, pass_name: str, useless: Callable[[str], bool]) -> None:
        """The episode ran (or tried) `pass_name`: past XLA's next pass if it is that pass (or its single
        run), past one of the `skip` entries after it if it is exactly that action (never leaving out a
        claim), else as before."""
        index = self.next_index(useless)
        if index < len(self.order) and base_pass(self.order[index]) == base_pass(pass_name):
            self.position = index + 1
            return
        # The entries after XLA's next pass, useless here or not: what is useless on this module may not
        # be after the pass left out would have run (on a TensorFlow MLP step, `cse` taken where XLA's
        # next was `algsimp`, `dce` and `constant_folding` useless before it: 248 -> 262 ops).
        # Exactly: a single run taken where XLA iterates a pass (the policy's own departures on a while
        # loop's body) leaves nothing of XLA's order out.
        for later in range(index + 1, min(index + 1 + self.skip, len(self.order))):
            if any(name in self.claims for name in self.order[index:later]):
                return
            if self.order[later] == pass_name:
                self.position = later + 1
                return

    def observed(self, actions: Sequence[str], useless: Callable[[str], bool]) -> tuple[int, int, int]:
        """(XLA's next action, or `len(actions)` (stop) past the order's end; its index; the length)."""
        index = self.next_index(useless)
        action = actions.index(self.order[index]) if index < len(self.order) else len(actions)
        return action, index, len(self.order)
