"""Lowering a haiku network: `hk.transform_with_state`, abstract parameters and state from `init` under
`eval_shape`, mixed precision as haiku users set it (jmp policies per module class), optax steps."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import haiku as hk
import jax
import jax.numpy as jnp
import jmp

from xlabench.models import training
from xlabench.models.common import Program

_FULL = jmp.get_policy("params=float32,compute=float32,output=float32")
_MIXED = jmp.get_policy("params=float32,compute=bfloat16,output=float32")
# haiku's ImageNet recipe: batch norm computes in f32 and hands bf16 on.
_MIXED_NORM = jmp.get_policy("params=float32,compute=float32,output=bfloat16")


def set_precision(config: dict[str, Any], classes: list[type]) -> None:
    """Mixed bf16 (f32 parameters, bf16 compute, f32 outputs) for `classes` when the config says bf16,
    batch norm computing in f32 (haiku's recipe); full f32 otherwise. Policies are global: set per graph."""
    policy = _MIXED if config["dtype"] == "bf16" else _FULL
    for cls in classes:
        hk.mixed_precision.set_policy(cls, policy)
    hk.mixed_precision.set_policy(hk.BatchNorm, _MIXED_NORM if config["dtype"] == "bf16" else _FULL)


def abstract_init(transformed: hk.TransformedWithState, *inputs: jax.ShapeDtypeStruct, **kwargs: Any) -> Any:
    """(abstract parameters, abstract state) of a transformed network."""

    def init() -> Any:
        return transformed.init(jax.random.key(0), *[jnp.zeros(x.shape, x.dtype) for x in inputs], **kwargs)

    return training.abstract(jax.eval_shape(init))


def classifier_program(
    network: Callable[[jax.Array, bool], jax.Array], config: dict[str, Any], optimizer: str
) -> Program:
    """`network(images, is_training)` as a cross-entropy optax step (`mode=train`) or probabilities."""
    transformed = hk.transform_with_state(network)
    images = training.images(config)
    params, state = abstract_init(transformed, images, is_training=True)  # batch norm creates its EMAs
    if config["mode"] == "infer":

        def infer(params: Any, state: Any, x: jax.Array) -> jax.Array:
            logits, _ = transformed.apply(params, state, None, x, is_training=False)
            return training.probabilities(logits)

        return Program(infer, (params, state, images))

    transform = training.optimizer(optimizer)

    def train_step(params: Any, state: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        def loss_fn(p: Any) -> tuple[jax.Array, Any]:
            logits, new_state = transformed.apply(p, state, None, x, is_training=True)
            return training.classification_loss(logits, y), new_state

        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, new_state, opt_state, loss

    labels = training.labels(config)
    return Program(train_step, (params, state, training.state_specs(transform, params), images, labels))
