"""EfficientNet-style network in flax linen: MBConv blocks (1x1 expansion, depthwise convolution via
`feature_group_count`, squeeze-and-excitation, swish, 1x1 projection, batch norm, residuals); an AdamW
training step, inference."""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.linen import classifier_program


class MBConv(nn.Module):
    """Inverted residual block with squeeze-and-excitation."""

    features: int
    expand: int
    kernel: int
    strides: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        norm = partial(nn.BatchNorm, use_running_average=not train, momentum=0.99, epsilon=1e-3,
                       dtype=self.dtype)  # fmt: skip
        conv = partial(nn.Conv, use_bias=False, dtype=self.dtype)
        channels = x.shape[-1] * self.expand
        y = x
        if self.expand != 1:
            y = nn.swish(norm()(conv(channels, (1, 1))(y)))
        y = conv(channels, (self.kernel, self.kernel), self.strides, feature_group_count=channels)(y)
        y = nn.swish(norm()(y))
        squeezed = jnp.mean(y, axis=(1, 2), keepdims=True)
        squeezed = nn.swish(nn.Conv(max(1, x.shape[-1] // 4), (1, 1), dtype=self.dtype)(squeezed))
        y = y * nn.sigmoid(nn.Conv(channels, (1, 1), dtype=self.dtype)(squeezed))
        y = norm()(conv(self.features, (1, 1))(y))
        if self.strides == 1 and x.shape[-1] == self.features:
            y = y + x
        return y


class EfficientNet(nn.Module):
    """Stem, stages of MBConv blocks (`stages`: (features, expand, kernel, strides, repeats)), head."""

    stages: tuple[tuple[int, int, int, int, int], ...]
    stem: int
    classes: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = nn.Conv(self.stem, (3, 3), (2, 2), use_bias=False, dtype=self.dtype)(x)
        x = nn.swish(nn.BatchNorm(use_running_average=not train, dtype=self.dtype)(x))
        for features, expand, kernel, strides, repeats in self.stages:
            for index in range(repeats):
                x = MBConv(features, expand, kernel, strides if index == 0 else 1, self.dtype)(x, train)
        x = nn.Conv(4 * self.stages[-1][0], (1, 1), use_bias=False, dtype=self.dtype)(x)
        x = nn.swish(nn.BatchNorm(use_running_average=not train, dtype=self.dtype)(x))
        return nn.Dense(self.classes, dtype=self.dtype)(jnp.mean(x, axis=(1, 2)))


# Stage tables: (features, expand, kernel, strides, repeats), a width- and depth-scaled B0 prefix.
STAGES: dict[str, tuple[tuple[int, int, int, int, int], ...]] = {
    "s": ((8, 1, 3, 1, 1), (12, 6, 3, 2, 1), (20, 6, 5, 2, 1)),
    "m": ((8, 1, 3, 1, 1), (12, 6, 3, 2, 2), (20, 6, 5, 2, 2), (40, 6, 3, 2, 2)),
    "l": ((16, 1, 3, 1, 1), (24, 6, 3, 2, 2), (40, 6, 5, 2, 2), (80, 6, 3, 2, 3), (112, 6, 5, 1, 2)),
}


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: AdamW step (`training.optimizer("adamw")`); `mode=infer`: probabilities."""
    model = EfficientNet(STAGES[config["stages"]], config["stem"], config["classes"],
                         training.compute_dtype(config))  # fmt: skip
    return classifier_program(model, config, training.images(config), "adamw")
