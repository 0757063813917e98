"""MLP-Mixer: token-mixing and channel-mixing MLPs over image patches; training step and inference."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common
from xlabench.models.vit import patchify


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Parameter shapes for the stem, mixer blocks and head."""
    width, patch = config["width"], config["patch"]
    tokens = (config["image"] // patch) ** 2
    layer = {
        "ln1": common.layer_norm_shapes(width),
        "token_mlp": common.mlp_shapes(tokens, config["token_hidden"]),
        "ln2": common.layer_norm_shapes(width),
        "channel_mlp": common.mlp_shapes(width, config["channel_hidden"]),
    }
    return {
        "stem": common.dense_shapes(patch * patch * 3, width),
        "layers": [layer] * config["layers"],
        "ln_f": common.layer_norm_shapes(width),
        "head": common.dense_shapes(width, config["classes"]),
    }


def forward(params: dict[str, Any], images: jax.Array, patch: int) -> jax.Array:
    """Class logits [B, classes]."""
    x = common.dense(patchify(images, patch), params["stem"])
    for layer in params["layers"]:
        # Token mixing acts across patches, so it runs on the transposed [B, C, T] view.
        y = common.layer_norm(x, layer["ln1"]).transpose(0, 2, 1)
        x = x + common.mlp(y, layer["token_mlp"], jax.nn.gelu).transpose(0, 2, 1)
        x = x + common.mlp(common.layer_norm(x, layer["ln2"]), layer["channel_mlp"], jax.nn.gelu)
    return common.dense(common.layer_norm(x, params["ln_f"]).mean(axis=1), params["head"])


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: cross-entropy + AdamW step; `mode=infer`: class probabilities."""
    dtype = common.dtype_of(config)
    param_specs = common.specs(param_shapes(config), dtype)
    images = common.float_spec(dtype, config["batch"], config["image"], config["image"], 3)
    patch = config["patch"]

    if config["mode"] == "train":

        def train_step(
            params: Any, opt_state: Any, images: jax.Array, labels: jax.Array
        ) -> tuple[Any, Any, jax.Array]:
            loss, grads = jax.value_and_grad(
                lambda p: common.cross_entropy(forward(p, images, patch), labels)
            )(params)
            params, opt_state = common.adam_update(params, grads, opt_state, lr=1e-3)
            return params, opt_state, loss

        labels = common.int_spec(config["batch"])
        return common.Program(train_step, (param_specs, common.adam_state_specs(param_specs), images, labels))

    def infer(params: Any, images: jax.Array) -> jax.Array:
        return jax.nn.softmax(forward(params, images, patch).astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, images))
