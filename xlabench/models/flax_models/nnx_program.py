"""Lowering a flax nnx model: `nnx.split` into a graph definition and abstract state, a pure function
that merges them back (what `nnx.jit` does), and optax on the parameter state."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
from flax import nnx

from xlabench.models import training
from xlabench.models.common import Program


def split_abstract(make: Callable[[], nnx.Module]) -> tuple[Any, Any, Any]:
    """(graph definition, abstract parameters, abstract other state, e.g. batch statistics)."""
    model = nnx.eval_shape(make)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    return graphdef, training.abstract(params), training.abstract(rest)


def classifier_program(
    make: Callable[[], nnx.Module],
    config: dict[str, Any],
    inputs: jax.ShapeDtypeStruct,
    labels: jax.ShapeDtypeStruct,
    optimizer: str,
) -> Program:
    """`mode=train`: cross-entropy and an optax step on the parameters (the rest of the state, such as
    batch statistics, updated as the model's train mode updates it); `mode=infer`: probabilities in
    eval mode."""
    graphdef, params, rest = split_abstract(make)
    if config["mode"] == "infer":

        def infer(params: Any, rest: Any, x: jax.Array) -> jax.Array:
            model = nnx.merge(graphdef, params, rest)
            model.eval()
            return training.probabilities(model(x))

        return Program(infer, (params, rest, inputs))

    transform = training.optimizer(optimizer)

    def train_step(params: Any, rest: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> Any:
        def loss_fn(p: Any) -> tuple[jax.Array, Any]:
            model = nnx.merge(graphdef, p, rest)
            model.train()
            loss = training.classification_loss(model(x), y)
            return loss, nnx.split(model, nnx.Param, ...)[2]

        (loss, new_rest), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, new_rest, opt_state, loss

    return Program(train_step, (params, rest, training.state_specs(transform, params), inputs, labels))
