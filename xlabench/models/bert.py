"""BERT: post-LN bidirectional encoder; a masked-LM training step and an inference (encode) step."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Parameter shapes: embeddings, encoder layers, pooler and MLM head."""
    width = config["width"]
    layer = {
        "attn": common.self_attention_shapes(width),
        "ln1": common.layer_norm_shapes(width),
        "mlp": common.mlp_shapes(width, 4 * width),
        "ln2": common.layer_norm_shapes(width),
    }
    return {
        "tok": (config["vocab"], width),
        "pos": (config["seq"], width),
        "type": (2, width),
        "ln_emb": common.layer_norm_shapes(width),
        "layers": [layer] * config["layers"],
        "pooler": common.dense_shapes(width, width),
        "mlm": {
            "transform": common.dense_shapes(width, width),
            "ln": common.layer_norm_shapes(width),
            "bias": (config["vocab"],),
        },
    }


def encode(
    params: dict[str, Any], tokens: jax.Array, segments: jax.Array, attention_mask: jax.Array, heads: int
) -> jax.Array:
    """Hidden states [B, S, D]; padded keys are masked out of attention."""
    x = params["tok"][tokens] + params["pos"][: tokens.shape[1]] + params["type"][segments]
    x = common.layer_norm(x, params["ln_emb"], eps=1e-12)
    mask = attention_mask[:, None, None, :].astype(bool)
    for layer in params["layers"]:
        x = common.layer_norm(
            x + common.self_attention(x, layer["attn"], heads, mask), layer["ln1"], eps=1e-12
        )
        x = common.layer_norm(x + common.mlp(x, layer["mlp"], jax.nn.gelu), layer["ln2"], eps=1e-12)
    return x


def mlm_logits(params: dict[str, Any], hidden: jax.Array) -> jax.Array:
    """MLM head: transform, LayerNorm, tied decoder."""
    head = params["mlm"]
    x = common.layer_norm(jax.nn.gelu(common.dense(hidden, head["transform"])), head["ln"], eps=1e-12)
    return x @ params["tok"].T + head["bias"]


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: MLM loss on gathered masked positions + AdamW; `mode=infer`: encode, pool, MLM logits."""
    heads = config["heads"]
    batch, seq = config["batch"], config["seq"]
    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    inputs = (common.int_spec(batch, seq), common.int_spec(batch, seq), common.int_spec(batch, seq))

    if config["mode"] == "train":
        predictions = config["masked"]

        def train_step(
            params: Any,
            opt_state: Any,
            tokens: jax.Array,
            segments: jax.Array,
            attention_mask: jax.Array,
            masked_positions: jax.Array,
            masked_labels: jax.Array,
        ) -> tuple[Any, Any, jax.Array]:
            def loss_fn(p: Any) -> jax.Array:
                hidden = encode(p, tokens, segments, attention_mask, heads)
                picked = jnp.take_along_axis(hidden, masked_positions[..., None], axis=1)
                return common.cross_entropy(mlm_logits(p, picked), masked_labels)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            params, opt_state = common.adam_update(params, grads, opt_state, lr=1e-4, weight_decay=0.01)
            return params, opt_state, loss

        masked = (common.int_spec(batch, predictions), common.int_spec(batch, predictions))
        return common.Program(
            train_step, (param_specs, common.adam_state_specs(param_specs), *inputs, *masked)
        )

    def infer(
        params: Any, tokens: jax.Array, segments: jax.Array, attention_mask: jax.Array
    ) -> tuple[jax.Array, jax.Array]:
        hidden = encode(params, tokens, segments, attention_mask, heads)
        pooled = jnp.tanh(common.dense(hidden[:, 0], params["pooler"]))
        return pooled, jnp.argmax(mlm_logits(params, hidden), axis=-1)

    return common.Program(infer, (param_specs, *inputs))
