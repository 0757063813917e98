"""DenseNet-BC in flax linen: dense blocks whose layers see every earlier layer's features
(concatenation; BN-ReLU-1x1-BN-ReLU-3x3 bottlenecks), transitions with compression and average
pooling; an SGD-Nesterov training step, inference."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.linen import classifier_program


class DenseNet(nn.Module):
    """`blocks` dense blocks of `layers` layers each, growth rate `growth`, compression 0.5."""

    blocks: tuple[int, ...]
    growth: int
    classes: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5,
                       dtype=self.dtype)  # fmt: skip
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype)
        x = conv(2 * self.growth, (3, 3))(x)
        for index, layers in enumerate(self.blocks):
            for _ in range(layers):
                y = conv(4 * self.growth, (1, 1))(nn.relu(norm()(x)))
                y = conv(self.growth, (3, 3))(nn.relu(norm()(y)))
                x = jnp.concatenate([x, y], axis=-1)
            if index < len(self.blocks) - 1:
                x = conv(x.shape[-1] // 2, (1, 1))(nn.relu(norm()(x)))
                x = nn.avg_pool(x, (2, 2), strides=(2, 2))
        x = jnp.mean(nn.relu(norm()(x)), axis=(1, 2))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: SGD-Nesterov step; `mode=infer`: probabilities."""
    model = DenseNet(tuple(config["blocks"]), config["growth"], config["classes"],
                     training.compute_dtype(config))  # fmt: skip
    return classifier_program(model, config, training.images(config), "sgd")
