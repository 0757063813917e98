"""haiku's `hk.nets.ResNet` (v1 or v2, basic or bottleneck blocks, batch norm), scaled down: an
SGD-Nesterov training step or inference."""

from __future__ import annotations

from typing import Any

import haiku as hk
import jax

from xlabench.models.common import Program
from xlabench.models.haiku_models.haiku_program import classifier_program, set_precision


def make_program(config: dict[str, Any]) -> Program:
    """`mode=train`: SGD-Nesterov step; `mode=infer`: probabilities."""
    set_precision(config, [hk.nets.ResNet])
    blocks = config["blocks"]
    width = config["width"]
    expansion = 4 if config["block"] == "bottleneck" else 1

    def network(images: jax.Array, is_training: bool) -> jax.Array:
        net = hk.nets.ResNet(
            blocks_per_group=blocks,
            num_classes=config["classes"],
            bottleneck=config["block"] == "bottleneck",
            channels_per_group=[width * 2**i * expansion for i in range(4)],
            use_projection=[True, True, True, True],
            resnet_v2=config["version"] == "v2",
            initial_conv_config={"output_channels": width, "kernel_shape": 3, "stride": 1},
        )
        return net(images, is_training=is_training)

    return classifier_program(network, config, "sgd")
