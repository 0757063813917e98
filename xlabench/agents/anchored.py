"""MaskablePPO held near its warm start: the loss adds `clone_kl_coef` × KL(warm start ‖ policy).

Why: PPO that updates a cloned policy freely forgets what it imitated (general@v1.0's PPO took `unseen`
from 1.0000 to 0.9947), and an entropy bonus alone pushes it toward uniform. A KL penalty to the cloned
policy, on the states the rollouts visit, lets it move where the advantage says so and keeps it where it
has no reason to move (the KL-regularized fine-tuning of a pretrained policy; Jaques et al. 2019 use it to
keep a tuned policy near its prior).

`train` is sb3-contrib 2.x's `MaskablePPO.train` with that one term added; with no anchor set or a
coefficient of 0 it is sb3-contrib's own.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import torch
from gymnasium import spaces
from sb3_contrib import MaskablePPO
from stable_baselines3.common.utils import explained_variance
from torch.nn import functional


class AnchoredMaskablePPO(MaskablePPO):
    """MaskablePPO whose loss also holds the policy near an anchor (`set_anchor`)."""

    def __init__(self, *args: Any, clone_kl_coef: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.clone_kl_coef = clone_kl_coef
        self.anchor: Any = None

    def set_anchor(self) -> None:
        """Hold the policy near what it is now (called after the warm start)."""
        self.anchor = copy.deepcopy(self.policy)
        self.anchor.set_training_mode(False)
        for parameter in self.anchor.parameters():
            parameter.requires_grad_(False)

    def anchor_divergence(self, observations: Any, action_masks: Any) -> torch.Tensor:
        """Mean KL(anchor ‖ policy) of the masked action distributions on a batch of states."""
        with torch.no_grad():
            anchor = self.anchor.get_distribution(observations, action_masks=action_masks).distribution
        current = self.policy.get_distribution(observations, action_masks=action_masks).distribution
        return torch.distributions.kl_divergence(anchor, current).mean()

    def train(self) -> None:
        """One PPO update over the rollout buffer (sb3-contrib's), plus the anchor's KL term."""
        if self.anchor is None or self.clone_kl_coef == 0:
            super().train()
            return
        self.policy.set_training_mode(True)
        self._update_learning_rate(self.policy.optimizer)
        clip_range = self.clip_range(self._current_progress_remaining)
        if self.clip_range_vf is not None:
            clip_range_vf = self.clip_range_vf(self._current_progress_remaining)
        entropy_losses, pg_losses, value_losses, clip_fractions, anchor_losses = [], [], [], [], []
        continue_training = True
        for _epoch in range(self.n_epochs):
            approx_kl_divs = []
            for rollout_data in self.rollout_buffer.get(self.batch_size):
                actions = rollout_data.actions
                if isinstance(self.action_space, spaces.Discrete):
                    actions = rollout_data.actions.long().flatten()
                values, log_prob, entropy = self.policy.evaluate_actions(
                    rollout_data.observations, actions, action_masks=rollout_data.action_masks
                )
                values = values.flatten()
                advantages = rollout_data.advantages
                if self.normalize_advantage:
                    advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
                ratio = torch.exp(log_prob - rollout_data.old_log_prob)
                policy_loss_1 = advantages * ratio
                policy_loss_2 = advantages * torch.clamp(ratio, 1 - clip_range, 1 + clip_range)
                policy_loss = -torch.min(policy_loss_1, policy_loss_2).mean()
                pg_losses.append(policy_loss.item())
                clip_fractions.append(torch.mean((torch.abs(ratio - 1) > clip_range).float()).item())
                if self.clip_range_vf is None:
                    values_pred = values
                else:
                    values_pred = rollout_data.old_values + torch.clamp(
                        values - rollout_data.old_values, -clip_range_vf, clip_range_vf
                    )
                value_loss = functional.mse_loss(rollout_data.returns, values_pred)
                value_losses.append(value_loss.item())
                entropy_loss = -torch.mean(-log_prob) if entropy is None else -torch.mean(entropy)
                entropy_losses.append(entropy_loss.item())
                anchor_loss = self.anchor_divergence(rollout_data.observations, rollout_data.action_masks)
                anchor_losses.append(anchor_loss.item())
                loss = (
                    policy_loss
                    + self.ent_coef * entropy_loss
                    + self.vf_coef * value_loss
                    + self.clone_kl_coef * anchor_loss
                )
                with torch.no_grad():
                    log_ratio = log_prob - rollout_data.old_log_prob
                    approx_kl_div = torch.mean((torch.exp(log_ratio) - 1) - log_ratio).cpu().numpy()
                    approx_kl_divs.append(approx_kl_div)
                if self.target_kl is not None and approx_kl_div > 1.5 * self.target_kl:
                    continue_training = False
                    break
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += 1
            if not continue_training:
                break
        explained_var = explained_variance(
            self.rollout_buffer.values.flatten(), self.rollout_buffer.returns.flatten()
        )
        self.logger.record("train/entropy_loss", np.mean(entropy_losses))
        self.logger.record("train/policy_gradient_loss", np.mean(pg_losses))
        self.logger.record("train/value_loss", np.mean(value_losses))
        self.logger.record("train/clone_kl", np.mean(anchor_losses))
        self.logger.record("train/approx_kl", np.mean(approx_kl_divs))
        self.logger.record("train/clip_fraction", np.mean(clip_fractions))
        self.logger.record("train/loss", loss.item())
        self.logger.record("train/explained_variance", explained_var)
        self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
        self.logger.record("train/clip_range", clip_range)
