"""GPT-2: decoder-only transformer; the graph is a full training step (loss, grads, AdamW update)."""

from __future__ import annotations

from typing import Any

import jax

from xlabench.models import common


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Parameter shapes for a GPT-2 of the given width, depth, vocabulary and context."""
    width = config["width"]
    layer = {
        "ln1": common.layer_norm_shapes(width),
        "attn": common.self_attention_shapes(width),
        "ln2": common.layer_norm_shapes(width),
        "mlp": common.mlp_shapes(width, 4 * width),
    }
    return {
        "wte": (config["vocab"], width),
        "wpe": (config["seq"], width),
        "layers": [layer] * config["layers"],
        "ln_f": common.layer_norm_shapes(width),
    }


def forward(params: dict[str, Any], tokens: jax.Array, heads: int) -> jax.Array:
    """Logits [B, S, V] with pre-LN blocks, causal attention and tied input/output embeddings."""
    seq = tokens.shape[1]
    x = params["wte"][tokens] + params["wpe"][:seq]
    mask = common.causal_mask(seq)
    for layer in params["layers"]:
        x = x + common.self_attention(common.layer_norm(x, layer["ln1"]), layer["attn"], heads, mask)
        x = x + common.mlp(common.layer_norm(x, layer["ln2"]), layer["mlp"], jax.nn.gelu)
    x = common.layer_norm(x, params["ln_f"])
    return x @ params["wte"].T


def make_program(config: dict[str, Any]) -> common.Program:
    """GPT-2 training step: next-token loss, gradients and one AdamW update."""
    heads = config["heads"]

    def train_step(params: Any, opt_state: Any, tokens: jax.Array) -> tuple[Any, Any, jax.Array]:
        def loss_fn(p: Any) -> jax.Array:
            logits = forward(p, tokens[:, :-1], heads)
            return common.cross_entropy(logits, tokens[:, 1:])

        loss, grads = jax.value_and_grad(loss_fn)(params)
        params, opt_state = common.adam_update(params, grads, opt_state, lr=3e-4, weight_decay=0.01)
        return params, opt_state, loss

    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    tokens = common.int_spec(config["batch"], config["seq"] + 1)
    return common.Program(train_step, (param_specs, common.adam_state_specs(param_specs), tokens))


def make_inference_program(config: dict[str, Any]) -> common.Program:
    """GPT-2 forward pass (logits) alone: a stack that grows by ~96 ops a layer, for size benchmarks."""
    heads = config["heads"]
    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    tokens = common.int_spec(config["batch"], config["seq"])
    return common.Program(lambda params, tokens: forward(params, tokens, heads), (param_specs, tokens))
