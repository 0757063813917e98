"""Action masks for the algorithms sb3-contrib does not mask (A2C, TRPO, DQN): a masked distribution.

MaskablePPO takes the environment's mask as an argument. A2C, TRPO and DQN have no such argument, so
the mask rides in the observation (`MaskInObservation`, key `action_mask`) and the networks apply it:
the actor-critic's categorical distribution gets masked logits, DQN's Q-values are masked before the
greedy choice and the target's max, and DQN's random exploration draws among allowed actions only. A
masked action is never taken, so it is never a refused step with a penalty; the algorithms compare on
the same footing as PPO (the paper's comparison, issue 34).

The networks (`xlabench.policies.networks`: `MaskedActorCriticPolicy`, `MaskedQPolicy`) never read
`action_mask` as an input, so the weights are those of a network without it: a stored policy rolls out
from the plain observation, masked by `Policy.act` as every algorithm is.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
from gymnasium import spaces
from stable_baselines3 import DQN

from xlabench.policies.networks import MASK_KEY


class MaskInObservation(gymnasium.ObservationWrapper):
    """The environment's action mask (1 allowed, 0 not) as one more observation key, `action_mask`."""

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        size = int(env.action_space.n)
        self.observation_space = spaces.Dict(
            {**env.observation_space.spaces, MASK_KEY: spaces.Box(0.0, 1.0, (size,), np.float32)}
        )

    def observation(self, observation: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return {**observation, MASK_KEY: self.env.unwrapped.action_masks().astype(np.float32)}

    def action_masks(self) -> np.ndarray:
        """The wrapped environment's mask (evaluation applies it to every algorithm)."""
        return self.env.unwrapped.action_masks()


class MaskedDQN(DQN):
    """DQN whose random actions (warm-up and epsilon-greedy) are drawn among the allowed ones."""

    def _random_actions(self, observation: dict[str, np.ndarray]) -> np.ndarray:
        masks = np.asarray(observation[MASK_KEY]).reshape(-1, self.action_space.n) > 0.5
        return np.array([self.action_space.sample(mask=mask.astype(np.int8)) for mask in masks])

    def predict(
        self,
        observation: Any,
        state: Any = None,
        episode_start: Any = None,
        deterministic: bool = False,
    ) -> tuple[np.ndarray, Any]:
        """DQN's epsilon-greedy choice, exploring among allowed actions only."""
        if not deterministic and isinstance(observation, dict) and MASK_KEY in observation:
            if np.random.rand() < self.exploration_rate:
                actions = self._random_actions(observation)
                vectorized = self.policy.is_vectorized_observation(observation)
                return (actions if vectorized else actions[0]), state
            return self.policy.predict(observation, state, episode_start, deterministic)
        return super().predict(observation, state, episode_start, deterministic)

    def _sample_action(
        self, learning_starts: int, action_noise: Any = None, n_envs: int = 1
    ) -> tuple[np.ndarray, np.ndarray]:
        if self.num_timesteps < learning_starts and self._last_obs is not None:
            actions = self._random_actions(self._last_obs)  # the warm-up's uniform draws, masked
            return actions, actions
        return super()._sample_action(learning_starts, action_noise, n_envs)
