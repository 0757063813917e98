"""Stacked LSTM / GRU language models; recurrence is a `lax.scan` over time, i.e. an HLO while loop."""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common

_GATES = {"lstm": 4, "gru": 3}


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Embedding, per-layer input/recurrent weights with fused gates, and output projection."""
    hidden, gates = config["hidden"], _GATES[config["cell"]]
    layers = []
    fan_in = config["embed"]
    for _ in range(config["layers"]):
        layers.append(
            {"wx": (fan_in, gates * hidden), "wh": (hidden, gates * hidden), "b": (gates * hidden,)}
        )
        fan_in = hidden
    return {
        "embed": (config["vocab"], config["embed"]),
        "layers": layers,
        "out": common.dense_shapes(hidden, config["vocab"]),
    }


def _lstm_cell(
    p: dict[str, jax.Array], carry: tuple[jax.Array, jax.Array], x_proj: jax.Array
) -> tuple[tuple[jax.Array, jax.Array], jax.Array]:
    h, c = carry
    i, f, g, o = jnp.split(x_proj + h @ p["wh"], 4, axis=-1)
    c = jax.nn.sigmoid(f + 1.0) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
    h = jax.nn.sigmoid(o) * jnp.tanh(c)
    return (h, c), h


def _gru_cell(
    p: dict[str, jax.Array], carry: tuple[jax.Array], x_proj: jax.Array
) -> tuple[tuple[jax.Array], jax.Array]:
    (h,) = carry
    xr, xz, xn = jnp.split(x_proj, 3, axis=-1)
    hr, hz, hn = jnp.split(h @ p["wh"], 3, axis=-1)
    r = jax.nn.sigmoid(xr + hr)
    z = jax.nn.sigmoid(xz + hz)
    n = jnp.tanh(xn + r * hn)
    h = (1 - z) * n + z * h
    return (h,), h


def run_layers(params: dict[str, Any], tokens: jax.Array, cell: str) -> jax.Array:
    """Hidden states [T, B, H] of the top layer for time-major tokens [T, B]."""
    x = params["embed"][tokens]
    step_fn = _lstm_cell if cell == "lstm" else _gru_cell
    for p in params["layers"]:
        hidden = p["wh"].shape[0]
        zeros = jnp.zeros((x.shape[1], hidden), x.dtype)
        carry = (zeros, zeros) if cell == "lstm" else (zeros,)
        # The input projection is hoisted out of the loop, as cuDNN-style implementations do.
        x_proj = x @ p["wx"] + p["b"]
        _, x = jax.lax.scan(lambda c, xp, p=p: step_fn(p, c, xp), carry, x_proj)
    return x


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: next-token loss through BPTT + AdamW; `mode=infer`: next-token probabilities."""
    cell = config["cell"]
    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    tokens = common.int_spec(config["seq"] + 1, config["batch"])

    def logits_fn(params: Any, inputs: jax.Array) -> jax.Array:
        return common.dense(run_layers(params, inputs, cell), params["out"])

    if config["mode"] == "train":

        def train_step(params: Any, opt_state: Any, tokens: jax.Array) -> tuple[Any, Any, jax.Array]:
            loss, grads = jax.value_and_grad(
                lambda p: common.cross_entropy(logits_fn(p, tokens[:-1]), tokens[1:])
            )(params)
            # Clip by global norm: recurrent nets need it and it adds a realistic reduction over all grads.
            norm = jnp.sqrt(sum(jnp.sum(jnp.square(g.astype(jnp.float32))) for g in jax.tree.leaves(grads)))
            scale = jnp.minimum(1.0, 1.0 / (norm + 1e-6))
            grads = jax.tree.map(lambda g: (g * scale).astype(g.dtype), grads)
            params, opt_state = common.adam_update(params, grads, opt_state, lr=1e-3)
            return params, opt_state, loss

        return common.Program(train_step, (param_specs, common.adam_state_specs(param_specs), tokens))

    def infer(params: Any, tokens: jax.Array) -> jax.Array:
        return jax.nn.softmax(logits_fn(params, tokens)[-1].astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, tokens))
