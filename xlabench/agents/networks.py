"""What the networks see: the policy never sees XLA's cost analysis; the value function may.

The paper's second enhancement gives the value function features the policy does not get. Both
extractors here are parameter-free flattenings of the observation `Dict` (keys in sorted order, as
stable-baselines3's `CombinedExtractor`) with the same width; the policy's copy of the hidden keys
is zero. A policy that never reads cost analysis also needs none of it to act.
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium import spaces
from sb3_contrib.common.maskable.policies import MaskableMultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor

VALUE_ONLY_KEYS = ("cost",)
# The action mask some algorithms get in their observation (`xlabench.agents.masking`): it masks the
# output and is never an input, so a network's weights are the same with it or without it.
MASK_KEY = "action_mask"


class ObservationExtractor(BaseFeaturesExtractor):
    """Flatten the observation `Dict`, zeroing the keys in `hidden_keys`."""

    def __init__(
        self, observation_space: spaces.Dict, hidden_keys: tuple[str, ...] = VALUE_ONLY_KEYS
    ) -> None:
        self.keys = sorted(key for key in observation_space.spaces if key != MASK_KEY)
        widths = [int(observation_space.spaces[key].shape[0]) for key in self.keys]
        super().__init__(observation_space, features_dim=sum(widths))
        self.hidden_keys = tuple(hidden_keys)

    def forward(self, observations: dict[str, torch.Tensor]) -> torch.Tensor:
        parts = [
            torch.zeros_like(observations[key]) if key in self.hidden_keys else observations[key]
            for key in self.keys
        ]
        return torch.cat([part.flatten(start_dim=1) for part in parts], dim=1)


class ValueFeaturesPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's actor-critic, with the cost analysis visible to the value function only."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["features_extractor_class"] = ObservationExtractor
        kwargs["share_features_extractor"] = False
        super().__init__(*args, **kwargs)
        # Parameter-free extractors of equal width: swapping them after the build keeps the
        # optimizer's parameter list and the MLP input sizes as they are.
        self.vf_features_extractor = ObservationExtractor(self.observation_space, hidden_keys=())
