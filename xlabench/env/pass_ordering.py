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

`info` carries the graph, R (`op_count`), I, D, R0, the pass, its error, `calls` (pass applications the
step made: 1, a fixed-point variant's runs, 0 to stop or for a known no-op) and `seconds`: the time XLA
took to run the pass, as first measured (a cached transition keeps it, so a replayed episode reports
the same figures; 0 for a failed pass or a known no-op).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces

from xlabench.errors import CompilerError, UserInputError
from xlabench.graphs import Graph, resolve_graphs
from xlabench.xla import HloModule, PassDriver, default_driver
from xlabench.xla.catalogue import DEFAULT_ACTION_SET, FIXED_POINT_SUFFIX, base_pass, inapplicable
from xlabench.xla.features import ELEMENT_TYPES, OPCODES, Features

ENV_ID = "xlabench/PassOrdering-v0"
COST_FIELDS = ("flops", "transcendentals", "bytes_accessed")


REWARD_BASELINES = ("unoptimized", "default")


def observation_space(action_count: int) -> spaces.Dict:
    """The environment's observation space for an action set of `action_count` passes."""
    return spaces.Dict(
        {
            # Share of each opcode in the module (OPCODES order, then "other").
            "histogram": spaces.Box(0.0, 1.0, (len(OPCODES) + 1,), np.float32),
            # Share of each result element type (ELEMENT_TYPES order, then "other"): which
            # normalizations and expanders have work to do is not in the opcodes alone.
            "element_types": spaces.Box(0.0, 1.0, (len(ELEMENT_TYPES) + 1,), np.float32),
            # The module's op count relative to I (not the fair count: that is the reward's).
            "op_count": spaces.Box(0.0, np.inf, (1,), np.float32),
            "step_fraction": spaces.Box(0.0, 1.0, (1,), np.float32),
            # XLA's cost analysis relative to the raw module's (flops, transcendentals, bytes).
            "cost": spaces.Box(0.0, np.inf, (len(COST_FIELDS),), np.float32),
            # How often each action was applied in this episode, relative to the episode cap.
            "action_counts": spaces.Box(0.0, 1.0, (action_count,), np.float32),
        }
    )


@dataclass(frozen=True)
class GraphStart:
    """What an episode on one graph starts from and is measured against."""

    graph: Graph
    module: HloModule  # the raw module, canonical form
    initial_op_count: int  # I
    default_op_count: int  # D: XLA's default pipeline, counted at the counting point
    unoptimized_op_count: int | None  # R0: the raw module's fair count (None: not counted, no rewards)
    cost: np.ndarray  # the raw module's cost analysis, in COST_FIELDS order


class PassOrderingEnv(gymnasium.Env[dict[str, np.ndarray], int]):
    """Choose XLA passes one at a time; the last action stops the episode."""

    metadata = {"render_modes": ["ansi"]}

    def __init__(
        self,
        graphs: str | Sequence[Graph] = "train",
        action_set: str = DEFAULT_ACTION_SET,
        max_steps: int = 30,
        error_penalty: float = 0.01,
        actions: list[str] | None = None,
        driver: PassDriver | None = None,
        render_mode: str | None = None,
        count_every_step: bool = True,
        rewards: bool = True,
        mask_inapplicable: bool = False,
        skip_known_no_ops: bool = True,
        mask_missing_actions: bool = False,
        reward_baseline: str = "unoptimized",
    ) -> None:
        if max_steps < 1:
            raise UserInputError(f"max_steps must be at least 1, not {max_steps}")
        if reward_baseline not in REWARD_BASELINES:
            raise UserInputError(
                f"{reward_baseline}: unknown reward baseline (choose {', '.join(REWARD_BASELINES)})"
            )
        if render_mode not in (None, *self.metadata["render_modes"]):
            raise UserInputError(f"{render_mode}: unknown render mode (choose ansi)")
        self.driver = driver or default_driver()
        self.graphs = {
            graph.name: graph for graph in (resolve_graphs(graphs) if isinstance(graphs, str) else graphs)
        }
        if not self.graphs:
            raise UserInputError("an environment needs at least one graph")
        self.graph_names = sorted(self.graphs)
        if actions is None:
            actions = self.driver.catalogue.action_passes(action_set)
        if not mask_missing_actions:
            for pass_name in actions:
                self.driver.check_pass(pass_name)
        self.actions = list(actions)
        # Actions this compiler lacks (a policy made on another release): always masked, never run.
        self.missing_actions = [name for name in self.actions if not self.driver.has_pass(name)]
        self._missing = {index for index, name in enumerate(self.actions) if name in self.missing_actions}
        self.stop_action = len(self.actions)
        self.max_steps = max_steps
        self.error_penalty = error_penalty
        self.render_mode = render_mode
        self.count_every_step = count_every_step
        self.rewards = rewards
        # Also mask passes known to change nothing before they run: none of their opcodes in the module
        # (`catalogue.inapplicable`), or the module a fixed point of the pass (its fixed-point run just
        # ended there). No compiler call is spent on them. Off for the policies made before.
        self.mask_inapplicable = mask_inapplicable
        # Spend no compiler call on a pass known to change nothing (see the module docstring).
        self.skip_known_no_ops = skip_known_no_ops
        # What the return measures progress from and is scaled by: the raw module's fair count R0
        # ("unoptimized": the return is (R0 - R) / R0) or XLA's default count D ("default": (D - R) / D,
        # 0 for a sequence that lands on XLA's count, positive only beyond it).
        self.reward_baseline = reward_baseline
        self._reward_reference = 0

        self.action_space = spaces.Discrete(len(self.actions) + 1)
        self.observation_space = observation_space(len(self.actions))

        self._starts = GraphStarts(self.driver, self.graphs, count_unoptimized=rewards)
        self._known = NoOpMemory()
        self._start: GraphStart | None = None
        self._module: HloModule | None = None
        self._fair_count: int | None = 0
        self._steps = 0
        self._action_counts = np.zeros(len(self.actions), dtype=np.int64)
        self._sequence: list[str] = []

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
        self._start = self._starts.get(name)
        self._module = self._start.module
        self._fair_count = self._start.unoptimized_op_count
        self._reward_reference = (
            self._start.default_op_count if self.reward_baseline == "default" else self._fair_count
        )
        self._steps = 0
        self._action_counts[:] = 0
        self._sequence = []
        self._known.new_episode()
        return self._observation(), self._info(pass_name=None, seconds=0.0, error=None)

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        """Apply action's pass (or stop); never raises for a pass XLA rejects or crashes on."""
        if self._start is None or self._module is None:
            raise RuntimeError("call reset() before step()")
        action = int(action)
        if not self.action_space.contains(action):
            raise UserInputError(f"action {action} is outside {self.action_space}")
        if action == self.stop_action:
            reward = self._count_reward()  # before `info`, which reports the count
            return self._observation(), reward, True, False, self._info("stop", 0.0, None)

        pass_name = self.actions[action]
        if action in self._missing:
            raise UserInputError(
                f"{pass_name}: jaxlib {self.driver.jaxlib_version} has no such pass (masked)"
            )
        before = self._module
        error: CompilerError | None = None
        seconds = 0.0
        runs = 1
        base = base_pass(pass_name)
        try:
            if self._known_no_op(before, pass_name):
                after, runs = before, 0
            else:
                after, runs = self.driver.apply_action(before, pass_name)
                seconds = after.compile_seconds or 0.0
            if self.count_every_step:
                self.driver.fair_op_count(after, [*self._sequence, pass_name])  # a failure is the step's
        except CompilerError as failure:
            error = failure
        self._steps += 1
        self._action_counts[action] += 1
        truncated = self._steps >= self.max_steps
        if error is not None:
            self._known.useless.add((before.fingerprint, action))
            reward = -self.error_penalty + (self._count_reward() if truncated else 0.0)
        else:
            if after.fingerprint == before.fingerprint:
                self._known.useless.add((before.fingerprint, action))
                self._known.unchanged.add((before.fingerprint, base))
            elif pass_name.endswith(FIXED_POINT_SUFFIX) and self.driver.is_fixed_point(after, base):
                # The run that ended the loop found nothing to do here: any variant of the pass is useless.
                self._known.unchanged.add((after.fingerprint, base))
                if self.mask_inapplicable:
                    variants = [index for index, name in enumerate(self.actions) if base_pass(name) == base]
                    self._known.useless.update((after.fingerprint, index) for index in variants)
            self._module = after
            self._sequence.append(pass_name)
            reward = self._count_reward() if self.count_every_step or truncated else 0.0
        info = self._info(pass_name, seconds, error, calls=runs)
        return self._observation(), float(reward) if self.rewards else 0.0, False, truncated, info

    def action_masks(self) -> np.ndarray:
        """Valid actions (MaskablePPO's protocol): stop, and every pass not known to be useless here.

        Known useless: a pass this compiler lacks (`mask_missing_actions`), a pass that left this very
        module unchanged or failed on it, a pass whose
        required predecessor is not in the sequence yet (`PassCatalogue.unmet_requirement`) and, with
        `mask_inapplicable`, a pass none of whose opcodes is in the module (`inapplicable`) or whose
        fixed-point run ended on this module.
        """
        mask = np.ones(len(self.actions) + 1, dtype=bool)
        if self._module is not None:
            catalogue = self.driver.catalogue
            histogram = self.driver.features(self._module).histogram if self.mask_inapplicable else {}
            for action, name in enumerate(self.actions):
                mask[action] = (
                    action not in self._missing
                    and (self._module.fingerprint, action) not in self._known.useless
                    and catalogue.unmet_requirement(name, self._sequence) is None
                    and not (self.mask_inapplicable and inapplicable(name, histogram))
                )
        return mask

    def _known_no_op(self, module: HloModule, pass_name: str) -> bool:
        """Whether running the pass is known to leave `module` as it is, so needs no compiler call."""
        if not self.skip_known_no_ops:
            return False
        if (module.fingerprint, base_pass(pass_name)) in self._known.unchanged:
            return True
        return inapplicable(pass_name, self.driver.features(module).histogram)

    def render(self) -> str | None:
        """With render_mode="ansi": one line with the graph, step, counts and the sequence so far."""
        if self.render_mode != "ansi" or self._start is None:
            return None
        start = self._start
        return (
            f"{start.graph.name} step {self._steps}/{self.max_steps}: R {self._fair_count} "
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

    def _count_reward(self) -> float:
        """Count the current module; the reward is the drop since the last count (the first from the
        reward baseline's count), over that baseline's count."""
        assert self._start is not None and self._module is not None
        try:
            fair_count = self.driver.fair_op_count(self._module, self._sequence)
        except CompilerError:  # XLA's required passes fail on this sequence's module
            return -self.error_penalty
        previous, self._fair_count = self._reward_reference, fair_count
        self._reward_reference = fair_count
        if not self.rewards:
            return 0.0
        assert previous is not None and self._start.unoptimized_op_count is not None
        scale = (
            self._start.default_op_count
            if self.reward_baseline == "default"
            else self._start.unoptimized_op_count
        )
        return (previous - fair_count) / scale

    def graph_start(self, name: str) -> GraphStart:
        """I, D, R0 and the raw module of one graph (computed once per environment)."""
        return self._starts.get(name)

    def _observation(self) -> dict[str, np.ndarray]:
        assert self._start is not None and self._module is not None
        features = self.driver.features(self._module)
        return observation(
            features, self._start, self._steps / self.max_steps, self._action_counts / self.max_steps
        )

    def _info(
        self, pass_name: str | None, seconds: float, error: CompilerError | None, calls: int = 0
    ) -> dict[str, Any]:
        assert self._start is not None
        return {
            "graph": self._start.graph.name,
            "op_count": self._fair_count,
            "I": self._start.initial_op_count,
            "D": self._start.default_op_count,
            "R0": self._start.unoptimized_op_count,
            "pass": pass_name,
            "calls": calls,
            "seconds": seconds,
            "error": None if error is None else error.to_dict(),
        }


class GraphStarts:
    """Each graph's `GraphStart`, computed the first time an episode starts on it."""

    def __init__(self, driver: PassDriver, graphs: dict[str, Graph], count_unoptimized: bool) -> None:
        self.driver = driver
        self.graphs = graphs
        self.count_unoptimized = count_unoptimized  # R0 costs a required-only compile: rewards only
        self._starts: dict[str, GraphStart] = {}

    def get(self, name: str) -> GraphStart:
        """I, D, R0 and the raw module of graph `name`."""
        known = self._starts.get(name)
        if known is None:
            graph = self.graphs[name]
            module = self.driver.load(graph.hlo_text(), graph.name)
            features = self.driver.features(module)
            known = GraphStart(
                graph=graph,
                module=module,
                initial_op_count=features.op_count,
                default_op_count=self.driver.features(self.driver.run_default_pipeline(module)).op_count,
                unoptimized_op_count=self.driver.fair_op_count(module) if self.count_unoptimized else None,
                cost=_cost_vector(features),
            )
            self._starts[name] = known
        return known


class NoOpMemory:
    """What an environment has seen change nothing: masked actions and skipped compiler calls."""

    def __init__(self) -> None:
        # (module fingerprint, action) pairs known to change nothing or to fail: masked, for good.
        self.useless: set[tuple[str, int]] = set()
        # (module fingerprint, base pass) this episode saw the pass leave unchanged.
        self.unchanged: set[tuple[str, str]] = set()

    def new_episode(self) -> None:
        """Forget what this episode saw (what is useless stays known)."""
        self.unchanged = set()


def observation(
    features: Features, start: GraphStart, step_fraction: float, action_shares: np.ndarray
) -> dict[str, np.ndarray]:
    """The observation of a module with these `features`, in an episode that started at `start`."""
    histogram = features.histogram_vector()
    total = histogram.sum()
    element_types = features.element_type_vector()
    raw_cost = start.cost
    cost = np.divide(_cost_vector(features), raw_cost, out=np.ones(len(COST_FIELDS)), where=raw_cost > 0)
    return {
        "histogram": (histogram / total if total else histogram).astype(np.float32),
        "element_types": (element_types / total if total else element_types).astype(np.float32),
        "op_count": np.array([features.op_count / start.initial_op_count], dtype=np.float32),
        "step_fraction": np.array([step_fraction], dtype=np.float32),
        "cost": cost.astype(np.float32),
        "action_counts": action_shares.clip(0, 1).astype(np.float32),
    }


def _cost_vector(features: Features) -> np.ndarray:
    return np.array([getattr(features.cost, name) for name in COST_FIELDS], dtype=np.float64)
