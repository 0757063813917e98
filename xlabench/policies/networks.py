"""The networks a policy is made of, built the same way to train one and to load one.

What they see: the policy never sees XLA's cost analysis; the value function may.

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
from stable_baselines3.common.policies import MultiInputActorCriticPolicy
from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
from stable_baselines3.dqn.policies import MultiInputPolicy, QNetwork

VALUE_ONLY_KEYS = ("cost",)
# The action mask some algorithms get in their observation (`xlabench.agents.masking`): it masks the
# output and is never an input, so a network's weights are the same with it or without it.
MASK_KEY = "action_mask"
MASKED_LOGIT = -1e8  # as sb3-contrib's MaskableCategorical: a finite value keeps gradients finite
# The algorithms whose networks take the mask as an argument (sb3-contrib's MaskablePPO).
MASKABLE = ("ppo", "ppo-shaping", "ppo-value")
# One torch thread: the networks are small MLPs and the cores belong to the compiler workers (or to
# pytest-xdist's other workers); more threads only contend with them (docs/measurements.md).
TORCH_THREADS = 1


def use_torch_threads() -> None:
    """Run this process's torch on `TORCH_THREADS` threads (set before a network is built or loaded)."""
    torch.set_num_threads(TORCH_THREADS)


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


# The observation of XLA's next pass (`env/xla_order.py`): one-hot over the actions and "done", indexed
# as the action space is (its last entry, stop).
XLA_NEXT_KEY = "xla_next"
# Where in a module's optimization a departure was demonstrated: how far XLA's order is, and the op
# count against the start's. A departure is allowed only inside the box its demonstrations span.
SUPPORT_KEYS = ("xla_progress", "op_count")
# How far past its demonstrations' span each feature may be: the op count relative to the start differs
# between graphs of one program by more than between training graphs (an LSTM training step in bf16:
# 1.835 on the test split's, demonstrations up to 1.793 on the training split's twins).
SUPPORT_MARGINS = (0.0, 0.05)
UNBOUNDED = 1e9
# The direct path's weight before cloning: the MLP's logits start near 0 (sb3's output gain 0.01), so an
# untrained policy follows XLA; large, so the MLP departs only where it is fitted to.
FOLLOW_WEIGHT_INIT = 5.0


