"""The pass-ordering environment: real XLA passes as actions on real HLO modules (gymnasium 1.x).

An episode starts from a graph's raw module. Each step applies one XLA pass (`PassDriver.apply_pass`,
isolated and cached) or stops. What is scored is the *fairly counted* op count R: the module after the
sequence, taken through XLA's required passes to the counting point (`PassDriver.fair_op_count`), the
same count XLA's default pipeline D is measured with.

Reward. The step reward is the drop in R, divided by R0, the fair count of the raw module (no pass
applied): r_t = (R_{t-1} - R_t) / R0. It telescopes, so the episode return is (R0 - R_T) / R0, the
relative improvement over doing nothing -- defined on every graph (bf16 graphs have D > I, where the
paper's (I - R) / (I - D) is not), and the same scale for graphs of every size. A pass that fails or
crashes XLA leaves the module as it was and costs `error_penalty`.

With `count_every_step=False` the module is counted only when the episode ends (*stop*, or the step
cap): the reward is 0 until then and the return the same (R0 - R_T) / R0. A count is a required-only
compile to the counting point: `xlabench bench env` on the 931-op bf16 GPT-2 step measured a median
step of 2.27 s counted, 0.14 s not. A rollout needs no reward until its end, so evaluation runs this
way, and training may, with shaping to make up the signal. An evaluation rollout needs no reward at all
(`rewards=False`): every reward is 0 and R0 is never counted (`info["R0"]` is None), one required-only
compile less per graph.

A step whose pass is known to change nothing costs no compiler call (`skip_known_no_ops`, on by
default): the pass has none of its opcodes in the module (`catalogue.inapplicable`, checked against
XLA in tests/env), or this episode already saw the pass change nothing on this very module (a run left
it unchanged, or its fixed-point run ended there). The step is otherwise what XLA's run would give:
the same module, observation, mask and sequence, so a policy acts the same with it on or off.

With `observe_xla_order`, the observation also holds where the episode stands in XLA's own order on
the module (`xlabench.env.xla_order`, two cached compiles a graph): `xla_next`, the order's next action
that can still do something here (one-hot; the last entry: the order is done), and `xla_progress`.

`info` carries the graph, R (`op_count`), I, D, R0, the pass, its error, `calls` (pass applications the
step made: 1, a fixed-point variant's runs, 0 to stop or for a known no-op) and `seconds`: the time XLA
took to run the pass, as first measured (a cached transition keeps it, so a replayed episode reports
the same figures; 0 for a failed pass or a known no-op).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from xlabench.env.environment_config import EnvironmentConfig
from xlabench.env.no_ops import NoOpMemory
from xlabench.env.observation import observation, observation_space
from xlabench.env.reward import RewardCounter
from xlabench.env.starts import GraphStart, GraphStarts
from xlabench.env.xla_order import OrderCursor, xla_order_and_claims
from xlabench.errors import CompilerError, UserInputError
from xlabench.graphs import Graph, resolve_graphs
from xlabench.xla import HloModule, PassDriver, default_driver

ENV_ID = "xlabench/PassOrdering-v0"
# The environment's defaults are the shipped policy's (`EnvironmentConfig`): one source for both.
SHIPPED = EnvironmentConfig()


class PassOrderingEnv(gymnasium.Env[dict[str, np.ndarray], int]):
    """Choose XLA passes one at a time; the last action stops the episode."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        graphs: str | Sequence[Graph] = "train",
        action_set: str = SHIPPED.action_set,
        max_steps: int = SHIPPED.max_steps,
        error_penalty: float = SHIPPED.error_penalty,
        actions: list[str] | None = None,
        driver: PassDriver | None = None,
        render_mode: str | None = None,
        count_every_step: bool = SHIPPED.count_every_step,
        rewards: bool = True,
        mask_inapplicable: bool = SHIPPED.mask_inapplicable,
        skip_known_no_ops: bool = True,
        mask_missing_actions: bool = False,
        reward_baseline: str = SHIPPED.reward_baseline,
        observe_xla_order: bool = SHIPPED.observe_xla_order,
        xla_order_skip: int = SHIPPED.xla_order_skip,
    ) -> None:
        if max_steps < 1:
            raise UserInputError(f"max_steps must be at least 1, not {max_steps}")
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise UserInputError(f"{render_mode}: unknown render mode (choose ansi)")
        self.driver = driver or default_driver()
        self.graphs = {
            graph.name: graph for graph in (resolve_graphs(graphs) if isinstance(graphs, str) else graphs)
        }
        if not self.graphs:
            raise UserInputError("an environment needs at least one graph")
        self.graph_names = sorted(self.graphs)
        self.actions = resolve_actions(self.driver, action_set, actions, mask_missing_actions)
        # Actions this compiler lacks (a policy made on another release): always masked, never run.
        self.missing_actions = [name for name in self.actions if not self.driver.has_pass(name)]
        self.stop_action = len(self.actions)
        self.max_steps = max_steps
        self.error_penalty = error_penalty
        self.render_mode = render_mode
        self.count_every_step = count_every_step
        self.rewards = rewards

        self.action_space = spaces.Discrete(len(self.actions) + 1)
        self.observe_xla_order = observe_xla_order
        if xla_order_skip < 0:
            raise UserInputError(f"xla_order_skip must be at least 0, not {xla_order_skip}")
        self.xla_order_skip = xla_order_skip
        self.observation_space = observation_space(len(self.actions), observe_xla_order)
        self._xla_orders: dict[str, tuple[tuple[str, ...], frozenset[str]]] = {}

        self._starts = GraphStarts(self.driver, self.graphs, count_unoptimized=rewards)
        missing = {index for index, name in enumerate(self.actions) if name in self.missing_actions}
        # `mask_inapplicable` also masks passes known to change nothing before they run (none of their
        # opcodes in the module, or its fixed point); off for the policies made before it.
        self._known = NoOpMemory(self.driver, self.actions, missing, mask_inapplicable, skip_known_no_ops)
        self._reward = RewardCounter(self.driver, reward_baseline, error_penalty, rewards)
        self._start: GraphStart | None = None
        self._module: HloModule | None = None
        self._steps = 0
        self._action_counts = np.zeros(len(self.actions), dtype=np.int64)
        self._sequence: list[str] = []
        self._cursor = OrderCursor(())  # where the episode stands in XLA's order (observing only)

    # -- gymnasium protocol -----------------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Start from a graph's raw module: `options={"graph": name}`, else one drawn with the seed."""
        super().reset(seed=seed)
        name = (options or {}).get("graph")
        if name is None:
            name = self.graph_names[int(self.np_random.integers(len(self.graph_names)))]
        elif name not in self.graphs:
            raise UserInputError(f"{name}: not one of this environment's {len(self.graphs)} graphs")
        start = self._starts.get(name)
        if self.observe_xla_order and name not in self._xla_orders:  # before any state changes
            # Actions this compiler lacks are never offered, so never XLA's next move here.
            offered = [action for action in self.actions if action not in self.missing_actions]
            self._xla_orders[name] = xla_order_and_claims(self.driver, start.module, offered)
        self._start = start
        self._module = start.module
        self._cursor = OrderCursor(*self._xla_orders.get(name, ((), frozenset())), skip=self.xla_order_skip)
        self._reward.start(self._start)
        self._steps = 0
        self._action_counts[:] = 0
        self._sequence = []
        self._known.new_episode()
        return self._observation(), self._info(None)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply action's pass (or stop); never raises for a pass XLA rejects or crashes on."""
        if self._start is None or self._module is None:
            raise RuntimeError("call reset() before step()")
        action = int(action)
        if not self.action_space.contains(action):
            raise UserInputError(f"action {action} is outside {self.action_space}")
        if action == self.stop_action:
            reward = self._reward.count(self._module, self._sequence)  # before `info` reports it
            return self._observation(), reward, True, False, self._info("stop")

        pass_name = self.actions[action]
        if action in self._known.missing:
            raise UserInputError(
                f"{pass_name}: jaxlib {self.driver.jaxlib_version} has no such pass (masked)"
            )
        before = after = self._module
        error: CompilerError | None = None
        seconds, runs = 0.0, 1  # a failed application made its call too
        try:
            if self._known.known_no_op(before, pass_name):
                runs = 0
            else:
                after, runs = self.driver.apply_action(before, pass_name)
                seconds = after.compile_seconds or 0.0
            if self.count_every_step:
                self.driver.fair_op_count(after, [*self._sequence, pass_name])  # a failure is the step's
        except CompilerError as failure:
            error = failure
        self._steps += 1
        self._action_counts[action] += 1
        if self.observe_xla_order:  # before the module changes: what was XLA's next move was judged on it
            self._cursor.step(pass_name, self._useless_here(before))
        truncated = self._steps >= self.max_steps
        if error is not None:
            self._known.record_failure(before, action)
            reward = -self.error_penalty
        else:
            self._known.record(before, after, action)
            self._module = after
            self._sequence.append(pass_name)
            reward = 0.0
        if (error is None and self.count_every_step) or truncated:
            reward += self._reward.count(self._module, self._sequence)
        info = self._info(pass_name, seconds, error, runs)
        return self._observation(), float(reward) if self.rewards else 0.0, False, truncated, info

    def action_masks(self) -> np.ndarray:
        """Valid actions (MaskablePPO's protocol): stop, and every pass not known to be useless here."""
        return self._known.mask(self._module, self._sequence)

    def render(self) -> str | None:
        """With render_mode="ansi": one line with the graph, step, counts and the sequence so far."""
        if self.render_mode != "ansi" or self._start is None:
            return None
        start = self._start
        return (
            f"{start.graph.name} step {self._steps}/{self.max_steps}: R {self._reward.fair_count} "
            f"(R0 {start.unoptimized_op_count}, D {start.default_op_count}, I {start.initial_op_count}) "
            f"{' '.join(self._sequence)}"
        )

    # -- what an episode is measured by --------------------------------------------------------------

    @property
    def module(self) -> HloModule | None:
        """The current module (None before the first reset)."""
        return self._module

    @property
    def sequence(self) -> list[str]:
        """The passes applied so far in this episode (failed ones left out)."""
        return list(self._sequence)

    @property
    def fair_op_count(self) -> int:
        """R: the current module's fairly counted op count."""
        return self.driver.fair_op_count(self._module, self._sequence) if self._module else 0

    def compiler_calls(self) -> dict[str, int]:
        """Compiler calls of this environment's driver so far: answered by XLA, by the cache."""
        return dict(self.driver.calls)

    def graph_start(self, name: str) -> GraphStart:
        """I, D, R0 and the raw module of one graph (computed once per environment)."""
        return self._starts.get(name)

    def _observation(self) -> dict[str, np.ndarray]:
        assert self._start is not None and self._module is not None
        features = self.driver.features(self._module)
        position = None
        if self.observe_xla_order:
            position = self._cursor.observed(self.actions, self._useless_here(self._module))
        shares = self._action_counts / self.max_steps
        return observation(features, self._start, self._steps / self.max_steps, shares, position)

    def _useless_here(self, module: HloModule) -> Any:
        """Whether an action can do nothing on `module`: masked there, or known to leave it as it is."""
        mask = self._known.mask(module, self._sequence)

        def useless(action: str) -> bool:
            return not mask[self.actions.index(action)] or self._known.knows_no_op(module, action)

        return useless

    @property
    def xla_order(self) -> tuple[str, ...] | None:
        """XLA's order on the current graph as actions (observing environments only)."""
        if not self.observe_xla_order or self._start is None:
            return None
        return self._xla_orders[self._start.graph.name][0]

    @property
    def xla_claims(self) -> frozenset[str]:
        """The no-ops XLA's order on the current graph must apply (`xla_order.claimed_passes`)."""
        if not self.observe_xla_order or self._start is None:
            return frozenset()
        return self._xla_orders[self._start.graph.name][1]

    def _info(
        self, pass_name: str | None, seconds: float = 0.0, error: CompilerError | None = None, calls: int = 0
    ) -> dict[str, Any]:
        assert self._start is not None
        return step_info(self._start, self._reward.fair_count, pass_name, seconds, error, calls)


def resolve_actions(
    driver: PassDriver, action_set: str, actions: list[str] | None, mask_missing_actions: bool
) -> list[str]:
    """The environment's actions: `actions`, else the action set's; unknown passes refused unless masked."""
    if actions is None:
        actions = driver.catalogue.action_passes(action_set)
    if not mask_missing_actions:
        for pass_name in actions:
            driver.check_pass(pass_name)
    return list(actions)


def step_info(
    start: GraphStart,
    fair_count: int | None,
    pass_name: str | None,
    seconds: float,
    error: CompilerError | None,
    calls: int,
) -> dict[str, Any]:
    """A step's `info`: the graph, R, I, D, R0, the pass, its compiler calls, time and error."""
    return {
        "graph": start.graph.name,
        "op_count": fair_count,
        "I": start.initial_op_count,
        "D": start.default_op_count,
        "R0": start.unoptimized_op_count,
        "pass": pass_name,
        "calls": calls,
        "seconds": seconds,
        "error": None if error is None else error.to_dict(),
    }
