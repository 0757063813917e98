"""A decoder-only language model in flax linen (`nn.Embed`, `nn.SelfAttention` with a causal mask,
`nn.LayerNorm`, GELU MLP, learned positions, tied output embedding): an AdamW step with a warmup-cosine
schedule and global-norm clipping, or next-token probabilities."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.flax_models.linen import abstract_variables


class DecoderBlock(nn.Module):
    """Pre-LN block: causal self-attention, then a 4x GELU MLP."""

    heads: int
    dtype: Any

    @nn.compact
    def __call__(self, x: jax.Array, mask: jax.Array) -> jax.Array:
        y = nn.LayerNorm(dtype=self.dtype)(x)
        x = x + nn.SelfAttention(num_heads=self.heads, dtype=self.dtype, deterministic=True)(y, mask=mask)
        y = nn.LayerNorm(dtype=self.dtype)(x)
        y = nn.Dense(4 * x.shape[-1], dtype=self.dtype)(y)
        return x + nn.Dense(x.shape[-1], dtype=self.dtype)(nn.gelu(y))


class LanguageModel(nn.Module):
    """Token and position embeddings, `layers` decoder blocks, final norm, tied logits."""

    vocab: int
    width: int
    heads: int
    layers: int
    dtype: Any

    @nn.compact
    def __call__(self, tokens: jax.Array) -> jax.Array:
        embed = nn.Embed(self.vocab, self.width, dtype=self.dtype)
        positions = self.param("positions", nn.initializers.normal(0.02), (tokens.shape[1], self.width))
        x = embed(tokens) + positions.astype(self.dtype)
        mask = nn.make_causal_mask(tokens)
        for _ in range(self.layers):
            x = DecoderBlock(self.heads, self.dtype)(x, mask)
        return embed.attend(nn.LayerNorm(dtype=self.dtype)(x))


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: next-token cross-entropy and an AdamW step; `mode=infer`: last-token probabilities."""
    model = LanguageModel(config["vocab"], config["width"], config["heads"], config["layers"],
                          training.compute_dtype(config))  # fmt: skip
    tokens = jax.ShapeDtypeStruct((config["batch"], config["seq"]), jnp.int32)
    params = abstract_variables(model, tokens)["params"]
    if config["mode"] == "infer":

        def infer(params: Any, tokens: jax.Array) -> jax.Array:
            return training.probabilities(model.apply({"params": params}, tokens)[:, -1])

        return Program(infer, (params, tokens))

    transform = training.optimizer("adamw")

    def train_step(params: Any, opt_state: Any, tokens: jax.Array) -> Any:
        def loss_fn(p: Any) -> jax.Array:
            logits = model.apply({"params": p}, tokens)
            return training.classification_loss(logits[:, :-1], tokens[:, 1:])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, opt_state, loss

    return Program(train_step, (params, training.state_specs(transform, params), tokens))
