"""Building blocks shared by the model families: parameter specs, layers, losses and optimizers.

Every family exposes `make_program(config) -> Program`: a pure function plus abstract arguments
(`jax.ShapeDtypeStruct` pytrees), so lowering needs no parameter initialisation and the HLO holds no
weights as constants.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp

PyTree = Any

DTYPES: dict[str, Any] = {"f32": jnp.float32, "bf16": jnp.bfloat16}


@dataclass(frozen=True)
class Program:
    """A function to lower and the abstract arguments to lower it with."""

    fn: Callable[..., Any]
    args: tuple[PyTree, ...]


def dtype_of(config: dict[str, Any]) -> Any:
    """Return the jnp dtype named by `config["dtype"]` (`f32` or `bf16`)."""
    return DTYPES[config["dtype"]]


def _is_shape(node: Any) -> bool:
    return isinstance(node, tuple) and all(isinstance(dim, int) for dim in node)


def specs(shapes: PyTree, dtype: Any) -> PyTree:
    """Turn a pytree whose leaves are shape tuples into `ShapeDtypeStruct`s of one dtype."""
    return jax.tree.map(lambda shape: jax.ShapeDtypeStruct(shape, dtype), shapes, is_leaf=_is_shape)


def int_spec(*shape: int) -> jax.ShapeDtypeStruct:
    """Return an int32 argument spec (token ids, labels, indices)."""
    return jax.ShapeDtypeStruct(shape, jnp.int32)


def float_spec(dtype: Any, *shape: int) -> jax.ShapeDtypeStruct:
    """Return a floating-point argument spec."""
    return jax.ShapeDtypeStruct(shape, dtype)


# ---------------------------------------------------------------------------------------------- layers


def dense(x: jax.Array, params: dict[str, jax.Array]) -> jax.Array:
    """Affine map over the last axis with params `w` [in, out] and `b` [out]."""
    return x @ params["w"] + params["b"]


def dense_shapes(fan_in: int, fan_out: int) -> dict[str, tuple[int, ...]]:
    """Shapes of a `dense` layer."""
    return {"w": (fan_in, fan_out), "b": (fan_out,)}


def layer_norm(x: jax.Array, params: dict[str, jax.Array], eps: float = 1e-5) -> jax.Array:
    """LayerNorm over the last axis; statistics in f32 so bf16 variants stay numerically sane."""
    x32 = x.astype(jnp.float32)
    mean = x32.mean(-1, keepdims=True)
    var = jnp.square(x32 - mean).mean(-1, keepdims=True)
    normed = ((x32 - mean) * jax.lax.rsqrt(var + eps)).astype(x.dtype)
    return normed * params["scale"] + params["bias"]


def layer_norm_shapes(width: int) -> dict[str, tuple[int, ...]]:
    """Shapes of a `layer_norm`."""
    return {"scale": (width,), "bias": (width,)}


def rms_norm(x: jax.Array, scale: jax.Array, eps: float = 1e-6) -> jax.Array:
    """T5-style RMS norm (no mean subtraction, no bias)."""
    x32 = x.astype(jnp.float32)
    normed = x32 * jax.lax.rsqrt(jnp.square(x32).mean(-1, keepdims=True) + eps)
    return normed.astype(x.dtype) * scale


def split_heads(x: jax.Array, heads: int) -> jax.Array:
    """[B, S, H*Dh] -> [B, H, S, Dh]."""
    batch, seq, width = x.shape
    return x.reshape(batch, seq, heads, width // heads).transpose(0, 2, 1, 3)


def merge_heads(x: jax.Array) -> jax.Array:
    """[B, H, S, Dh] -> [B, S, H*Dh]."""
    batch, heads, seq, head_dim = x.shape
    return x.transpose(0, 2, 1, 3).reshape(batch, seq, heads * head_dim)


def dot_attention(
    q: jax.Array, k: jax.Array, v: jax.Array, mask: jax.Array | None = None, bias: jax.Array | None = None
) -> jax.Array:
    """Scaled dot-product attention on [B, H, S, Dh] tensors; softmax in f32."""
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k).astype(jnp.float32) / math.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias.astype(jnp.float32)
    if mask is not None:
        scores = jnp.where(mask, scores, jnp.float32(-1e9))
    probs = jax.nn.softmax(scores, axis=-1).astype(q.dtype)
    return jnp.einsum("bhqk,bhkd->bhqd", probs, v)


def self_attention(
    x: jax.Array, params: dict[str, Any], heads: int, mask: jax.Array | None = None
) -> jax.Array:
    """Multi-head self-attention with a fused QKV projection (`qkv`) and an output projection (`out`)."""
    q, k, v = jnp.split(dense(x, params["qkv"]), 3, axis=-1)
    attended = dot_attention(split_heads(q, heads), split_heads(k, heads), split_heads(v, heads), mask)
    return dense(merge_heads(attended), params["out"])


def self_attention_shapes(width: int) -> dict[str, Any]:
    """Shapes of `self_attention`."""
    return {"qkv": dense_shapes(width, 3 * width), "out": dense_shapes(width, width)}


def causal_mask(seq: int) -> jax.Array:
    """[1, 1, S, S] lower-triangular boolean mask."""
    return jnp.tril(jnp.ones((seq, seq), dtype=bool))[None, None]


def mlp(x: jax.Array, params: dict[str, Any], activation: Callable[[jax.Array], jax.Array]) -> jax.Array:
    """Two-layer feed-forward block (`fc` then `proj`)."""
    return dense(activation(dense(x, params["fc"])), params["proj"])


def mlp_shapes(width: int, hidden: int) -> dict[str, Any]:
    """Shapes of `mlp`."""
    return {"fc": dense_shapes(width, hidden), "proj": dense_shapes(hidden, width)}


# ---------------------------------------------------------------------------------------------- losses


def cross_entropy(logits: jax.Array, labels: jax.Array, weights: jax.Array | None = None) -> jax.Array:
    """Mean softmax cross-entropy of integer labels, computed in f32; `weights` masks positions."""
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    picked = jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    if weights is None:
        return -picked.mean()
    weights = weights.astype(jnp.float32)
    return -(picked * weights).sum() / jnp.maximum(weights.sum(), 1.0)


# ---------------------------------------------------------------------------------------------- optimizers


def adam_state_specs(param_specs: PyTree) -> dict[str, PyTree]:
    """Abstract Adam state matching `param_specs`: first/second moments and an int32 step."""
    return {"m": param_specs, "v": param_specs, "step": jax.ShapeDtypeStruct((), jnp.int32)}


def adam_update(
    params: PyTree, grads: PyTree, state: dict[str, PyTree], lr: float = 1e-3, weight_decay: float = 0.0
) -> tuple[PyTree, dict[str, PyTree]]:
    """One AdamW step (bias-corrected, decoupled weight decay); returns new params and state."""
    b1, b2, eps = 0.9, 0.999, 1e-8
    step = state["step"] + 1
    m = jax.tree.map(lambda m, g: b1 * m + (1 - b1) * g, state["m"], grads)
    v = jax.tree.map(lambda v, g: b2 * v + (1 - b2) * jnp.square(g), state["v"], grads)
    t = step.astype(jnp.float32)
    correction = jnp.sqrt(1 - b2**t) / (1 - b1**t)

    def apply(p: jax.Array, m: jax.Array, v: jax.Array) -> jax.Array:
        direction = correction * m.astype(jnp.float32) / (jnp.sqrt(v.astype(jnp.float32)) + eps)
        return (p - lr * (direction + weight_decay * p.astype(jnp.float32))).astype(p.dtype)

    return jax.tree.map(apply, params, m, v), {"m": m, "v": v, "step": step}


def momentum_update(
    params: PyTree,
    grads: PyTree,
    velocity: PyTree,
    lr: float = 0.1,
    momentum: float = 0.9,
    weight_decay: float = 5e-4,
) -> tuple[PyTree, PyTree]:
    """One SGD step with heavy-ball momentum and L2 weight decay (the classic ResNet recipe)."""
    velocity = jax.tree.map(lambda v, g, p: momentum * v + g + weight_decay * p, velocity, grads, params)
    params = jax.tree.map(lambda p, v: (p - lr * v).astype(p.dtype), params, velocity)
    return params, velocity
