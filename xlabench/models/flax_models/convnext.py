"""ConvNeXt in flax nnx: patchify stem, blocks of a 7x7 depthwise convolution (`nnx.Conv` with
`feature_group_count`), `nnx.LayerNorm`, a 4x GELU MLP and layer scale; strided downsampling between
stages. An AdamW step (warmup-cosine, clipping) or inference."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.nnx_program import classifier_program


class Block(nnx.Module):
    """Depthwise 7x7 convolution, layer norm, pointwise MLP, layer scale, residual."""

    def __init__(self, channels: int, dtype: Any, rngs: nnx.Rngs) -> None:
        self.depthwise = nnx.Conv(channels, channels, (7, 7), feature_group_count=channels, dtype=dtype,
                                  rngs=rngs)  # fmt: skip
        self.norm = nnx.LayerNorm(channels, epsilon=1e-6, dtype=dtype, rngs=rngs)
        self.up = nnx.Linear(channels, 4 * channels, dtype=dtype, rngs=rngs)
        self.down = nnx.Linear(4 * channels, channels, dtype=dtype, rngs=rngs)
        self.scale = nnx.Param(jnp.full((channels,), 1e-6))

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.down(nnx.gelu(self.up(self.norm(self.depthwise(x)))))
        return x + self.scale.value.astype(y.dtype) * y


class ConvNeXt(nnx.Module):
    """`depths[i]` blocks at width `widths[i]`, a 4x4 patchify stem, 2x2 strided downsampling."""

    def __init__(
        self, depths: list[int], widths: list[int], classes: int, dtype: Any, rngs: nnx.Rngs
    ) -> None:
        self.stem = nnx.Conv(3, widths[0], (4, 4), strides=(4, 4), dtype=dtype, rngs=rngs)
        self.stem_norm = nnx.LayerNorm(widths[0], epsilon=1e-6, dtype=dtype, rngs=rngs)
        self.downsample = nnx.List(
            [nnx.Sequential(nnx.LayerNorm(a, epsilon=1e-6, dtype=dtype, rngs=rngs),
                            nnx.Conv(a, b, (2, 2), strides=(2, 2), dtype=dtype, rngs=rngs))
             for a, b in zip(widths[:-1], widths[1:], strict=True)]
        )  # fmt: skip
        self.stages = nnx.List(
            [nnx.List([Block(w, dtype, rngs) for _ in range(d)]) for d, w in zip(depths, widths, strict=True)]
        )
        self.head_norm = nnx.LayerNorm(widths[-1], epsilon=1e-6, dtype=dtype, rngs=rngs)
        self.head = nnx.Linear(widths[-1], classes, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = self.stem_norm(self.stem(x))
        for index, stage in enumerate(self.stages):
            if index:
                x = self.downsample[index - 1](x)
            for block in stage:
                x = block(x)
        return self.head(self.head_norm(jnp.mean(x, axis=(1, 2))))


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: AdamW step; `mode=infer`: probabilities."""
    dtype = training.compute_dtype(config)
    widths = [config["width"] * 2**i for i in range(len(config["depths"]))]

    def make() -> ConvNeXt:
        return ConvNeXt(config["depths"], widths, config["classes"], dtype, nnx.Rngs(0))

    return classifier_program(make, config, training.images(config), training.labels(config), "adamw")
