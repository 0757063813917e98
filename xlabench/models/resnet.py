"""ResNet (CIFAR-style basic blocks, NHWC): a training step with batch norm and SGD-momentum; inference."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common

_BN_MOMENTUM = 0.9


def _conv_shapes(kernel: int, c_in: int, c_out: int) -> tuple[int, ...]:
    return (kernel, kernel, c_in, c_out)


def _bn_shapes(channels: int) -> dict[str, tuple[int, ...]]:
    return {"scale": (channels,), "bias": (channels,)}


def _stats_shapes(channels: int) -> dict[str, tuple[int, ...]]:
    return {"mean": (channels,), "var": (channels,)}


def shapes(config: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(parameter shapes, batch-norm running-statistics shapes)."""
    width = config["width"]
    params: dict[str, Any] = {"stem": _conv_shapes(3, 3, width), "stem_bn": _bn_shapes(width), "stages": []}
    stats: dict[str, Any] = {"stem_bn": _stats_shapes(width), "stages": []}
    c_in = width
    for stage, blocks in enumerate(config["blocks"]):
        c_out = width * 2**stage
        stage_params, stage_stats = [], []
        for block in range(blocks):
            first = block == 0
            p = {
                "conv1": _conv_shapes(3, c_in, c_out),
                "bn1": _bn_shapes(c_out),
                "conv2": _conv_shapes(3, c_out, c_out),
                "bn2": _bn_shapes(c_out),
            }
            s = {"bn1": _stats_shapes(c_out), "bn2": _stats_shapes(c_out)}
            if first and c_in != c_out:
                p["proj"] = _conv_shapes(1, c_in, c_out)
                p["proj_bn"] = _bn_shapes(c_out)
                s["proj_bn"] = _stats_shapes(c_out)
            stage_params.append(p)
            stage_stats.append(s)
            c_in = c_out
        params["stages"].append(stage_params)
        stats["stages"].append(stage_stats)
    params["head"] = common.dense_shapes(c_in, config["classes"])
    return params, stats


def _conv(x: jax.Array, kernel: jax.Array, stride: int) -> jax.Array:
    return jax.lax.conv_general_dilated(
        x, kernel, (stride, stride), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")
    )


class _BatchNorm:
    """Applies batch norm in train mode (batch statistics, collecting updated running stats) or eval mode."""

    def __init__(self, train: bool) -> None:
        self.train = train

    def __call__(
        self, x: jax.Array, params: dict[str, jax.Array], stats: dict[str, jax.Array]
    ) -> tuple[jax.Array, dict[str, jax.Array]]:
        x32 = x.astype(jnp.float32)
        if self.train:
            mean, var = x32.mean((0, 1, 2)), x32.var((0, 1, 2))
            new_stats = {
                "mean": _BN_MOMENTUM * stats["mean"] + (1 - _BN_MOMENTUM) * mean.astype(stats["mean"].dtype),
                "var": _BN_MOMENTUM * stats["var"] + (1 - _BN_MOMENTUM) * var.astype(stats["var"].dtype),
            }
        else:
            mean, var = stats["mean"].astype(jnp.float32), stats["var"].astype(jnp.float32)
            new_stats = stats
        y = ((x32 - mean) * jax.lax.rsqrt(var + 1e-5)).astype(x.dtype)
        return y * params["scale"] + params["bias"], new_stats


def forward(
    params: dict[str, Any], stats: dict[str, Any], images: jax.Array, train: bool
) -> tuple[jax.Array, dict[str, Any]]:
    """Logits and (in train mode) updated running statistics."""
    bn = _BatchNorm(train)
    new_stats: dict[str, Any] = {"stages": []}
    x, new_stats["stem_bn"] = bn(_conv(images, params["stem"], 1), params["stem_bn"], stats["stem_bn"])
    x = jax.nn.relu(x)
    for stage, (stage_params, stage_stats) in enumerate(zip(params["stages"], stats["stages"], strict=True)):
        collected = []
        for block, (p, s) in enumerate(zip(stage_params, stage_stats, strict=True)):
            stride = 2 if stage > 0 and block == 0 else 1
            ns: dict[str, Any] = {}
            y, ns["bn1"] = bn(_conv(x, p["conv1"], stride), p["bn1"], s["bn1"])
            y, ns["bn2"] = bn(_conv(jax.nn.relu(y), p["conv2"], 1), p["bn2"], s["bn2"])
            if "proj" in p:
                shortcut, ns["proj_bn"] = bn(_conv(x, p["proj"], stride), p["proj_bn"], s["proj_bn"])
            elif stride != 1:
                shortcut = x[:, ::stride, ::stride]
            else:
                shortcut = x
            x = jax.nn.relu(y + shortcut)
            collected.append(ns)
        new_stats["stages"].append(collected)
    pooled = x.mean((1, 2))
    return common.dense(pooled, params["head"]), new_stats


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: loss, grads, SGD-momentum and running-stat update; `mode=infer`: eval-mode softmax."""
    dtype = common.dtype_of(config)
    param_shapes, stats_shapes = shapes(config)
    param_specs = common.specs(param_shapes, dtype)
    stats_specs = common.specs(stats_shapes, dtype)
    size = config["image"]
    images = common.float_spec(dtype, config["batch"], size, size, 3)

    if config["mode"] == "train":

        def train_step(
            params: Any, velocity: Any, stats: Any, images: jax.Array, labels: jax.Array
        ) -> tuple[Any, Any, Any, jax.Array]:
            def loss_fn(p: Any) -> tuple[jax.Array, Any]:
                logits, new_stats = forward(p, stats, images, train=True)
                return common.cross_entropy(logits, labels), new_stats

            (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
            params, velocity = common.momentum_update(params, grads, velocity)
            return params, velocity, new_stats, loss

        labels = common.int_spec(config["batch"])
        return common.Program(train_step, (param_specs, param_specs, stats_specs, images, labels))

    def infer(params: Any, stats: Any, images: jax.Array) -> jax.Array:
        logits, _ = forward(params, stats, images, train=False)
        return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, stats_specs, images))
