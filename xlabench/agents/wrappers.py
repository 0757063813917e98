"""Gymnasium wrappers the agents train through: cost-analysis shaping (masks: `xlabench.agents.masking`)."""

from __future__ import annotations

import math
from typing import Any

import gymnasium
import numpy as np


class CostShaping(gymnasium.Wrapper):
    """Potential-based reward shaping from XLA's cost analysis: r' = r + gamma * phi(s') - phi(s).

    phi(s) = -coefficient * mean of log(x(s) / x(raw module)) over XLA's cost analysis (flops,
    transcendentals, bytes accessed) and the op count. The cost analysis alone is nearly flat where
    a while loop dominates it (a GRU step: bytes accessed move by 6e-6 while call-inliner removes 7%
    of the ops), so the op count is part of the potential. phi of a terminal state (after *stop*) is
    0. Shaping of this form leaves optimal policies unchanged (Ng, Harada and Russell 1999): an
    undiscounted episode gains exactly -phi(s0) = 0 from it.
    """

    def __init__(self, env: gymnasium.Env, gamma: float, coefficient: float = 0.1) -> None:
        super().__init__(env)
        self.gamma, self.coefficient = gamma, coefficient
        self._potential = 0.0

    def potential(self, observation: dict[str, np.ndarray]) -> float:
        """phi of a non-terminal state, from its observation's relative cost and op count."""
        ratios = np.concatenate([observation["cost"], observation["op_count"]]).astype(np.float64)
        logs = [math.log(ratio) for ratio in ratios if ratio > 0]
        return -self.coefficient * float(np.mean(logs)) if logs else 0.0

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        observation, info = self.env.reset(**kwargs)
        self._potential = self.potential(observation)
        return observation, info

    def step(self, action: int) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        observation, reward, terminated, truncated, info = self.env.step(action)
        following = 0.0 if terminated else self.potential(observation)
        shaping = self.gamma * following - self._potential
        self._potential = following
        return observation, float(reward) + shaping, terminated, truncated, {**info, "shaping": shaping}
