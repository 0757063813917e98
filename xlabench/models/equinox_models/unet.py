"""A small diffusion U-Net in equinox: `eqx.nn.Conv2d` residual blocks with `eqx.nn.GroupNorm` and a
sinusoidal time embedding, strided downsampling, `eqx.nn.ConvTranspose2d` upsampling, skip connections.
A denoising training step (AdamW) or one noise prediction; per-example code vmapped over the batch."""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.equinox_models.eqx_program import program


class ResBlock(eqx.Module):
    """GroupNorm-SiLU-conv twice, the time embedding added between, a 1x1 shortcut when widths differ."""

    norm1: eqx.nn.GroupNorm
    conv1: eqx.nn.Conv2d
    time: eqx.nn.Linear
    norm2: eqx.nn.GroupNorm
    conv2: eqx.nn.Conv2d
    shortcut: eqx.nn.Conv2d | None

    def __init__(self, c_in: int, c_out: int, time_width: int, dtype: Any, key: jax.Array) -> None:
        keys = jax.random.split(key, 4)
        self.norm1 = eqx.nn.GroupNorm(min(4, c_in), c_in, dtype=dtype)
        self.conv1 = eqx.nn.Conv2d(c_in, c_out, 3, padding=1, dtype=dtype, key=keys[0])
        self.time = eqx.nn.Linear(time_width, c_out, dtype=dtype, key=keys[1])
        self.norm2 = eqx.nn.GroupNorm(min(4, c_out), c_out, dtype=dtype)
        self.conv2 = eqx.nn.Conv2d(c_out, c_out, 3, padding=1, dtype=dtype, key=keys[2])
        self.shortcut = None if c_in == c_out else eqx.nn.Conv2d(c_in, c_out, 1, dtype=dtype, key=keys[3])

    def __call__(self, x: jax.Array, t: jax.Array) -> jax.Array:
        y = self.conv1(jax.nn.silu(self.norm1(x)).astype(x.dtype)) + self.time(t)[:, None, None]
        y = self.conv2(jax.nn.silu(self.norm2(y)).astype(x.dtype))
        return y + (x if self.shortcut is None else self.shortcut(x))


class UNet(eqx.Module):
    """Widths `width * multipliers`, one ResBlock a level each way, channels-first images."""

    time_width: int = eqx.field(static=True)
    stem: eqx.nn.Conv2d
    down: list[ResBlock]
    downsample: list[eqx.nn.Conv2d]
    middle: ResBlock
    upsample: list[eqx.nn.ConvTranspose2d]
    up: list[ResBlock]
    out: eqx.nn.Conv2d

    def __init__(self, width: int, levels: int, dtype: Any, key: jax.Array) -> None:
        keys = iter(jax.random.split(key, 4 * levels + 4))
        widths = [width * 2**i for i in range(levels)]
        self.time_width = 4 * width
        self.stem = eqx.nn.Conv2d(3, width, 3, padding=1, dtype=dtype, key=next(keys))
        self.down, self.downsample = [], []
        c = width
        for w in widths:
            self.down.append(ResBlock(c, w, self.time_width, dtype, next(keys)))
            self.downsample.append(eqx.nn.Conv2d(w, w, 3, stride=2, padding=1, dtype=dtype, key=next(keys)))
            c = w
        self.middle = ResBlock(c, c, self.time_width, dtype, next(keys))
        self.upsample, self.up = [], []
        for w in reversed(widths):
            self.upsample.append(eqx.nn.ConvTranspose2d(c, c, 2, stride=2, dtype=dtype, key=next(keys)))
            self.up.append(ResBlock(c + w, w, self.time_width, dtype, next(keys)))
            c = w
        self.out = eqx.nn.Conv2d(c, 3, 3, padding=1, dtype=dtype, key=next(keys))

    def __call__(self, x: jax.Array, time: jax.Array) -> jax.Array:
        half = self.time_width // 2
        frequencies = jnp.exp(-math.log(10_000.0) * jnp.arange(half) / half)
        dtype = self.stem.weight.dtype
        t = jnp.concatenate([jnp.sin(time * frequencies), jnp.cos(time * frequencies)]).astype(dtype)
        x = self.stem(x.astype(dtype))
        skips = []
        for block, downsample in zip(self.down, self.downsample, strict=True):
            x = block(x, t)
            skips.append(x)
            x = downsample(x)
        x = self.middle(x, t)
        for upsample, block in zip(self.upsample, self.up, strict=True):
            x = block(jnp.concatenate([upsample(x), skips.pop()], axis=0), t)
        return self.out(x).astype(jnp.float32)


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: noise-prediction MSE at given times and noise, an AdamW step; `mode=infer`: the
    predicted noise."""
    dtype = training.compute_dtype(config)
    size = (config["batch"], 3, config["image"], config["image"])
    images = jax.ShapeDtypeStruct(size, jnp.float32)
    times = jax.ShapeDtypeStruct((config["batch"],), jnp.float32)

    def noisy(inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        x, t, noise = inputs
        signal = jnp.cos(t)[:, None, None, None]
        return signal * x + jnp.sqrt(1 - signal**2) * noise, t

    def loss(model: UNet, state: Any, inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, Any]:
        x, t = noisy(inputs)
        return jnp.mean(jnp.square(jax.vmap(model)(x, t) - inputs[2])), state

    def infer(model: UNet, state: Any, inputs: tuple[jax.Array, ...]) -> jax.Array:
        return jax.vmap(model)(*noisy(inputs))

    make = lambda: UNet(config["width"], config["levels"], dtype, jax.random.key(0))  # noqa: E731
    return program(eqx.filter_eval_shape(make), config, loss, infer, (images, times, images))
