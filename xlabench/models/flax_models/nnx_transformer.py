"""A Llama-style decoder in flax nnx: rotary position embeddings, `nnx.RMSNorm`, grouped attention heads
as `nnx.Linear` projections, SwiGLU MLP; in mixed bf16 the rotary products and the attention softmax run
in bf16 as a user's code does. An AdamW step (warmup-cosine, clipping) or next-token probabilities."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.nnx_program import split_abstract


def rotary(x: jax.Array, base: float = 10_000.0) -> jax.Array:
    """Rotate pairs of features of [B, S, H, D] by position-dependent angles (RoPE), in x's dtype."""
    seq, dim = x.shape[1], x.shape[-1]
    inverse = 1.0 / (base ** (jnp.arange(0, dim, 2, dtype=jnp.float32) / dim))
    angles = jnp.arange(seq, dtype=jnp.float32)[:, None] * inverse[None, :]
    sin = jnp.sin(angles).astype(x.dtype)[None, :, None, :]
    cos = jnp.cos(angles).astype(x.dtype)[None, :, None, :]
    first, second = x[..., : dim // 2], x[..., dim // 2 :]
    return jnp.concatenate([first * cos - second * sin, second * cos + first * sin], axis=-1)


class Attention(nnx.Module):
    """Causal attention with `heads` query heads sharing `kv_heads` key/value heads."""

    def __init__(self, width: int, heads: int, kv_heads: int, dtype: Any, rngs: nnx.Rngs) -> None:
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, width // heads
        linear = dict(use_bias=False, dtype=dtype, rngs=rngs)
        self.q = nnx.Linear(width, heads * self.head_dim, **linear)
        self.kv = nnx.Linear(width, 2 * kv_heads * self.head_dim, **linear)
        self.out = nnx.Linear(heads * self.head_dim, width, **linear)

    def __call__(self, x: jax.Array) -> jax.Array:
        batch, seq, _ = x.shape
        q = rotary(self.q(x).reshape(batch, seq, self.heads, self.head_dim))
        k, v = jnp.split(self.kv(x).reshape(batch, seq, 2 * self.kv_heads, self.head_dim), 2, axis=2)
        k = rotary(k)
        repeat = self.heads // self.kv_heads
        k, v = jnp.repeat(k, repeat, axis=2), jnp.repeat(v, repeat, axis=2)
        scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(self.head_dim).astype(q.dtype)
        causal = jnp.tril(jnp.ones((seq, seq), dtype=bool))
        weights = jax.nn.softmax(jnp.where(causal, scores, jnp.finfo(scores.dtype).min), axis=-1)
        return self.out(jnp.einsum("bhqk,bkhd->bqhd", weights, v).reshape(batch, seq, -1))


class Block(nnx.Module):
    """RMSNorm, attention, RMSNorm, SwiGLU."""

    def __init__(self, width: int, heads: int, kv_heads: int, dtype: Any, rngs: nnx.Rngs) -> None:
        self.attention_norm = nnx.RMSNorm(width, dtype=dtype, rngs=rngs)
        self.attention = Attention(width, heads, kv_heads, dtype, rngs)
        self.mlp_norm = nnx.RMSNorm(width, dtype=dtype, rngs=rngs)
        hidden = 8 * width // 3
        self.gate = nnx.Linear(width, hidden, use_bias=False, dtype=dtype, rngs=rngs)
        self.up = nnx.Linear(width, hidden, use_bias=False, dtype=dtype, rngs=rngs)
        self.down = nnx.Linear(hidden, width, use_bias=False, dtype=dtype, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        x = x + self.attention(self.attention_norm(x))
        y = self.mlp_norm(x)
        return x + self.down(nnx.silu(self.gate(y)) * self.up(y))


class Decoder(nnx.Module):
    """Embedding, `layers` blocks, final RMSNorm, untied output projection."""

    def __init__(self, config: dict[str, Any], dtype: Any, rngs: nnx.Rngs) -> None:
        width = config["width"]
        self.embed = nnx.Embed(config["vocab"], width, dtype=dtype, rngs=rngs)
        self.blocks = nnx.List(
            [Block(width, config["heads"], config["kv_heads"], dtype, rngs) for _ in range(config["layers"])]
        )
        self.norm = nnx.RMSNorm(width, dtype=dtype, rngs=rngs)
        self.logits = nnx.Linear(width, config["vocab"], use_bias=False, dtype=dtype, rngs=rngs)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.logits(self.norm(x))


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: next-token cross-entropy and an AdamW step; `mode=infer`: last-token probabilities."""
    dtype = training.compute_dtype(config)
    graphdef, params, rest = split_abstract(lambda: Decoder(config, dtype, nnx.Rngs(0)))
    tokens = jax.ShapeDtypeStruct((config["batch"], config["seq"]), jnp.int32)
    if config["mode"] == "infer":

        def infer(params: Any, tokens: jax.Array) -> jax.Array:
            return training.probabilities(nnx.merge(graphdef, params, rest)(tokens)[:, -1])

        return Program(infer, (params, tokens))

    transform = training.optimizer("adamw")

    def train_step(params: Any, opt_state: Any, tokens: jax.Array) -> Any:
        def loss_fn(p: Any) -> jax.Array:
            logits = nnx.merge(graphdef, p, rest)(tokens)
            return training.classification_loss(logits[:, :-1], tokens[:, 1:])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, opt_state, loss

    return Program(train_step, (params, training.state_specs(transform, params), tokens))
