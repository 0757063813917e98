"""Lowering an equinox model: the arrays partitioned from the static structure (`eqx.partition`),
abstract from `eqx.filter_eval_shape`, recombined inside the function; optax steps on the arrays."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from xlabench.models import training
from xlabench.models.common import Program


def split_abstract(model: Any) -> tuple[Any, Any]:
    """(abstract trainable arrays, static rest) of an abstract model (from `eqx.filter_eval_shape`)."""
    arrays, static = eqx.partition(model, _is_trainable)
    return training.abstract(arrays), static


def _is_trainable(leaf: Any) -> bool:
    # The model's floating arrays; Python scalars (eps, flags) and a state index's markers stay static.
    return isinstance(leaf, jax.ShapeDtypeStruct | jax.Array) and jnp.issubdtype(leaf.dtype, jnp.inexact)


def program(
    model: Any,
    config: dict[str, Any],
    loss: Callable[[Any, Any, tuple[jax.Array, ...]], tuple[jax.Array, Any]],
    infer: Callable[[Any, Any, tuple[jax.Array, ...]], jax.Array],
    inputs: tuple[jax.ShapeDtypeStruct, ...],
    state: Any = None,
) -> Program:
    """`model` abstract (`eqx.filter_eval_shape`). `mode=train`: `loss(model, state, inputs) -> (loss,
    new_state)` and an AdamW step on its arrays; `mode=infer`: `infer(model, state, inputs)`. `state`
    is the abstract `eqx.nn.State` made with the model (batch norm), or None."""
    arrays, static = split_abstract(model)
    state_specs = None if state is None else training.abstract(state)
    if config["mode"] == "infer":

        def run(arrays: Any, state: Any, *xs: jax.Array) -> jax.Array:
            return infer(eqx.combine(arrays, static), state, xs)

        return Program(run, (arrays, state_specs, *inputs))

    transform = training.optimizer("adamw")

    def train_step(arrays: Any, state: Any, opt_state: Any, *xs: jax.Array) -> Any:
        def loss_fn(a: Any) -> tuple[jax.Array, Any]:
            return loss(eqx.combine(a, static), state, xs)

        (value, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(arrays)
        arrays, opt_state = training.apply_updates(transform, arrays, grads, opt_state)
        return arrays, new_state, opt_state, value

    return Program(train_step, (arrays, state_specs, training.state_specs(transform, arrays), *inputs))
