"""ResNet v1 in flax linen (basic or bottleneck blocks, `nn.BatchNorm`, projection shortcuts): an
SGD-Nesterov training step with weight decay and a cosine schedule; inference with running statistics."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.linen import classifier_program


class Block(nn.Module):
    """A residual block: two 3x3 convolutions, or 1x1-3x3-1x1 with 4x expansion (`bottleneck`)."""

    filters: int
    strides: int
    bottleneck: bool
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype)
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.9, epsilon=1e-5,
                       dtype=self.dtype)  # fmt: skip
        if self.bottleneck:
            y = nn.relu(norm()(conv(self.filters, (1, 1))(x)))
            y = nn.relu(norm()(conv(self.filters, (3, 3), self.strides)(y)))
            y = norm(scale_init=nn.initializers.zeros_init())(conv(self.filters * 4, (1, 1))(y))
        else:
            y = nn.relu(norm()(conv(self.filters, (3, 3), self.strides)(x)))
            y = norm(scale_init=nn.initializers.zeros_init())(conv(self.filters, (3, 3))(y))
        if x.shape != y.shape:
            x = norm(name="norm_proj")(conv(y.shape[-1], (1, 1), self.strides, name="conv_proj")(x))
        return nn.relu(x + y)


class ResNet(nn.Module):
    """Stem convolution and max pool, stages of blocks doubling the width, mean pool, dense head."""

    stages: tuple[int, ...]
    width: int
    bottleneck: bool
    classes: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = nn.Conv(self.width, (3, 3), use_bias=False, dtype=self.dtype, name="conv_init")(x)
        x = nn.relu(nn.BatchNorm(use_running_average=not train, momentum=0.9, dtype=self.dtype)(x))
        x = nn.max_pool(x, (3, 3), strides=(2, 2), padding="SAME")
        for stage, blocks in enumerate(self.stages):
            for block in range(blocks):
                strides = 2 if stage > 0 and block == 0 else 1
                x = Block(self.width * 2**stage, strides, self.bottleneck, self.dtype)(x, train)
        x = jnp.mean(x, axis=(1, 2))
        return nn.Dense(self.classes, dtype=self.dtype)(x)


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: SGD-Nesterov step (`training.optimizer("sgd")`); `mode=infer`: probabilities."""
    model = ResNet(tuple(config["stages"]), config["width"], config["block"] == "bottleneck",
                   config["classes"], training.compute_dtype(config))  # fmt: skip
    return classifier_program(model, config, training.images(config), "sgd")