class FollowsXlaOrderPolicy(MaskableMultiInputActorCriticPolicy):
    """MaskablePPO's actor-critic whose action logits also get `follow_weight` x `xla_next`, and
    that departs from XLA's next pass only as its demonstrations did (`departures`).

    Taking XLA's next pass is then one learned number for every pass and graph, not a map from each
    pass's one-hot through the MLP that holds only for the feature combinations of the training
    graphs; the MLP learns the departures from XLA's order. On a module unlike any it was trained on
    the MLP's logits are an extrapolation, large enough to outweigh `follow_weight` (the fifth v3.0
    candidate refused `simplify-conditional` on a TensorFlow cluster and `dce` on an XLA fuzz module):
    `departures[n, a]` says whether action `a` was ever demonstrated where XLA's next was `n`, and
    every other action but `n` itself is masked. Keyed by XLA's next pass alone that was still too
    wide (a departure from `convolution-group-converter` to stop, shown at the end of a CNN's order,
    taken at its start on torch-xla's MobileNetV2), so a departure is also allowed only where its
    demonstrations were (`departure_low`/`departure_high`: the span of each `SUPPORT_KEYS` feature,
    widened by its `SUPPORT_MARGINS`).
    """

    _xla_next: torch.Tensor | None = None
    _support: torch.Tensor | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.follow_weight = torch.nn.Parameter(torch.tensor(FOLLOW_WEIGHT_INIT))
        width = int(self.action_space.n)
        # Before any demonstration: no constraint (as versions made without it).
        self.register_buffer("departures", torch.ones(width, width))
        self.register_buffer("departure_low", torch.full((width, width, len(SUPPORT_KEYS)), -UNBOUNDED))
        self.register_buffer("departure_high", torch.full((width, width, len(SUPPORT_KEYS)), UNBOUNDED))
        # The optimizer was built over the parameters before this one.
        self.optimizer = self.optimizer_class(
            self.parameters(), lr=self.optimizer.param_groups[0]["lr"], **self.optimizer_kwargs
        )

    # stable-baselines3 builds the action distribution from the latent features alone: each entry
    # point keeps its observations' `xla_next` first.
    def forward(self, obs: Any, deterministic: bool = False, action_masks: Any = None) -> Any:
        self._keep(obs)
        return super().forward(obs, deterministic, action_masks)

    def evaluate_actions(self, obs: Any, actions: torch.Tensor, action_masks: Any = None) -> Any:
        self._keep(obs)
        return super().evaluate_actions(obs, actions, action_masks)

    def get_distribution(self, obs: Any, action_masks: Any = None) -> Any:
        self._keep(obs)
        return super().get_distribution(obs, action_masks)

    def _keep(self, obs: Any) -> None:
        self._xla_next = obs[XLA_NEXT_KEY]
        if all(key in obs for key in SUPPORT_KEYS):
            self._support = torch.cat([obs[key].reshape(len(obs[key]), -1) for key in SUPPORT_KEYS], dim=1)
        else:
            self._support = None

    def show_departures(self, xla_next: Any, actions: Any, support: Any = None) -> None:
        """Allow exactly the departures demonstrated: action `actions[i]` where XLA's next was
        `argmax(xla_next[i])`, and (with `support`, the `SUPPORT_KEYS` features of each state) only
        within the span of the states it was demonstrated in, widened by `SUPPORT_MARGINS`."""
        departures = torch.zeros_like(self.departures)
        rows = torch.as_tensor(xla_next).argmax(dim=1)
        columns = torch.as_tensor(actions, dtype=torch.long)
        departures[rows, columns] = 1.0
        self.departures.copy_(departures)
        low = torch.full_like(self.departure_low, -UNBOUNDED)
        high = torch.full_like(self.departure_high, UNBOUNDED)
        if support is not None:
            values = torch.as_tensor(support, dtype=low.dtype).reshape(len(rows), -1)
            low.fill_(UNBOUNDED)
            high.fill_(-UNBOUNDED)
            for row, column, value in zip(rows.tolist(), columns.tolist(), values, strict=True):
                low[row, column] = torch.minimum(low[row, column], value)
                high[row, column] = torch.maximum(high[row, column], value)
            margins = torch.as_tensor(SUPPORT_MARGINS, dtype=low.dtype)
            low, high = low - margins, high + margins
        self.departure_low.copy_(low)
        self.departure_high.copy_(high)

    def _get_action_dist_from_latent(self, latent_pi: torch.Tensor) -> Any:
        logits = self.action_net(latent_pi)
        if self._xla_next is not None:
            following = self._xla_next.reshape(logits.shape)
            logits = logits + self.follow_weight * following
            allowed = (following @ self.departures) > 0.5
            if self._support is not None:
                width = following.shape[-1]
                rows = following.argmax(dim=-1)
                low, high = self.departure_low[rows], self.departure_high[rows]  # (batch, width, K)
                support = self._support.reshape(len(rows), 1, -1)
                allowed = allowed & ((support >= low) & (support <= high)).all(dim=-1).reshape(-1, width)
            allowed = allowed | (following > 0.5)
            logits = logits.masked_fill(~allowed, MASKED_LOGIT)
        return self.action_dist.proba_distribution(action_logits=logits)


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


def policy_class(algorithm: str, follows_xla_order: bool = False) -> type:
    """The network class `algorithm` trains (and a stored policy of it is rebuilt with); PPO that
    observes XLA's order gets the direct path from `xla_next` to its logits."""
    if algorithm == "ppo-value":
        return ValueFeaturesPolicy
    if algorithm in ("ppo", "ppo-shaping") and follows_xla_order:
        return FollowsXlaOrderPolicy
    if algorithm in MASKABLE:
        return MaskableMultiInputActorCriticPolicy
    return MaskedQPolicy if algorithm == "dqn" else MaskedActorCriticPolicy


class NoOptimizer:
    """Stands in for the optimizer of a network that is only rolled out: the first torch optimizer a
    process builds imports torch._dynamo, about 2 s of every `xlabench eval` and pytest start."""

    def __init__(self, params: Any, lr: float = 0.0, **options: Any) -> None:
        self.param_groups: list[dict[str, Any]] = [{"lr": lr}]


def policy_kwargs(net_arch: list[int], activation: str) -> dict[str, Any]:
    """The network's shape: MLP sizes, activation, and the extractor that hides the cost analysis."""
    return {
        "net_arch": list(net_arch),
        "activation_fn": {"tanh": torch.nn.Tanh, "relu": torch.nn.ReLU}[activation],
        "features_extractor_class": ObservationExtractor,
    }
