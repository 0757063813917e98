"""An encoder classifier in equinox: `eqx.nn.Embedding`, `eqx.nn.MultiheadAttention` with
`eqx.nn.RotaryPositionalEmbedding` on queries and keys, `eqx.nn.LayerNorm`, `eqx.nn.MLP`; per-example
code vmapped over the batch, as equinox is written. An AdamW step or class probabilities."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.equinox_models.eqx_program import program


class Block(eqx.Module):
    """Pre-LN block: rotary multi-head self-attention, then an MLP."""

    norm1: eqx.nn.LayerNorm
    attention: eqx.nn.MultiheadAttention
    rotary: eqx.nn.RotaryPositionalEmbedding
    norm2: eqx.nn.LayerNorm
    mlp: eqx.nn.MLP

    def __init__(self, width: int, heads: int, dtype: Any, key: jax.Array) -> None:
        first, second = jax.random.split(key)
        self.norm1 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.attention = eqx.nn.MultiheadAttention(heads, width, dtype=dtype, key=first)
        self.rotary = eqx.nn.RotaryPositionalEmbedding(width // heads, dtype=dtype)
        self.norm2 = eqx.nn.LayerNorm(width, dtype=dtype)
        self.mlp = eqx.nn.MLP(width, width, 4 * width, 1, activation=jax.nn.gelu, dtype=dtype, key=second)

    def __call__(self, x: jax.Array) -> jax.Array:
        per_head = jax.vmap(self.rotary, in_axes=1, out_axes=1)  # [seq, heads, dim]: rotate each head

        def rotate(q: jax.Array, k: jax.Array, v: jax.Array) -> tuple[jax.Array, jax.Array, jax.Array]:
            return per_head(q), per_head(k), v

        y = jax.vmap(self.norm1)(x)
        x = x + self.attention(y, y, y, process_heads=rotate)
        return x + jax.vmap(self.mlp)(jax.vmap(self.norm2)(x))


class Encoder(eqx.Module):
    """Embedding, blocks, mean pooling, linear head."""

    embed: eqx.nn.Embedding
    blocks: list[Block]
    norm: eqx.nn.LayerNorm
    head: eqx.nn.Linear

    def __init__(self, config: dict[str, Any], dtype: Any, key: jax.Array) -> None:
        keys = jax.random.split(key, config["layers"] + 2)
        width = config["width"]
        self.embed = eqx.nn.Embedding(config["vocab"], width, dtype=dtype, key=keys[0])
        self.blocks = [Block(width, config["heads"], dtype, k) for k in keys[2:]]
        self.norm = eqx.nn.LayerNorm(width, dtype=dtype)
        self.head = eqx.nn.Linear(width, config["classes"], dtype=dtype, key=keys[1])

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = jax.vmap(self.embed)(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(jnp.mean(x, axis=0)))


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: cross-entropy and an AdamW step; `mode=infer`: class probabilities."""
    dtype = training.compute_dtype(config)
    tokens = jax.ShapeDtypeStruct((config["batch"], config["seq"]), jnp.int32)
    labels = training.labels(config)

    def loss(model: Encoder, state: Any, inputs: tuple[jax.Array, ...]) -> tuple[jax.Array, Any]:
        x, y = inputs
        return training.classification_loss(jax.vmap(model)(x), y), state

    def infer(model: Encoder, state: Any, inputs: tuple[jax.Array, ...]) -> jax.Array:
        return training.probabilities(jax.vmap(model)(inputs[0]))

    make = lambda: Encoder(config, dtype, jax.random.key(0))  # noqa: E731
    inputs = (tokens, labels) if config["mode"] == "train" else (tokens,)
    return program(eqx.filter_eval_shape(make), config, loss, infer, inputs)
