"""VQ-VAE in haiku: strided `hk.Conv2D` encoder with residual stacks, `hk.nets.VectorQuantizerEMA` (or
the loss-trained `VectorQuantizer`), `hk.Conv2DTranspose` decoder; a training step (reconstruction plus
commitment loss, EMA codebook updates in the state, AdamW) or reconstruction."""

from __future__ import annotations

from typing import Any

import haiku as hk
import jax
import jax.numpy as jnp

from xlabench.models import training
from xlabench.models.common import Program
from xlabench.models.haiku_models.haiku_program import abstract_init, set_precision


class ResidualStack(hk.Module):
    """`layers` residual 3x3-1x1 blocks and a final ReLU."""

    def __init__(self, hidden: int, layers: int, name: str | None = None) -> None:
        super().__init__(name=name)
        self.hidden, self.layers = hidden, layers

    def __call__(self, x: jax.Array) -> jax.Array:
        for _ in range(self.layers):
            y = hk.Conv2D(self.hidden // 2, 3)(jax.nn.relu(x))
            x = x + hk.Conv2D(self.hidden, 1)(jax.nn.relu(y))
        return jax.nn.relu(x)


class Encoder(hk.Module):
    """Two stride-2 convolutions, a 3x3 convolution, a residual stack, a 1x1 to the embedding width."""

    def __init__(self, hidden: int, layers: int, embedding: int) -> None:
        super().__init__()
        self.hidden, self.layers, self.embedding = hidden, layers, embedding

    def __call__(self, x: jax.Array) -> jax.Array:
        x = jax.nn.relu(hk.Conv2D(self.hidden // 2, 4, stride=2)(x))
        x = jax.nn.relu(hk.Conv2D(self.hidden, 4, stride=2)(x))
        x = ResidualStack(self.hidden, self.layers)(hk.Conv2D(self.hidden, 3)(x))
        return hk.Conv2D(self.embedding, 1)(x)


class Decoder(hk.Module):
    """A 3x3 convolution, a residual stack, two stride-2 transposed convolutions back to 3 channels."""

    def __init__(self, hidden: int, layers: int) -> None:
        super().__init__()
        self.hidden, self.layers = hidden, layers

    def __call__(self, x: jax.Array) -> jax.Array:
        x = ResidualStack(self.hidden, self.layers)(hk.Conv2D(self.hidden, 3)(x))
        x = jax.nn.relu(hk.Conv2DTranspose(self.hidden // 2, 4, stride=2)(x))
        return hk.Conv2DTranspose(3, 4, stride=2)(x)


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: one AdamW step on reconstruction + VQ loss; `mode=infer`: the reconstruction."""
    set_precision(config, [Encoder, Decoder])
    hidden, layers, embedding = config["hidden"], config["layers"], config["embedding"]

    def network(images: jax.Array, is_training: bool) -> tuple[jax.Array, jax.Array]:
        if config["quantizer"] == "ema":
            quantizer = hk.nets.VectorQuantizerEMA(embedding, config["codes"], 0.25, decay=0.99)
        else:
            quantizer = hk.nets.VectorQuantizer(embedding, config["codes"], 0.25)
        z = Encoder(hidden, layers, embedding)(images).astype(jnp.float32)
        quantized = quantizer(z, is_training=is_training)
        reconstruction = Decoder(hidden, layers)(quantized["quantize"]).astype(jnp.float32)
        return reconstruction, quantized["loss"]

    transformed = hk.transform_with_state(network)
    images = training.images(config)
    params, state = abstract_init(
        transformed, images, is_training=True
    )  # the EMA quantizer creates its state
    if config["mode"] == "infer":

        def infer(params: Any, state: Any, x: jax.Array) -> jax.Array:
            (reconstruction, _), _ = transformed.apply(params, state, None, x, is_training=False)
            return reconstruction

        return Program(infer, (params, state, images))

    transform = training.optimizer("adamw")

    def train_step(params: Any, state: Any, opt_state: Any, x: jax.Array) -> Any:
        def loss_fn(p: Any) -> tuple[jax.Array, Any]:
            (reconstruction, vq_loss), new_state = transformed.apply(p, state, None, x, is_training=True)
            return jnp.mean(jnp.square(reconstruction - x)) + vq_loss, new_state

        (loss, new_state), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        params, opt_state = training.apply_updates(transform, params, grads, opt_state)
        return params, new_state, opt_state, loss

    return Program(train_step, (params, state, training.state_specs(transform, params), images))
