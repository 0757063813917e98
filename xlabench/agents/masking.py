"""Action masks for the algorithms sb3-contrib does not mask (A2C, TRPO, DQN): a masked distribution.

MaskablePPO takes the environment's mask as an argument. A2C, TRPO and DQN have no such argument, so
the mask rides in the observation (`MaskInObservation`, key `action_mask`) and the networks apply it:
the actor-critic's categorical distribution gets masked logits, DQN's Q-values are masked before the
greedy choice and the target's max, and DQN's random exploration draws among allowed actions only. A
masked action is never taken, so it is never a refused step with a penalty; the algorithms compare on
the same footing as PPO (the paper's comparison, issue 34).

The feature extractor never reads `action_mask` (`networks.ObservationExtractor`), so the weights are
those of a network without it: a stored policy rolls out from the plain observation, masked by
`Policy.act` as every algorithm is.
"""

from __future__ import annotations

from typing import Any

import gymnasium
import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import DQN
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.dqn.policies import MultiInputPolicy, QNetwork

from xlabench.agents.networks import MASK_KEY

MASKED_LOGIT = -1e8  # as sb3-contrib's MaskableCategorical: a finite value keeps gradients finite


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


def _allowed(observations: Any) -> torch.Tensor | None:
    """The boolean mask carried by a batch of observations, or None (a plain observation)."""
    mask = observations.get(MASK_KEY) if isinstance(observations, dict) else None
    return None if mask is None else mask > 0.5


class MaskedActorCriticPolicy(MultiInputActorCriticPolicy):
    """An actor-critic (A2C, TRPO) whose action distribution is masked by the observation's mask."""

    _mask: torch.Tensor | None = None

    # stable-baselines3 builds every action distribution in `_get_action_dist_from_latent`, which sees
    # only the latent features: each entry point that makes one keeps its observations' mask first.
    def forward(self, obs: Any, deterministic: bool = False) -> Any:
        self._mask = _allowed(obs)
        return super().forward(obs, deterministic)

    def evaluate_actions(self, obs: Any, actions: torch.Tensor) -> Any:
        self._mask = _allowed(obs)
        return super().evaluate_actions(obs, actions)

    def get_distribution(self, obs: Any) -> Any:
        self._mask = _allowed(obs)
        return super().get_distribution(obs)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> Any:
        distribution = super()._get_action_dist_from_latent(latent_pi)
        if self._mask is not None:
            logits = distribution.distribution.logits.masked_fill(~self._mask, MASKED_LOGIT)
            distribution.distribution = torch.distributions.Categorical(logits=logits)
        return distribution


class MaskedQNetwork(QNetwork):
    """DQN's Q-network with masked actions valued far below any allowed one."""

    def forward(self, obs: Any) -> torch.Tensor:
        values = super().forward(obs)
        mask = _allowed(obs)
        return values if mask is None else values.masked_fill(~mask, MASKED_LOGIT)


class MaskedQPolicy(MultiInputPolicy):
    """DQN's policy (online and target networks) built from `MaskedQNetwork`."""

    def make_q_net(self) -> QNetwork:
        net_args = self._update_features_extractor(self.net_args, features_extractor=None)
        return MaskedQNetwork(**net_args).to(self.device)


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
