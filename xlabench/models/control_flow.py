"""Programs with data-dependent control flow: value-dependent `lax.while_loop` trip counts and `lax.cond`.

`program` selects one of:
- `cg`: conjugate-gradient solve of SPD systems, iterating until the residual is small (batched with vmap);
- `newton_cg`: logistic regression by Newton's method, with an inner CG loop and a backtracking line search;
- `early_exit_decode`: autoregressive decoding that stops when every sequence has emitted EOS;
- `adaptive_depth`: ACT-style pondering, applying a shared block until halting, with a `cond` per step;
- `cond_train`: a training step through a stack whose layers `cond` between two branches on the data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common


def _cg(
    apply_a: Callable[[jax.Array], jax.Array],
    b: jax.Array,
    tol: float,
    max_iter: int,
    precondition: Callable[[jax.Array], jax.Array],
) -> jax.Array:
    """Preconditioned CG on one system; stops at `max_iter` or when ||r|| <= tol * ||b||."""
    threshold = jnp.square(tol) * jnp.sum(jnp.square(b))
    x = jnp.zeros_like(b)
    r = b
    z = precondition(r)
    state = (x, r, z, z, jnp.sum(r * z), jnp.int32(0))

    def keep_going(s: tuple[jax.Array, ...]) -> jax.Array:
        _, r, _, _, _, k = s
        return (k < max_iter) & (jnp.sum(jnp.square(r)) > threshold)

    def iterate(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
        x, r, _, p, rz, k = s
        ap = apply_a(p)
        alpha = rz / jnp.sum(p * ap)
        x = x + alpha * p
        r = r - alpha * ap
        z = precondition(r)
        rz_new = jnp.sum(r * z)
        p = z + (rz_new / rz) * p
        return x, r, z, p, rz_new, k + 1

    return jax.lax.while_loop(keep_going, iterate, state)[0]


def _cg_program(config: dict[str, Any]) -> common.Program:
    n, dtype = config["n"], common.dtype_of(config)

    def solve_one(m: jax.Array, b: jax.Array) -> jax.Array:
        # A = M^T M + n I is symmetric positive definite for any M.
        def apply_a(v: jax.Array) -> jax.Array:
            return m.T @ (m @ v) + n * v

        diagonal = jnp.sum(jnp.square(m), axis=0) + n
        precondition = (lambda r: r / diagonal) if config["jacobi"] else (lambda r: r)
        return _cg(apply_a, b, 1e-4, config["max_iter"], precondition)

    def solve(m: jax.Array, b: jax.Array) -> jax.Array:
        return jax.vmap(solve_one)(m, b)

    batch = config["batch"]
    return common.Program(solve, (common.float_spec(dtype, batch, n, n), common.float_spec(dtype, batch, n)))


def _newton_cg_program(config: dict[str, Any]) -> common.Program:
    samples, features, dtype = config["samples"], config["features"], common.dtype_of(config)
    l2 = 1e-2

    def loss(w: jax.Array, x: jax.Array, y: jax.Array) -> jax.Array:
        margins = (x @ w) * (2 * y - 1)
        return jnp.mean(jax.nn.softplus(-margins)) + 0.5 * l2 * jnp.sum(jnp.square(w))

    def fit(x: jax.Array, y: jax.Array) -> tuple[jax.Array, jax.Array]:
        def newton_continue(s: tuple[jax.Array, ...]) -> jax.Array:
            _, grad_norm, k = s
            return (k < config["newton_steps"]) & (grad_norm > 1e-5)

        def newton_step(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            w, _, k = s
            g = jax.grad(loss)(w, x, y)

            def hvp(v: jax.Array) -> jax.Array:
                return jax.jvp(lambda u: jax.grad(loss)(u, x, y), (w,), (v,))[1]

            direction = -_cg(hvp, g, 1e-3, config["cg_steps"], lambda r: r)
            f0, slope = loss(w, x, y), jnp.sum(g * direction)

            # Backtracking (Armijo) line search: halve the step until sufficient decrease.
            def too_long(t: jax.Array) -> jax.Array:
                return (loss(w + t * direction, x, y) > f0 + 1e-4 * t * slope) & (t > 1e-4)

            t = jax.lax.while_loop(too_long, lambda t: t * 0.5, jnp.asarray(1.0, w.dtype))
            w = w + t * direction
            return w, jnp.sqrt(jnp.sum(jnp.square(jax.grad(loss)(w, x, y)))), k + 1

        w0 = jnp.zeros((features,), x.dtype)
        w, grad_norm, _ = jax.lax.while_loop(
            newton_continue, newton_step, (w0, jnp.asarray(jnp.inf, x.dtype), jnp.int32(0))
        )
        return w, grad_norm

    return common.Program(
        fit, (common.float_spec(dtype, samples, features), common.float_spec(dtype, samples))
    )


def _early_exit_program(config: dict[str, Any]) -> common.Program:
    vocab, hidden, batch, max_len = config["vocab"], config["hidden"], config["batch"], config["max_len"]
    dtype = common.dtype_of(config)
    eos = 1
    param_shapes = {
        "embed": (vocab, hidden),
        "wh": (hidden, hidden),
        "wx": (hidden, hidden),
        "out": common.dense_shapes(hidden, vocab),
    }

    def decode(params: Any, start: jax.Array, penalty: jax.Array) -> tuple[jax.Array, jax.Array]:
        tokens = jnp.zeros((batch, max_len), jnp.int32)
        counts = jnp.zeros((batch, vocab), dtype)
        h = jnp.zeros((batch, hidden), dtype)
        state = (tokens, counts, h, start, jnp.zeros((batch,), bool), jnp.int32(0))

        def not_done(s: tuple[jax.Array, ...]) -> jax.Array:
            _, _, _, _, finished, i = s
            return (i < max_len) & ~jnp.all(finished)

        def step(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            tokens, counts, h, previous, finished, i = s
            h = jnp.tanh(h @ params["wh"] + params["embed"][previous] @ params["wx"])
            logits = common.dense(h, params["out"]).astype(jnp.float32)
            # Only pay for the repetition penalty when the batch has started repeating itself.
            repeating = jnp.max(counts) > 1
            logits = jax.lax.cond(
                repeating, lambda lg: lg - penalty * counts.astype(jnp.float32), lambda lg: lg, logits
            )
            token = jnp.where(finished, eos, jnp.argmax(logits, axis=-1).astype(jnp.int32))
            tokens = tokens.at[:, i].set(token)
            counts = counts + jax.nn.one_hot(token, vocab, dtype=dtype)
            return tokens, counts, h, token, finished | (token == eos), i + 1

        tokens, _, _, _, _, length = jax.lax.while_loop(not_done, step, state)
        return tokens, length

    return common.Program(
        decode, (common.specs(param_shapes, dtype), common.int_spec(batch), common.float_spec(jnp.float32))
    )


def _adaptive_depth_program(config: dict[str, Any]) -> common.Program:
    width, batch, dtype = config["width"], config["batch"], common.dtype_of(config)
    block = common.mlp_shapes(width, 2 * width)
    param_shapes = {
        "narrow": block,
        "wide": common.mlp_shapes(width, 4 * width),
        "halt": common.dense_shapes(width, 1),
        "ln": common.layer_norm_shapes(width),
    }

    def ponder(params: Any, x: jax.Array) -> tuple[jax.Array, jax.Array]:
        def not_halted(s: tuple[jax.Array, ...]) -> jax.Array:
            _, _, cumulative, k = s
            return (k < config["max_steps"]) & jnp.any(cumulative < 0.99)

        def step(s: tuple[jax.Array, ...]) -> tuple[jax.Array, ...]:
            h, out, cumulative, k = s
            normed = common.layer_norm(h, params["ln"])
            # Data-dependent branch: spend the wide block only on hard (high-energy) states.
            h = h + jax.lax.cond(
                jnp.mean(jnp.square(normed.astype(jnp.float32))) > config["threshold"],
                lambda v: common.mlp(v, params["wide"], jax.nn.gelu),
                lambda v: common.mlp(v, params["narrow"], jax.nn.relu),
                normed,
            )
            p = jax.nn.sigmoid(common.dense(h, params["halt"])[:, 0].astype(jnp.float32))
            p = jnp.where(cumulative < 0.99, jnp.minimum(p, 1 - cumulative), 0.0)
            out = out + (p[:, None] * h.astype(jnp.float32)).astype(h.dtype)
            return h, out, cumulative + p, k + 1

        state = (x, jnp.zeros_like(x), jnp.zeros((batch,), jnp.float32), jnp.int32(0))
        _, out, _, steps = jax.lax.while_loop(not_halted, step, state)
        return out, steps

    return common.Program(ponder, (common.specs(param_shapes, dtype), common.float_spec(dtype, batch, width)))


def _cond_train_program(config: dict[str, Any]) -> common.Program:
    width, batch, dtype = config["width"], config["batch"], common.dtype_of(config)
    layer = {
        "a": common.mlp_shapes(width, 2 * width),
        "b": common.mlp_shapes(width, 2 * width),
        "gate": (width,),
    }
    param_shapes = {
        "layers": [layer] * config["layers"],
        "head": common.dense_shapes(width, config["classes"]),
    }

    def forward(params: Any, x: jax.Array) -> jax.Array:
        for layer in params["layers"]:
            # Branch on the batch's projection onto a learned direction (differentiable through both arms).
            take_a = jnp.mean(x @ layer["gate"]) > 0
            x = x + jax.lax.cond(
                take_a,
                lambda v, lp=layer: common.mlp(v, lp["a"], jax.nn.gelu),
                lambda v, lp=layer: common.mlp(v, lp["b"], jnp.tanh),
                x,
            )
        return common.dense(x, params["head"])

    def train_step(
        params: Any, opt_state: Any, x: jax.Array, labels: jax.Array
    ) -> tuple[Any, Any, jax.Array]:
        loss, grads = jax.value_and_grad(lambda p: common.cross_entropy(forward(p, x), labels))(params)
        params, opt_state = common.adam_update(params, grads, opt_state)
        return params, opt_state, loss

    param_specs = common.specs(param_shapes, dtype)
    return common.Program(
        train_step,
        (
            param_specs,
            common.adam_state_specs(param_specs),
            common.float_spec(dtype, batch, width),
            common.int_spec(batch),
        ),
    )


_PROGRAMS: dict[str, Callable[[dict[str, Any]], common.Program]] = {
    "cg": _cg_program,
    "newton_cg": _newton_cg_program,
    "early_exit_decode": _early_exit_program,
    "adaptive_depth": _adaptive_depth_program,
    "cond_train": _cond_train_program,
}


def make_program(config: dict[str, Any]) -> common.Program:
    """Build the control-flow program named by `config["program"]`."""
    return _PROGRAMS[config["program"]](config)
