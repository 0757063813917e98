"""Lowering a flax linen model: abstract variables from `init` under `eval_shape`, and the training step
or inference function a linen user writes (batch statistics as a mutable collection)."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import linen as nn

from xlabench.models import training
from xlabench.models.common import Program


def abstract_variables(model: nn.Module, *inputs: jax.ShapeDtypeStruct, **kwargs: Any) -> dict[str, Any]:
    """The model's variables as `ShapeDtypeStruct`s (nothing initialised)."""

    def init() -> Any:
        zeros = [jnp.zeros(x.shape, x.dtype) for x in inputs]
        return model.init(jax.random.key(0), *zeros, **kwargs)

    return training.abstract(jax.eval_shape(init))


def classifier_program(
    model: nn.Module, config: dict[str, Any], inputs: jax.ShapeDtypeStruct, optimizer: str
) -> Program:
    """`mode=train`: a cross-entropy step with `optimizer`, batch norm statistics updated when the
    model has them; `mode=infer`: class probabilities with running statistics."""
    variables = abstract_variables(model, inputs, train=False)
    params = variables["params"]
    stats = variables.get("batch_stats")
    if config["mode"] == "infer":

        def infer(variables: Any, x: jax.Array) -> jax.Array:
            return training.probabilities(model.apply(variables, x, train=False))

        return Program(infer, (variables, inputs))

    transform = training.optimizer(optimizer)
    labels = training.labels(config)

    def train_step(params: Any, stats: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        def loss_fn(p: Any) -> tuple[jax.Array, Any]:
            if stats is None:
                logits = model.apply({"params": p}, x, train=True)
                return training.classification_loss(logits, y), None
            logits, updated = model.apply(
                {"params": p, "batch_stats": stats}, x, train=True, mutable=["batch_stats"]
            )
            return training.classification_loss(logits, y), updated["batch_stats"]

        (loss, new_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, new_stats, opt_state, loss

    return Program(train_step, (params, stats, training.state_specs(transform, params), inputs, labels))
