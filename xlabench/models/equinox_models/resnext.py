"""ResNeXt in equinox: bottleneck blocks with grouped 3x3 convolutions (`eqx.nn.Conv2d(groups=...)`),
`eqx.nn.BatchNorm` whose running statistics live in an `eqx.nn.State` (vmapped with an axis name, as
equinox's batch norm requires). An AdamW step (statistics updated) or inference."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.equinox_models.eqx_program import program

_AXIS = "batch"


class Bottleneck(eqx.Module):
    """1x1 reduce, grouped 3x3, 1x1 expand, each followed by batch norm; projection when shapes change."""

    convs: list[eqx.nn.Conv2d]
    norms: list[eqx.nn.BatchNorm]
    projection: eqx.nn.Conv2d | None
    projection_norm: eqx.nn.BatchNorm | None

    def __init__(self, c_in: int, c_out: int, groups: int, stride: int, dtype: Any, key: jax.Array) -> None:
        keys = jax.random.split(key, 4)
        inner = c_out // 2
        self.convs = [
            eqx.nn.Conv2d(c_in, inner, 1, use_bias=False, dtype=dtype, key=keys[0]),
            eqx.nn.Conv2d(inner, inner, 3, stride=stride, padding=1, groups=groups, use_bias=False,
                          dtype=dtype, key=keys[1]),
            eqx.nn.Conv2d(inner, c_out, 1, use_bias=False, dtype=dtype, key=keys[2]),
        ]  # fmt: skip
        self.norms = [eqx.nn.BatchNorm(c, _AXIS, dtype=dtype) for c in (inner, inner, c_out)]
        project = stride != 1 or c_in != c_out
        self.projection = (
            eqx.nn.Conv2d(c_in, c_out, 1, stride=stride, use_bias=False, dtype=dtype, key=keys[3])
            if project else None
        )  # fmt: skip
        self.projection_norm = eqx.nn.BatchNorm(c_out, _AXIS, dtype=dtype) if project else None

    def __call__(self, x: jax.Array, state: eqx.nn.State) -> tuple[jax.Array, eqx.nn.State]:
        y = x
        for index, (conv, norm) in enumerate(zip(self.convs, self.norms, strict=True)):
            y, state = norm(conv(y), state)
            y = jax.nn.relu(y) if index < 2 else y
        if self.projection is not None and self.projection_norm is not None:
            x, state = self.projection_norm(self.projection(x), state)
        return jax.nn.relu(x + y), state


class ResNeXt(eqx.Module):
    """Stem, `blocks[i]` bottlenecks at width `width * 2**i * 2`, mean pool, linear head."""

    stem: eqx.nn.Conv2d
    stem_norm: eqx.nn.BatchNorm
    blocks: list[Bottleneck]
    head: eqx.nn.Linear

    def __init__(self, config: dict[str, Any], dtype: Any, key: jax.Array) -> None:
        keys = iter(jax.random.split(key, sum(config["blocks"]) + 2))
        width = config["width"]
        self.stem = eqx.nn.Conv2d(3, width, 3, padding=1, use_bias=False, dtype=dtype, key=next(keys))
        self.stem_norm = eqx.nn.BatchNorm(width, _AXIS, dtype=dtype)
        self.blocks = []
        c_in = width
        for stage, count in enumerate(config["blocks"]):
            c_out = width * 2 ** (stage + 1)
            for index in range(count):
                stride = 2 if stage > 0 and index == 0 else 1
                self.blocks.append(Bottleneck(c_in, c_out, config["groups"], stride, dtype, next(keys)))
                c_in = c_out
        self.head = eqx.nn.Linear(c_in, config["classes"], dtype=dtype, key=next(keys))

    def __call__(self, x: jax.Array, state: eqx.nn.State) -> tuple[jax.Array, eqx.nn.State]:
        x, state = self.stem_norm(self.stem(x.astype(self.stem.weight.dtype)), state)
        x = jax.nn.relu(x)
        for block in self.blocks:
            x, state = block(x, state)
        return self.head(jnp.mean(x, axis=(1, 2))), state


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: cross-entropy with batch statistics, an AdamW step; `mode=infer`: probabilities
    with running statistics."""
    dtype = training.compute_dtype(config)
    # Model and state from one construction: the state is keyed by the model's own state indices.
    model, state = eqx.filter_eval_shape(
        lambda: eqx.nn.make_with_state(ResNeXt)(config, dtype, jax.random.key(0))
    )
    images = jax.ShapeDtypeStruct((config["batch"], 3, config["image"], config["image"]), jnp.float32)

    def run(model: ResNeXt, state: Any, x: jax.Array) -> tuple[jax.Array, Any]:
        return jax.vmap(model, axis_name=_AXIS, in_axes=(0, None), out_axes=(0, None))(x, state)

    def loss(model: ResNeXt, state: Any, inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, Any]:
        logits, state = run(model, state, inputs[0])
        return training.classification_loss(logits, inputs[1]), state

    def infer(model: ResNeXt, state: Any, inputs: tuple[jax.Array, ...]) -> jax.Array:
        logits, _ = run(eqx.nn.inference_mode(model), state, inputs[0])
        return training.probabilities(logits)

    inputs = (images, training.labels(config)) if config["mode"] == "train" else (images,)
    return program(model, config, loss, infer, inputs, state)
