"""What a policy sees of a module: opcode and element-type shares, size, cost, progress."""

from __future__ import annotations

import numpy as np
from gymnasium import spaces

from xlabench.env.starts import COST_FIELDS, GraphStart, cost_vector
from xlabench.xla.driver.features import ELEMENT_TYPES, OPCODES, Features


def observation_space(action_count: int, observe_xla_order: bool = False) -> spaces.Dict:
    """The environment's observation space for an action set of `action_count` passes."""
    extra = {}
    if observe_xla_order:
        # XLA's next action on this module after the sequence so far (one-hot, the last entry: its
        # order is done), and the share of its order behind the episode's cursor.
        extra = {
            "xla_next": spaces.Box(0.0, 1.0, (action_count + 1,), np.float32),
            "xla_progress": spaces.Box(0.0, 1.0, (1,), np.float32),
        }
    return spaces.Dict(
        {
            **extra,
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


def observation(
    features: Features,
    start: GraphStart,
    step_fraction: float,
    action_shares: np.ndarray,
    xla_position: tuple[int, int, int] | None = None,
) -> dict[str, np.ndarray]:
    """The observation of a module with these `features`, in an episode that started at `start`;
    `xla_position` (next action, cursor, order length) when the environment observes XLA's order."""
    histogram = features.histogram_vector()
    total = histogram.sum()
    element_types = features.element_type_vector()
    raw_cost = start.cost
    cost = np.divide(cost_vector(features), raw_cost, out=np.ones(len(COST_FIELDS)), where=raw_cost > 0)
    extra = {}
    if xla_position is not None:
        next_action, done, length = xla_position
        one_hot = np.zeros(len(action_shares) + 1, dtype=np.float32)
        one_hot[next_action] = 1.0
        progress = np.array([done / length if length else 1.0], dtype=np.float32)
        extra = {"xla_next": one_hot, "xla_progress": progress}
    return {
        **extra,
        "histogram": (histogram / total if total else histogram).astype(np.float32),
        "element_types": (element_types / total if total else element_types).astype(np.float32),
        "op_count": np.array([features.op_count / start.initial_op_count], dtype=np.float32),
        "step_fraction": np.array([step_fraction], dtype=np.float32),
        "cost": cost.astype(np.float32),
        "action_counts": action_shares.clip(0, 1).astype(np.float32),
    }
