"""Sparse mixture-of-experts language model: embedding gathers, top-k routing, scatter dispatch into capacity
buffers and `segment_sum` combine. `mode=train` is a training step with a load-balancing loss; `mode=infer`
returns next-token probabilities.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Embeddings, attention + MoE blocks (router and stacked expert weights), output head."""
    width, experts, hidden = config["width"], config["experts"], config["expert_hidden"]
    layer = {
        "ln1": common.layer_norm_shapes(width),
        "attn": common.self_attention_shapes(width),
        "ln2": common.layer_norm_shapes(width),
        "router": (width, experts),
        "w_in": (experts, width, hidden),
        "w_out": (experts, hidden, width),
    }
    return {
        "embed": (config["vocab"], width),
        "pos": (config["seq"], width),
        "layers": [layer] * config["layers"],
        "ln_f": common.layer_norm_shapes(width),
    }


def moe_layer(
    x: jax.Array, layer: dict[str, jax.Array], top_k: int, capacity: int
) -> tuple[jax.Array, jax.Array]:
    """Route tokens [N, D] to their top-k experts; returns outputs [N, D] and the load-balancing loss."""
    tokens = x.shape[0]
    experts = layer["router"].shape[1]
    gates = jax.nn.softmax((x @ layer["router"]).astype(jnp.float32), axis=-1)
    top_gates, top_experts = jax.lax.top_k(gates, top_k)
    top_gates = top_gates / top_gates.sum(-1, keepdims=True)

    expert_ids = top_experts.reshape(-1)
    token_ids = jnp.repeat(jnp.arange(tokens), top_k)
    weights = top_gates.reshape(-1)
    # Slot of each assignment inside its expert's buffer: running count of earlier assignments to that expert.
    one_hot = jax.nn.one_hot(expert_ids, experts, dtype=jnp.int32)
    slots = jnp.sum(jnp.cumsum(one_hot, axis=0) * one_hot, axis=-1) - 1
    kept = slots < capacity

    # Scatter into [E, C, D]; assignments over capacity fall outside the buffer and are dropped.
    buffer = jnp.zeros((experts, capacity, x.shape[1]), x.dtype)
    buffer = buffer.at[expert_ids, slots].set(x[token_ids], mode="drop")
    expert_out = jnp.einsum(
        "ech,ehd->ecd", jax.nn.gelu(jnp.einsum("ecd,edh->ech", buffer, layer["w_in"])), layer["w_out"]
    )
    gathered = expert_out[expert_ids, jnp.minimum(slots, capacity - 1)]
    gathered = gathered * (weights * kept).astype(x.dtype)[:, None]
    combined = jax.ops.segment_sum(gathered, token_ids, num_segments=tokens)

    fraction_routed = jnp.mean(jax.nn.one_hot(top_experts[:, 0], experts, dtype=jnp.float32), axis=0)
    balance_loss = experts * jnp.sum(fraction_routed * gates.mean(0))
    return combined, balance_loss


def forward(params: dict[str, Any], tokens: jax.Array, config: dict[str, Any]) -> tuple[jax.Array, jax.Array]:
    """Logits [B, S, V] and the summed load-balancing loss."""
    batch, seq = tokens.shape
    capacity = max(
        1, math.ceil(config["capacity_factor"] * batch * seq * config["top_k"] / config["experts"])
    )
    x = params["embed"][tokens] + params["pos"][:seq]
    mask = common.causal_mask(seq)
    balance = jnp.float32(0.0)
    for layer in params["layers"]:
        x = x + common.self_attention(
            common.layer_norm(x, layer["ln1"]), layer["attn"], config["heads"], mask
        )
        routed, layer_balance = moe_layer(
            common.layer_norm(x, layer["ln2"]).reshape(batch * seq, -1), layer, config["top_k"], capacity
        )
        x = x + routed.reshape(batch, seq, -1)
        balance = balance + layer_balance
    return common.layer_norm(x, params["ln_f"]) @ params["embed"].T, balance


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: LM loss + 0.01 * balance loss, AdamW step; `mode=infer`: last-position probabilities."""
    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    tokens = common.int_spec(config["batch"], config["seq"] + 1)

    if config["mode"] == "train":

        def train_step(params: Any, opt_state: Any, tokens: jax.Array) -> tuple[Any, Any, jax.Array]:
            def loss_fn(p: Any) -> jax.Array:
                logits, balance = forward(p, tokens[:, :-1], config)
                return common.cross_entropy(logits, tokens[:, 1:]) + 0.01 * balance

            loss, grads = jax.value_and_grad(loss_fn)(params)
            params, opt_state = common.adam_update(params, grads, opt_state)
            return params, opt_state, loss

        return common.Program(train_step, (param_specs, common.adam_state_specs(param_specs), tokens))

    def infer(params: Any, tokens: jax.Array) -> jax.Array:
        logits, _ = forward(params, tokens[:, :-1], config)
        return jax.nn.softmax(logits[:, -1].astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, tokens))
