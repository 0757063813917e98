"""Message-passing graph network over an edge list: gathers by sender/receiver index, `segment_sum`
aggregation with degree normalisation, and a per-graph readout. `mode=train` classifies graphs with an
AdamW step; `mode=infer` returns class probabilities.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Node encoder, per-layer edge and node MLPs, graph-level head."""
    width = config["width"]
    layer = {
        "edge": {
            "fc": common.dense_shapes(2 * width + config["edge_features"], width),
            "proj": common.dense_shapes(width, width),
        },
        "node": {"fc": common.dense_shapes(2 * width, width), "proj": common.dense_shapes(width, width)},
        "ln": common.layer_norm_shapes(width),
    }
    return {
        "encode": common.dense_shapes(config["node_features"], width),
        "layers": [layer] * config["layers"],
        "head": common.dense_shapes(width, config["classes"]),
    }


def forward(
    params: dict[str, Any],
    nodes: jax.Array,
    edges: jax.Array,
    senders: jax.Array,
    receivers: jax.Array,
    node_graph: jax.Array,
    graphs: int,
) -> jax.Array:
    """Graph logits [graphs, classes]."""
    count = nodes.shape[0]
    h = jax.nn.relu(common.dense(nodes, params["encode"]))
    degree = jax.ops.segment_sum(jnp.ones_like(receivers, dtype=h.dtype), receivers, num_segments=count)
    for layer in params["layers"]:
        messages = common.mlp(
            jnp.concatenate([h[senders], h[receivers], edges], axis=-1), layer["edge"], jax.nn.relu
        )
        incoming = jax.ops.segment_sum(messages, receivers, num_segments=count)
        incoming = incoming / jnp.maximum(degree, 1)[:, None]
        h = common.layer_norm(
            h + common.mlp(jnp.concatenate([h, incoming], axis=-1), layer["node"], jax.nn.relu), layer["ln"]
        )
    pooled = jax.ops.segment_max(h, node_graph, num_segments=graphs)
    return common.dense(pooled, params["head"])


def make_program(config: dict[str, Any]) -> common.Program:
    """Build the train or infer program for a batch of `graphs` graphs packed into one edge list."""
    dtype = common.dtype_of(config)
    param_specs = common.specs(param_shapes(config), dtype)
    n, e, graphs = config["nodes"], config["edges"], config["graphs"]
    inputs = (
        common.float_spec(dtype, n, config["node_features"]),
        common.float_spec(dtype, e, config["edge_features"]),
        common.int_spec(e),
        common.int_spec(e),
        common.int_spec(n),
    )

    if config["mode"] == "train":

        def train_step(
            params: Any,
            opt_state: Any,
            nodes: jax.Array,
            edges: jax.Array,
            senders: jax.Array,
            receivers: jax.Array,
            node_graph: jax.Array,
            labels: jax.Array,
        ) -> tuple[Any, Any, jax.Array]:
            def loss_fn(p: Any) -> jax.Array:
                logits = forward(p, nodes, edges, senders, receivers, node_graph, graphs)
                return common.cross_entropy(logits, labels)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            params, opt_state = common.adam_update(params, grads, opt_state)
            return params, opt_state, loss

        return common.Program(
            train_step, (param_specs, common.adam_state_specs(param_specs), *inputs, common.int_spec(graphs))
        )

    def infer(
        params: Any,
        nodes: jax.Array,
        edges: jax.Array,
        senders: jax.Array,
        receivers: jax.Array,
        node_graph: jax.Array,
    ) -> jax.Array:
        logits = forward(params, nodes, edges, senders, receivers, node_graph, graphs)
        return jax.nn.softmax(logits.astype(jnp.float32), axis=-1)

    return common.Program(infer, (param_specs, *inputs))
