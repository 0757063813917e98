"""Search baselines over pass sequences: random, greedy (one-step lookahead), beam, XLA's own order, and
local search (hill climbing from XLA's order).

Every strategy starts from a graph's raw module, scores a sequence by its fair count R (the module
after the sequence, taken through XLA's required passes: `PassDriver.fair_op_count`, the count D is
measured with) and stops when its budget of compiler calls is spent, or at once when its `cancel`
event is set (returning the best found so far). A *call* is one transition asked
of the driver -- applying a pass, or counting a module -- whether the transition cache answers it or
XLA does; `seconds` is the wall time, which the cache makes cheaper on revisits.

Only passes that change the module are taken. On a given module most of the 72 actions do nothing
(9 of 72 change a raw GPT-2 step), and counting is the dear call (about 4x a pass application):
a no-op costs its one call and no count. This also leaves out sequences that spend an orderable pass
where it does nothing, which would skip its required run at the end. The exception is a pass another
one requires earlier in the sequence (`PassCatalogue.requirements`); a pass whose requirement is not
in the sequence yet is not tried (no call).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from xlabench.env.xla_order import xla_order_and_claims
from xlabench.errors import CompilerError, UserInputError
from xlabench.xla import HloModule, PassDriver
from xlabench.xla.compilers.pass_catalogue import base_pass, inapplicable
from xlabench.xla.diagnosis.pipeline_replay import replay_default_pipeline
from xlabench.xla.driver.execution import judge_sequence

DEFAULT_BUDGET = 2000
DEFAULT_MAX_LENGTH = 30
_UNCHARGED = 10**9  # the budget of transitions already paid for


@dataclass
class SearchResult:
    """The best sequence a strategy found on one module, and what finding it cost."""

    strategy: str
    sequence: list[str]
    op_count: int  # R of `sequence`
    calls: int
    seconds: float
    applied: list[str] = field(default_factory=list)  # instance keys, for fair counting
    module: HloModule | None = field(default=None, repr=False, compare=False)  # after `sequence`
    depth: int | None = None  # beam search: how many levels it expanded within the budget


class _Budget:
    """Counts compiler calls; `spend` answers False once the budget is gone or the search is cancelled."""

    def __init__(self, calls: int, cancel: threading.Event | None = None) -> None:
        if calls < 1:
            raise UserInputError(f"a search budget needs at least one compiler call, not {calls}")
        self.limit, self.used, self.cancel = calls, 0, cancel

    def spend(self, calls: int = 1) -> bool:
        if self.used + calls > self.limit or (self.cancel is not None and self.cancel.is_set()):
            return False
        self.used += calls
        return True

    def record(self, calls: int) -> bool:
        """Count calls already made (a fixed-point variant's further runs); False if that overspent."""
        self.used += calls
        return self.used <= self.limit

    def left(self) -> int:
        if self.cancel is not None and self.cancel.is_set():
            return 0
        return self.limit - self.used


@dataclass(frozen=True)
class _State:
    module: HloModule
    sequence: tuple[str, ...]
    op_count: int


def _expand(driver: PassDriver, state: _State, pass_name: str, budget: _Budget) -> _State | None:
    """The state after one more pass, fairly counted; None when the budget is out, the pass fails
    or it changes nothing."""
    catalogue = driver.catalogue
    if catalogue.unmet_requirement(pass_name, state.sequence) is not None or not budget.spend(1):
        return None
    try:
        module, calls = driver.apply_action(state.module, pass_name)
        unchanged = module.fingerprint == state.module.fingerprint
        within_budget = budget.record(calls - 1)  # the first run was spent above
        if not catalogue.worth_taking(pass_name, not unchanged):
            return None  # most passes do nothing to a given module: not taken, and not counted
        if not within_budget or not budget.spend(1):
            return None
        sequence = (*state.sequence, pass_name)
        return _State(module, sequence, driver.fair_op_count(module, sequence))
    except CompilerError:
        return None  # XLA rejects the pass here: that branch is simply not taken


def _state_key(driver: PassDriver, state: _State) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    """What a state's future depends on: its module, which passes its required run still has, and
    which requirements of other passes its sequence has met."""
    catalogue = driver.catalogue
    met = catalogue.requirements().intersection(key.split("@", 1)[0] for key in state.sequence)
    return (
        state.module.fingerprint,
        tuple(catalogue.disabled_for_required_only(state.sequence)),
        tuple(sorted(met)),
    )


def _rank(state: _State) -> tuple[int, int, tuple[str, ...]]:
    """Order of preference: lower count, then shorter, then alphabetical (deterministic ties)."""
    return state.op_count, len(state.sequence), state.sequence


def _start(driver: PassDriver, module: HloModule, budget: _Budget) -> _State:
    budget.spend(1)
    return _State(module, (), driver.fair_op_count(module))


def random_search(
    driver: PassDriver,
    module: HloModule,
    actions: list[str],
    budget: int = DEFAULT_BUDGET,
    max_length: int = DEFAULT_MAX_LENGTH,
    seed: int = 0,
    cancel: threading.Event | None = None,
) -> SearchResult:
    """Random walks of random length up to `max_length` from the raw module; keep the best prefix seen."""
    started, calls = time.perf_counter(), _Budget(budget, cancel)
    generator = np.random.default_rng(seed)
    start = _start(driver, module, calls)
    best = start
    while calls.left() >= 2:
        state = start
        for _ in range(int(generator.integers(1, max_length + 1))):
            following = _expand(driver, state, actions[int(generator.integers(len(actions)))], calls)
            if following is None:
                if calls.left() < 2:
                    break
                continue
            state = following
            if state.op_count < best.op_count:
                best = state
    return _result("random", best, calls, started)


def greedy_search(
    driver: PassDriver,
    module: HloModule,
    actions: list[str],
    budget: int = DEFAULT_BUDGET,
    max_length: int = DEFAULT_MAX_LENGTH,
    cancel: threading.Event | None = None,
) -> SearchResult:
    """One-step lookahead: apply whichever action lowers R most; stop when none does."""
    started, calls = time.perf_counter(), _Budget(budget, cancel)
    state = _start(driver, module, calls)
    while len(state.sequence) < max_length:
        candidates = [_expand(driver, state, name, calls) for name in actions]
        better = [c for c in candidates if c is not None and c.op_count < state.op_count]
        if not better:
            break
        state = min(better, key=_rank)
    return _result("greedy", state, calls, started)


def beam_search(
    driver: PassDriver,
    module: HloModule,
    actions: list[str],
    budget: int = DEFAULT_BUDGET,
    max_length: int = DEFAULT_MAX_LENGTH,
    width: int = 5,
    cancel: threading.Event | None = None,
) -> SearchResult:
    """Keep the `width` best distinct modules at each depth, expand each by every action."""
    started, calls = time.perf_counter(), _Budget(budget, cancel)
    start = _start(driver, module, calls)
    best, beam, depth = start, [start], 0
    for _ in range(max_length):
        expanded: dict[tuple[str, tuple[str, ...], tuple[str, ...]], _State] = {}
        for state in beam:
            for name in actions:
                following = _expand(driver, state, name, calls)
                if following is None:
                    continue
                key = _state_key(driver, following)
                if key not in expanded or _rank(following) < _rank(expanded[key]):
                    expanded[key] = following
        if not expanded:
            break
        beam, depth = sorted(expanded.values(), key=_rank)[:width], depth + 1
        if beam[0].op_count < best.op_count:
            best = beam[0]
        if calls.left() < 2:
            break
    return replace(_result("beam", best, calls, started), depth=depth)


def replay_search(driver: PassDriver, module: HloModule) -> SearchResult:
    """XLA's own default order, pass by pass (`replay_default_pipeline`): the reference strategy."""
    started = time.perf_counter()
    replay = replay_default_pipeline(driver, module)
    op_count = driver.fair_op_count(replay.module, replay.passes)
    calls = _Budget(replay.applications + 1)
    calls.used = replay.applications + 1
    state = _State(replay.module, tuple(replay.passes), op_count)
    return _result("replay", state, calls, started)


def _play(
    driver: PassDriver,
    module: HloModule,
    sequence: list[str],
    budget: _Budget,
    before: tuple[str, ...] = (),
    claims: frozenset[str] = frozenset(),
    first_counts: bool = False,
    known_no_ops: bool = False,
) -> tuple[HloModule, list[str], bool]:
    """Apply `sequence` to `module` (the module after the passes `before`), leaving out what changes
    nothing (unless another pass requires it or XLA's order claims it: `xla_order.claimed_passes`);
    the module, the passes kept, and whether every pass was
    applied (False: a pass failed, or the budget ran out, keeping one call to count the result). A
    fixed-point action's further runs are charged once they ran: its loop can end past the budget.
    With `first_counts`, the sequence's first pass must count: left out, the play stops there (False).
    With `known_no_ops`, a pass none of whose opcodes is in the module is taken as changing nothing,
    without a call (as the environment steps over it)."""
    catalogue, kept = driver.catalogue, []
    for name in sequence:
        if catalogue.unmet_requirement(name, [*before, *kept]) is not None:
            if first_counts and not kept:
                return module, kept, False
            continue
        if budget.left() < 2:
            return module, kept, False
        if known_no_ops and inapplicable(name, driver.features(module).histogram):
            following = module
        else:
            budget.spend(1)
            try:
                following, calls = driver.apply_action(module, name)
            except CompilerError:
                return module, kept, False
            budget.record(calls - 1)
        if name in claims or catalogue.worth_taking(name, following.fingerprint != module.fingerprint):
            module, kept = following, [*kept, name]
        elif first_counts and not kept:
            return module, kept, False
    return module, kept, True


Edit = tuple[int, tuple[str, ...]]  # (the first position an edit changes, the sequence after it)


def _moves(sequence: tuple[str, ...], counts: list[int]) -> list[Edit]:
    """For each pass that added instructions, largest addition first, the nearest later pass that
    removed some moved in front of it (`counts[i]`: the op count after `sequence[:i]`).

    An expanding pass (a conversion, a lowering, an inliner) hands every later pass more to work on: the
    simplifier that runs first shrinks what it expands. On bf16 training steps `algsimp` before
    `float-normalization-bf16` is most of the best-known improvement over XLA's order (docs/design.md,
    "Where guided search looks first").
    """
    deltas = [after - before for before, after in zip(counts, counts[1:], strict=False)]
    adders = sorted((i for i, delta in enumerate(deltas) if delta > 0), key=lambda i: (-deltas[i], -i))
    moves = []
    for i in adders:
        j = next((k for k in range(i + 1, len(deltas)) if deltas[k] < 0), None)
        if j is not None:
            moves.append((i, (*sequence[:i], sequence[j], *sequence[i:j], *sequence[j + 1 :])))
    return moves


def _edits(
    sequence: tuple[str, ...], actions: list[str], max_length: int, counts: list[int] | None = None
) -> list[Edit]:
    """Every one-pass edit of a sequence: first, given the op count after each prefix (`counts`), a
    pass that removed instructions moved before one that added them (`_moves`); then cheapest first, a
    loop replaced by its single run, a pass dropped, two neighbours swapped, a pass inserted -- each from
    the end, where the suffix to apply again is shortest."""
    positions = list(reversed(range(len(sequence))))
    edits = _moves(sequence, counts) if counts is not None else []
    loops = [i for i in positions if (single := base_pass(sequence[i])) != sequence[i] and single in actions]
    edits += [(i, (*sequence[:i], base_pass(sequence[i]), *sequence[i + 1 :])) for i in loops]
    edits += [(i, sequence[:i] + sequence[i + 1 :]) for i in positions]
    edits += [(i, (*sequence[:i], sequence[i + 1], sequence[i], *sequence[i + 2 :])) for i in positions[1:]]
    if len(sequence) < max_length:
        edits += [
            (i, (*sequence[:i], name, *sequence[i:]))
            for i in range(len(sequence), -1, -1)
            for name in actions
        ]
    return edits  # fmt: skip


def local_search(
    driver: PassDriver,
    module: HloModule,
    actions: list[str],
    budget: int = DEFAULT_BUDGET,
    max_length: int = DEFAULT_MAX_LENGTH,
    cancel: threading.Event | None = None,
    start: SearchResult | None = None,
) -> SearchResult:
    """Hill climbing from XLA's own order (or from `start`, a sequence already found and counted): take
    the first one-pass edit (`_edits`) that lowers R and whose outputs are numerically no worse than XLA's
    default executable's (`judge_sequence`, against a higher-precision reference on low-precision
    modules), until no edit does or the budget is spent.

    Calls: XLA's order costs one (one compile of the default pipeline), each pass application one, each
    count one, each output check one (the sequence's executable; the default's is compiled once). A
    `start`'s own transitions were charged where it was found, and are not again. An edit is begun only
    if its suffix, as it last ran, fits in what is left; a fixed-point loop that runs longer after the
    edit can still end past the budget.
    """
    started, calls = time.perf_counter(), _Budget(budget, cancel)
    if start is None:
        calls.spend(1)
    xla, claims = xla_order_and_claims(driver, module, actions)  # cached where a policy observed it
    # Played again without what changed nothing there: a rollout keeps such steps, and an edit is only
    # comparable on a sequence whose every pass counts. A start's transitions were charged where it was
    # found (`start.calls`), so playing them again is not; XLA's order is played at this search's cost.
    if start is not None and start.module is not None:
        order = list(start.applied or start.sequence)
        # As the environment that found it: a pass with nothing to rewrite is not applied (no call).
        played, kept, _ = _play(driver, module, order, _Budget(_UNCHARGED), claims=claims, known_no_ops=True)
        if kept == order and played.fingerprint == start.module.fingerprint:
            best = _State(played, tuple(kept), start.op_count)
        else:
            calls.record(1)  # the count of the sequence without its no-ops
            best = _State(played, tuple(kept), driver.fair_op_count(played, kept))
    else:
        order = list(start.applied or start.sequence) if start is not None else list(xla)
        played, kept, _ = _play(driver, module, order, calls, claims=claims)
        calls.record(1)  # the count, charged even where a fixed-point loop used the last call
        best = _State(played, tuple(kept), driver.fair_op_count(played, kept))
    if start is not None and start.module is not None and start.op_count < best.op_count:
        best = _State(start.module, tuple(start.applied or start.sequence), start.op_count)
    tried = {best.sequence}
    improved = True
    while improved and calls.left() >= 2:
        improved = False
        prefixes = [module]  # prefixes[i]: the module after best.sequence[:i], all cached transitions
        runs = []  # runs[i]: what applying best.sequence[i] there costs (a fixed-point loop: its runs)
        for name in best.sequence:
            following, ran = driver.apply_action(prefixes[-1], name)
            prefixes.append(following)
            runs.append(ran)
        # The search's driver remembers each transition's features: no call.
        counts = [driver.features(prefix).op_count for prefix in prefixes]
        for position, sequence in _edits(best.sequence, actions, max_length, counts):
            if calls.left() < 2:
                break
            if sequence in tried:
                continue
            if sum(runs[position:]) + 3 > calls.left():
                continue  # its suffix, a pass more, the count and the output check would overrun the budget
            tried.add(sequence)
            suffix, before = list(sequence[position:]), sequence[:position]
            after, kept_suffix, complete = _play(
                driver, prefixes[position], suffix, calls, before, claims, first_counts=True
            )
            if not complete:
                continue  # a pass failed, the budget ran out, or the suffix's first pass changed nothing
            if kept_suffix != suffix:
                # A later pass changed nothing after the edit, or lost its requirement (moving algsimp
                # ahead of float normalization can leave a second loop nothing to do): the edit without it.
                sequence = (*before, *kept_suffix)
                if sequence in tried:
                    continue
                tried.add(sequence)
            if not calls.spend(1):
                continue
            count = driver.fair_op_count(after, list(sequence))
            if count >= best.op_count or not calls.spend(1):
                continue
            try:
                verdict, _ = judge_sequence(module, after, list(sequence), driver=driver)
            except CompilerError:
                continue
            if verdict.problems:
                continue  # fewer ops, numerically worse: not a win
            best, improved = _State(after, sequence, count), True
            break
    return _result("local", best, calls, started)


def _result(strategy: str, state: _State, calls: _Budget, started: float) -> SearchResult:
    return SearchResult(
        strategy,
        [key.split("@", 1)[0] for key in state.sequence],
        state.op_count,
        calls.used,
        time.perf_counter() - started,
        list(state.sequence),
        state.module,
    )


STRATEGIES: dict[str, Callable[..., SearchResult]] = {
    "random": random_search,
    "greedy": greedy_search,
    "beam": beam_search,
    "local": local_search,
    "replay": replay_search,
}
