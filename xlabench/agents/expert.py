"""The expert a warm start imitates: XLA's own effective order on a graph, improved by hill climbing.

`expert_order` reads the order from one compile of XLA's default pipeline; `improve_order` edits it
while that lowers the fair count and keeps the outputs numerically no worse; `expert_action` says
what the order does next from any state a policy reaches (DAgger's label when XLA's order is not
observed; `xlabench.agents.imitation.followed_label` when it is); `with_tries` and
`with_single_runs` adjust the orders to what a policy can see.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from xlabench.env.xla_order import xla_order_and_claims
from xlabench.errors import CompilerError
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.compilers.pass_catalogue import base_pass
from xlabench.xla.driver.execution import judge_sequence


def expert_order(driver: PassDriver, env: Any) -> list[str]:
    """XLA's effective order on the environment's current (raw) module, as its action names.

    From one compile of XLA's default pipeline (`PassDriver.default_pipeline_changes`). Between
    xlabench's passes the module goes through the canonical form, where some of XLA's changes are
    no-ops (the call graph is already flat, ...): the order is played in `env` and what leaves the
    module unchanged is left out, unless another pass requires it or the order claims it
    (`xla_order.claimed_passes`; so is a fixed-point variant's repeat: its first application ran the
    pass to its fixed point). `env` is left at the order's end.
    """
    assert env.module is not None
    catalogue = driver.catalogue
    # A pass whose requirement did nothing in XLA's run still needs it first; with fixed-point
    # variants as actions, XLA's run of a pass is its variant's.
    order, claims = xla_order_and_claims(driver, env.module, env.actions)
    effective: list[str] = []
    for name in order:
        if len(effective) == env.max_steps - 1:
            break
        before = env.module.fingerprint
        env.step(env.actions.index(name))
        if name in claims or catalogue.worth_taking(name, env.module.fingerprint != before):
            effective.append(name)
    return effective


def improve_order(
    driver: PassDriver,
    module: HloModule,
    order: list[str],
    candidates: list[str],
    budget: int,
    max_length: int,
    insertions: Sequence[str] = (),
) -> tuple[list[str], int]:
    """Hill-climb from an order: keep a one-pass edit that lowers the fair count R and leaves the outputs
    numerically no worse than XLA's default executable's, until none does.

    The edits: append one of `candidates` (XLA's passes on this graph), drop one pass, or insert one
    of `insertions` before a pass, the last positions first -- their suffix to re-apply is short.
    Outputs are judged as `search:local` judges them (`judge_sequence`: on bf16 and narrower, against
    the module lifted to f32, where XLA's default is not the most accurate answer either): an edit
    ahead of float normalization is kept where its numerics are no worse, not refused by position.
    `budget` bounds the compiler calls (pass applications past the unchanged prefix, counts, checks).
    XLA's order is a strong start, not an optimum: on the CG loops of the suite, sequences exist
    whose result has 5% fewer ops than XLA's.
    Returns the order and its R.
    """
    catalogue = driver.catalogue
    spent = 0

    def evaluate(start: HloModule, suffix: list[str], sequence: list[str]) -> tuple[HloModule, int] | None:
        """The module after `suffix` from `start` and the fair count of `sequence`; None if out of budget."""
        nonlocal spent
        current = start
        for name in suffix:
            if spent >= budget:
                return None
            try:
                following, calls = driver.apply_action(current, name)
            except CompilerError:
                spent += 1
                return None
            spent += calls
            # A pass that changes nothing here stays, as in the episode that follows XLA's order: its
            # claims and no-ops are played too, and an edit upstream is judged by what it leads to.
            current = following
        if spent >= budget:
            return None
        spent += 1
        try:
            return current, driver.fair_op_count(current, sequence)
        except CompilerError:
            return None

    prefixes = [module]  # prefixes[i]: the module after order[:i]
    for name in order:
        prefixes.append(driver.apply_pass(prefixes[-1], name))
    best = driver.fair_op_count(prefixes[-1], order)
    improved = True
    while improved and spent < budget:
        improved = False
        edits = [(len(order), [name]) for name in candidates if len(order) < max_length]
        positions = list(reversed(range(len(order))))
        edits += [(i, order[i + 1 :]) for i in positions]
        if len(order) < max_length:
            edits += [(i, [name, *order[i:]]) for i in positions for name in insertions]
        for position, suffix in edits:
            sequence = order[:position] + suffix
            if not _requirements_met(catalogue, sequence):
                continue
            result = evaluate(prefixes[position], suffix, sequence)
            if result is not None and result[1] < best and spent < budget:
                spent += 1  # the output check: the sequence's executable
                try:
                    verdict, _ = judge_sequence(module, result[0], sequence, driver=driver)
                except CompilerError:
                    continue
                if verdict.problems:
                    continue  # fewer ops, numerically worse: not an improvement
                order, best, improved = sequence, result[1], True
                prefixes = prefixes[: position + 1]
                for name in suffix:
                    prefixes.append(driver.apply_pass(prefixes[-1], name))
                break
            if spent >= budget:
                break
    return order, best


def previous_start(
    driver: PassDriver, module: HloModule, order: list[str], order_count: int, previous: list[str], env: Any
) -> list[str]:
    """Where the version before's sequence beats `order` (R `order_count`) on `module`: the order
    nearest XLA's that does as well, else that sequence; elsewhere `order`.

    The sequence counts only where it is one of the environment's actions within its step cap, every
    pass's requirement met, its R lower, and its outputs numerically no worse than XLA's default's (as
    `improve_order` judges an edit): a new version is held to the one before, so it is shown what that
    one did better, not what it did worse. What is shown is `order` without as few as possible of the
    passes the sequence never ran (`_dropped_to`), where that reaches the sequence's R: the sequence
    itself departs from XLA's next pass at nearly every step (v2.0's never runs `dce`), and a policy
    shown those departures takes them on modules they do not fit (an XLA fuzz module full of dead code).
    """
    catalogue = driver.catalogue
    if len(previous) > env.max_steps - 1 or any(name not in env.actions for name in previous):
        return order
    if any(catalogue.unmet_requirement(name, previous[:i]) is not None for i, name in enumerate(previous)):
        return order

    def outcome(sequence: list[str]) -> tuple[int, HloModule] | None:
        return _outcome(driver, module, sequence)

    def no_worse(sequence: list[str], result: HloModule) -> bool:
        try:
            verdict, _ = judge_sequence(module, result, sequence, driver=driver)
        except CompilerError:
            return False
        return not verdict.problems

    reached = outcome(previous)
    if reached is None or reached[0] >= order_count or not no_worse(previous, reached[1]):
        return order
    nearest = _dropped_to(order, previous, reached[0], outcome)
    if nearest is not None:
        result = outcome(nearest)
        if result is not None and no_worse(nearest, result[1]):
            return nearest
    return previous


def following_dce(env: Any, graph_name: str, order: list[str]) -> list[str]:
    """`order` with `dce` played wherever it is XLA's next pass and `order` does not play it, where
    that keeps its count and step cap; `env` fresh, as the one the demonstration is played in (an
    environment that played the graph has learnt where passes change nothing, and its `xla_next` skips them).

    Removing dead code never has to be refused: an improved order leaves a `dce` out only because a
    later pass removes the same code. Shown so, the policy learnt to depart from `dce` and refused it
    on an XLA fuzz module full of dead code (0.616).
    """
    observation, _ = env.reset(seed=0, options={"graph": graph_name})
    dce = env.actions.index("dce") if "dce" in env.actions else None
    played: list[str] = []
    pending = list(order)
    done = False
    while not done and (pending or dce is not None):
        following = (
            int(np.argmax(observation["xla_next"])) == dce
            and (not pending or pending[0] != "dce")
            and (not played or played[-1] != "dce")
        )
        if not following and not pending:
            break
        name = "dce" if following else pending.pop(0)
        played.append(name)
        observation, _, terminated, truncated, _ = env.step(env.actions.index(name))
        done = terminated or truncated
    if pending or len(played) > env.max_steps - 1 or played == order:
        return order
    start = env.graph_start(graph_name).module
    shown, kept = _outcome(env.driver, start, played), _outcome(env.driver, start, order)
    return played if shown is not None and kept is not None and shown[0] <= kept[0] else order


def following_where_free(driver: PassDriver, env: Any, graph_name: str, order: list[str]) -> list[str]:
    """`order` with XLA's next pass played first wherever that keeps its count (or lowers it), the
    step cap and its outputs numerically no worse than XLA's default's; `env` fresh, as the one the
    demonstration is played in.

    A sequence found by search departs from XLA's next pass where nothing asked it to: v2.0's
    Newton-CG sequence leaves `reduce-window-rewriter` (XLA's next after the inlining) for `algsimp`,
    and a policy shown that took the same departure on an XLA fuzz module (0.60). Followed where
    free, that sequence takes XLA's order for 16 steps and then its own tail, and counts 268, not 271.
    """
    if any(name not in env.actions for name in order):
        return order
    start = env.graph_start(graph_name).module

    def outcome(sequence: list[str]) -> tuple[int, HloModule] | None:
        return _outcome(driver, start, sequence)

    reached = outcome(order)
    if reached is None:
        return order
    best = reached[0]
    observation, _ = env.reset(seed=0, options={"graph": graph_name})
    played: list[str] = []
    pending = list(order)
    tried: set[tuple[int, int]] = set()
    while pending and len(played) < env.max_steps - 1:
        following = int(np.argmax(observation["xla_next"]))
        if (
            following != env.stop_action
            and env.actions[following] != pending[0]
            and (len(played), following) not in tried
        ):
            tried.add((len(played), following))
            candidate = [*played, env.actions[following], *pending]
            result = outcome(candidate) if len(candidate) <= env.max_steps - 1 else None
            if result is not None and result[0] <= best:
                best = result[0]
                played.append(env.actions[following])
                observation, *_ = env.step(following)
                continue
        name = pending.pop(0)
        played.append(name)
        observation, *_ = env.step(env.actions.index(name))
    if pending or played == order:
        return order
    result = outcome(played)
    if result is None or result[0] > reached[0]:
        return order
    try:
        verdict, _ = judge_sequence(start, result[1], played, driver=driver)
    except CompilerError:
        return order
    return order if verdict.problems else played


def _outcome(driver: PassDriver, module: HloModule, sequence: list[str]) -> tuple[int, HloModule] | None:
    """R of `sequence` on `module`, and the module it ends on; None where a pass fails or a requirement
    is unmet."""
    if not _requirements_met(driver.catalogue, sequence):
        return None
    try:
        for name in sequence:
            module, _ = driver.apply_action(module, name)
        return driver.fair_op_count(module, sequence), module
    except CompilerError:
        return None


def _requirements_met(catalogue: Any, sequence: list[str]) -> bool:
    """Whether every pass of `sequence` has the pass it requires before it."""
    return all(catalogue.unmet_requirement(name, sequence[:i]) is None for i, name in enumerate(sequence))


def _dropped_to(order: list[str], previous: list[str], target: int, outcome: Any) -> list[str] | None:
    """`order` without the fewest passes absent from `previous` (all runs of each) that counts at most
    `target`: one pass if one does, else all of them, then each put back while the count holds."""
    ran = {base_pass(name) for name in previous}
    absent = list(dict.fromkeys(base_pass(name) for name in order if base_pass(name) not in ran))

    def without(dropped: set[str]) -> list[str]:
        return [name for name in order if base_pass(name) not in dropped]

    def reaches(dropped: set[str]) -> bool:
        result = outcome(without(dropped))
        return result is not None and result[0] <= target

    for name in absent:
        if reaches({name}):
            return without({name})
    dropped = set(absent)
    if not absent or not reaches(dropped):
        return None
    for name in absent:
        if reaches(dropped - {name}):
            dropped.discard(name)
    return without(dropped)


def expert_action(order: list[str], sequence: list[str], mask: np.ndarray, actions: list[str]) -> int:
    """What XLA's order says to do after `sequence`: its first pass not yet done in order and allowed.

    The sequence is matched against the order as a subsequence (greedily, skipping): a pass the
    policy left out stays to do, a pass it applied out of order is done again at its place; with
    nothing left, *stop*. Along the order itself this is the order's next pass.
    """
    done = [False] * len(order)
    position = 0
    for name in sequence:
        for index in range(position, len(order)):
            if order[index] == name:
                done[index], position = True, index + 1
                break
    for index, name in enumerate(order):
        if not done[index] and mask[actions.index(name)]:
            return actions.index(name)
    return len(actions)


def passes_worth_trying(orders: dict[str, list[str]], share: float) -> list[str]:
    """The passes in at least `share` of the orders: the ones a policy tries even where XLA's did nothing."""
    counts: dict[str, int] = {}
    for order in orders.values():
        for name in set(order):
            counts[name] = counts.get(name, 0) + 1
    return sorted(name for name, count in counts.items() if count >= share * len(orders))


def with_tries(order: list[str], tries: list[str], actions: list[str], catalogue: Any) -> list[str]:
    """The order with each pass of `tries` it lacks put at its place in the pipeline.

    Its place: before the order's first pass that comes later in XLA's pipeline (actions are in
    pipeline order). A policy cannot see whether such a pass would change the module; trying it
    costs one call, leaving it out where it would have changed the module costs ops.
    """
    result = list(order)
    for name in sorted(tries, key=actions.index):
        if name in result:
            continue
        index = actions.index(name)
        at = next((i for i, other in enumerate(result) if actions.index(other) > index), len(result))
        if catalogue.unmet_requirement(name, result[:at]) is None:
            result.insert(at, name)
    return result


def with_single_runs(orders: dict[str, list[str]], env: Any) -> dict[str, list[str]]:
    """The orders with each fixed-point variant taken as its single run where that costs no more.

    Played in `env` from each graph's start. A variant whose loop took two runs (one that changed
    the module, one that found nothing) becomes the single run: the same module, one call less. One
    that changed nothing costs a run either way; it takes the form its pass has most often in the
    orders, so a policy learns one form a pass, not whether it will change the module. Without
    single runs among the environment's actions, the orders as they are.
    """
    if not any(base_pass(name) != name and base_pass(name) in env.actions for name in env.actions):
        return orders  # nothing to replay the orders for
    runs: dict[str, list[int]] = {}
    for graph_name, order in orders.items():
        env.reset(seed=0, options={"graph": graph_name})
        runs[graph_name] = []
        for name in order:
            _, _, _, _, info = env.step(env.actions.index(name))
            runs[graph_name].append(info["calls"])
    votes: dict[str, int] = {}  # > 0: the single run more often than the variant
    for graph_name, order in orders.items():
        for name, calls in zip(order, runs[graph_name], strict=True):
            if base_pass(name) != name and calls >= 2:
                votes[name] = votes.get(name, 0) + (1 if calls == 2 else -1)
    result = {}
    for graph_name, order in orders.items():
        result[graph_name] = []
        for name, calls in zip(order, runs[graph_name], strict=True):
            single = base_pass(name)
            cheaper = calls == 2 or (calls < 2 and votes.get(name, 0) > 0)
            offered = single != name and single in env.actions
            result[graph_name].append(single if offered and cheaper else name)
    return result
