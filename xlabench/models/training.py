"""Training steps for the model-library families: optax optimizers (schedules, clipping) and abstract
state, shared by the flax, haiku and equinox families.

The optimizers are what users of those libraries write: AdamW behind a warmup-cosine schedule and
global-norm clipping, or SGD with Nesterov momentum, decayed weights and a cosine schedule (the
ImageNet recipe). Their state is lowered as arguments, like the parameters: no weight is a constant.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import optax

PyTree = Any

# One schedule length for every family: the step count lives in the optimizer state (an argument).
_DECAY_STEPS = 10_000


def optimizer(name: str) -> optax.GradientTransformation:
    """`adamw` (warmup-cosine, clip 1.0, weight decay 0.05) or `sgd` (Nesterov momentum, cosine, L2)."""
    if name == "adamw":
        schedule = optax.warmup_cosine_decay_schedule(0.0, 1e-3, warmup_steps=200, decay_steps=_DECAY_STEPS)
        return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(schedule, weight_decay=0.05))
    if name == "sgd":
        schedule = optax.cosine_decay_schedule(0.1, _DECAY_STEPS)
        return optax.chain(optax.add_decayed_weights(1e-4), optax.sgd(schedule, momentum=0.9, nesterov=True))
    raise ValueError(f"unknown optimizer {name!r}")


def abstract(tree: PyTree) -> PyTree:
    """The `ShapeDtypeStruct`s of a pytree of arrays or of abstract values."""
    return jax.tree.map(lambda leaf: jax.ShapeDtypeStruct(leaf.shape, leaf.dtype), tree)


def state_specs(transform: optax.GradientTransformation, param_specs: PyTree) -> PyTree:
    """Abstract optimizer state for abstract parameters (nothing is initialised)."""
    return abstract(jax.eval_shape(transform.init, param_specs))


def apply_updates(
    transform: optax.GradientTransformation, params: PyTree, grads: PyTree, opt_state: PyTree
) -> tuple[PyTree, PyTree]:
    """One optimizer step: new parameters and optimizer state."""
    updates, opt_state = transform.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def classification_loss(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """Mean softmax cross-entropy of integer labels, in f32 whatever the compute dtype."""
    return optax.softmax_cross_entropy_with_integer_labels(logits.astype(jnp.float32), labels).mean()


def images(config: dict[str, Any]) -> jax.ShapeDtypeStruct:
    """An NHWC f32 image batch: the input pipeline's dtype (mixed precision casts inside the model)."""
    return jax.ShapeDtypeStruct((config["batch"], config["image"], config["image"], 3), jnp.float32)


def labels(config: dict[str, Any], *shape: int) -> jax.ShapeDtypeStruct:
    """int32 class labels, one per example (or of `shape`)."""
    return jax.ShapeDtypeStruct(shape or (config["batch"],), jnp.int32)


def compute_dtype(config: dict[str, Any]) -> Any:
    """The compute dtype: bf16 for `bf16` configs, else f32. flax and haiku keep f32 parameters beside it
    (mixed precision); equinox has no such policy, so its bf16 graphs hold bf16 parameters too."""
    return jnp.bfloat16 if config["dtype"] == "bf16" else jnp.float32


def probabilities(logits: jax.Array) -> jax.Array:
    """Softmax over the last axis, in f32: what an inference graph returns."""
    return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)


LossFn = Callable[..., tuple[jax.Array, Any]]
