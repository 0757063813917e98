"""haiku's `hk.nets.MobileNetV1` (depthwise-separable convolutions, batch norm), with narrowed channel
lists: an AdamW training step or inference."""

from __future__ import annotations

from typing import Any

import haiku as hk
import jax

from xlabench.models.common import Program
from xlabench.models.haiku_models.haiku_program import classifier_program, set_precision

# MobileNetV1's 13 separable blocks: strides, and channels at width multiplier 1 (divided below).
_STRIDES = (1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1)
_CHANNELS = (64, 128, 128, 256, 256, 512, 512, 512, 512, 512, 512, 1024, 1024)


def make_program(config: dict[str, Any]) -> Program:
    """`blocks` of the 13 separable blocks at `1/divisor` of the channels; train (AdamW) or infer."""
    set_precision(config, [hk.nets.MobileNetV1])
    blocks = config["blocks"]
    channels = [max(8, c // config["divisor"]) for c in _CHANNELS[:blocks]]

    def network(images: jax.Array, is_training: bool) -> jax.Array:
        net = hk.nets.MobileNetV1(strides=_STRIDES[:blocks], channels=channels, num_classes=config["classes"])
        return net(images, is_training=is_training)

    return classifier_program(network, config, "adamw")
