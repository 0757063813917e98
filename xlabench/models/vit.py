"""Vision Transformer: patch embedding, class token, pre-LN encoder; training step and inference."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common


def patchify(images: jax.Array, patch: int) -> jax.Array:
    """[B, H, W, C] -> [B, (H/p)*(W/p), p*p*C] non-overlapping patches."""
    batch, height, width, channels = images.shape
    x = images.reshape(batch, height // patch, patch, width // patch, patch, channels)
    return x.transpose(0, 1, 3, 2, 4, 5).reshape(batch, (height // patch) * (width // patch), -1)


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Parameter shapes for patch embedding, encoder and classifier head."""
    width, patch = config["width"], config["patch"]
    tokens = (config["image"] // patch) ** 2 + 1
    layer = {
        "ln1": common.layer_norm_shapes(width),
        "attn": common.self_attention_shapes(width),
        "ln2": common.layer_norm_shapes(width),
        "mlp": common.mlp_shapes(width, config["mlp_ratio"] * width),
    }
    return {
        "embed": common.dense_shapes(patch * patch * 3, width),
        "cls": (1, 1, width),
        "pos": (1, tokens, width),
        "layers": [layer] * config["layers"],
        "ln_f": common.layer_norm_shapes(width),
        "head": common.dense_shapes(width, config["classes"]),
    }


def forward(params: dict[str, Any], images: jax.Array, config: dict[str, Any]) -> jax.Array:
    """Class logits [B, classes]."""
    x = common.dense(patchify(images, config["patch"]), params["embed"])
    cls = jnp.broadcast_to(params["cls"], (x.shape[0], 1, x.shape[2]))
    x = jnp.concatenate([cls, x], axis=1) + params["pos"]
    for layer in params["layers"]:
        x = x + common.self_attention(common.layer_norm(x, layer["ln1"]), layer["attn"], config["heads"])
        x = x + common.mlp(common.layer_norm(x, layer["ln2"]), layer["mlp"], jax.nn.gelu)
    return common.dense(common.layer_norm(x[:, 0], params["ln_f"]), params["head"])


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: cross-entropy + AdamW step; `mode=infer`: class probabilities."""
    dtype = common.dtype_of(config)
    param_specs = common.specs(param_shapes(config), dtype)
    images = common.float_spec(dtype, config["batch"], config["image"], config["image"], 3)

    if config["mode"] == "train":

        def train_step(
            params: Any, opt_state: Any, images: jax.Array, labels: jax.Array
        ) -> tuple[Any, Any, jax.Array]:
            loss, grads = jax.value_and_grad(
                lambda p: common.cross_entropy(forward(p, images, config), labels)
            )(params)
            params, opt_state = common.adam_update(params, grads, opt_state, lr=1e-3, weight_decay=0.05)
            return params, opt_state, loss

        labels = common.int_spec(config["batch"])
        return common.Program(train_step, (param_specs, common.adam_state_specs(param_specs), images, labels))

    def infer(params: Any, images: jax.Array) -> jax.Array:
        return jax.nn.softmax(forward(params, images, config).astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, images))
