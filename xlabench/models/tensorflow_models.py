"""TensorFlow models lowered by TensorFlow's own XLA bridge: the suite's family from another framework.

Run in an environment with TensorFlow (not xlabench's: it imports nothing of xlabench), one graph a
call: `python tensorflow_models.py '<config as JSON>'` prints a JSON object with the module as a
serialized HloModuleProto, base64 (`tf.function(jit_compile=True).experimental_get_compiler_ir(...)
(stage="hlo_serialized")`: TensorFlow's text stage elides large constants as `{...}`), and the
TensorFlow version. What the bridge produces differs from jax's: inference weights are frozen into the module
as constants, training steps take resource variables as parameters and write their updates back,
and TensorFlow's own op names and layouts are kept. Weights come from a seeded generator.
"""

from __future__ import annotations

import base64
import json
import sys
from typing import Any

import numpy as np

try:
    import tensorflow as tf
except ModuleNotFoundError:  # xlabench's own Python: only the shapes below are read (`output_shapes`)
    tf = None


def _weights(shapes: list[tuple[int, ...]], seed: int) -> list[np.ndarray]:
    generator = np.random.default_rng(seed)
    return [(generator.standard_normal(shape) / np.sqrt(shape[0])).astype(np.float32) for shape in shapes]


def _mlp_shapes(config: dict[str, Any]) -> list[tuple[int, ...]]:
    width, layers = config["width"], config["layers"]
    shapes = []
    for index in range(layers):
        shapes += [(width if index else 32, width), (width,)]
    return shapes + [(width, 10), (10,)]


def _mlp(weights: list[Any], x: tf.Tensor) -> tf.Tensor:
    for kernel, bias in zip(weights[:-2:2], weights[1:-2:2], strict=True):
        x = tf.nn.gelu(tf.matmul(x, kernel) + bias)
    return tf.matmul(x, weights[-2]) + weights[-1]


def _cnn_shapes(config: dict[str, Any]) -> list[tuple[int, ...]]:
    width, layers = config["width"], config["layers"]
    shapes = []
    for index in range(layers):
        shapes += [(3, 3, width if index else 3, width), (width,), (width,)]  # kernel, scale, offset
    return shapes + [(width, 10), (10,)]


def _cnn(weights: list[Any], x: tf.Tensor, training: bool) -> tf.Tensor:
    for index in range(0, len(weights) - 2, 3):
        kernel, scale, offset = weights[index : index + 3]
        x = tf.nn.conv2d(x, kernel, strides=1, padding="SAME")
        if training:
            mean, variance = tf.nn.moments(x, axes=[0, 1, 2])
        elif x.dtype == tf.float32:
            mean, variance = 0.0, 1.0  # Python floats, as the stored f32 graphs were lowered
        else:
            mean, variance = tf.constant(0.0, x.dtype), tf.constant(1.0, x.dtype)
        x = tf.nn.relu(tf.nn.batch_normalization(x, mean, variance, offset, scale, 1e-3))
        x = tf.nn.max_pool2d(x, 2, 2, "SAME")
    x = tf.reduce_mean(x, axis=[1, 2])
    return tf.matmul(x, weights[-2]) + weights[-1]


def _mobilenet_shapes(config: dict[str, Any]) -> list[tuple[int, ...]]:
    width = config["width"]
    # A stem convolution with its batch norm, then per block a depthwise 3x3 and a pointwise 1x1, each
    # followed by a batch norm (scale, offset).
    shapes = [(3, 3, 3, width), (width,), (width,)]
    for _ in range(config["layers"]):
        shapes += [(3, 3, width, 1), (width,), (width,), (1, 1, width, width), (width,), (width,)]
    return shapes + [(width, 10), (10,)]


def _fused_batch_norm(x: tf.Tensor, scale: tf.Tensor, offset: tf.Tensor, training: bool) -> tf.Tensor:
    """TF1-style fused batch norm (tf.compat.v1 layers, tf_keras, TF-Slim): FusedBatchNormV3, which
    the bridge lowers to XLA's batch-norm-training (its gradient: batch-norm-grad) or, with the moving
    statistics frozen, batch-norm-inference. Scale and offset stay f32 under mixed precision, as there."""
    scale, offset = tf.cast(scale, tf.float32), tf.cast(offset, tf.float32)
    if training:
        return tf.compat.v1.nn.fused_batch_norm(x, scale, offset, epsilon=1e-3, is_training=True)[0]
    width = scale.shape[0]
    mean, variance = tf.zeros([width], tf.float32), tf.ones([width], tf.float32)
    return tf.compat.v1.nn.fused_batch_norm(
        x, scale, offset, mean=mean, variance=variance, epsilon=1e-3, is_training=False
    )[0]


def _mobilenet(weights: list[Any], x: tf.Tensor, training: bool) -> tf.Tensor:
    """MobileNetV1's depthwise-separable blocks with fused batch norm and ReLU6 (tf.compat.v1 style)."""
    stem, scale, offset = weights[:3]
    x = tf.nn.conv2d(x, stem, strides=2, padding="SAME")
    x = tf.nn.relu6(_fused_batch_norm(x, scale, offset, training))
    for index in range(3, len(weights) - 2, 6):
        depthwise, d_scale, d_offset, pointwise, p_scale, p_offset = weights[index : index + 6]
        x = tf.nn.depthwise_conv2d(x, depthwise, strides=[1, 1, 1, 1], padding="SAME")
        x = tf.nn.relu6(_fused_batch_norm(x, d_scale, d_offset, training))
        x = tf.nn.conv2d(x, pointwise, strides=1, padding="SAME")
        x = tf.nn.relu6(_fused_batch_norm(x, p_scale, p_offset, training))
    x = tf.reduce_mean(x, axis=[1, 2])
    return tf.matmul(x, weights[-2]) + weights[-1]


def _rnn_shapes(config: dict[str, Any]) -> list[tuple[int, ...]]:
    width = config["width"]
    shapes = []
    for index in range(config["layers"]):
        shapes += [(width if index else 16, 3 * width), (width, 3 * width), (3 * width,)]
    return shapes + [(width, 10), (10,)]


def _rnn(weights: list[Any], x: tf.Tensor) -> tf.Tensor:
    """A GRU stack over the time axis with tf.scan (a while loop in HLO)."""
    for index in range(0, len(weights) - 2, 3):
        kernel, recurrent, bias = weights[index : index + 3]
        width = recurrent.shape[0]

        def cell(state: tf.Tensor, inputs: tf.Tensor, kernel=kernel, recurrent=recurrent, bias=bias) -> Any:
            gates = tf.matmul(inputs, kernel) + bias
            update, reset, candidate = tf.split(gates, 3, axis=-1)
            hidden_update, hidden_reset, hidden_candidate = tf.split(tf.matmul(state, recurrent), 3, axis=-1)
            z = tf.sigmoid(update + hidden_update)
            r = tf.sigmoid(reset + hidden_reset)
            proposal = tf.tanh(candidate + r * hidden_candidate)
            return z * state + (1 - z) * proposal

        sequence = tf.transpose(x, [1, 0, 2])
        initial = tf.zeros([tf.shape(x)[0], width], dtype=x.dtype)
        x = tf.transpose(tf.scan(cell, sequence, initializer=initial), [1, 0, 2])
    return tf.matmul(x[:, -1], weights[-2]) + weights[-1]


MODELS = {
    "mlp": (_mlp_shapes, lambda weights, x, training: _mlp(weights, x), (32,)),
    "cnn": (_cnn_shapes, _cnn, (16, 16, 3)),
    "rnn": (_rnn_shapes, lambda weights, x, training: _rnn(weights, x), (12, 16)),
    "mobilenet": (_mobilenet_shapes, _mobilenet, (16, 16, 3)),
}


def _mixed_bf16(forward: Any) -> Any:
    """Keras' `mixed_bfloat16` recipe by hand: f32 variables, weights and inputs cast to bf16 for the
    computation, logits cast back to f32 for the loss and the softmax."""

    def compute(weights: list[Any], x: tf.Tensor, training: bool) -> tf.Tensor:
        cast = [tf.cast(weight, tf.bfloat16) for weight in weights]
        return tf.cast(forward(cast, tf.cast(x, tf.bfloat16), training), tf.float32)

    return compute


def output_shapes(config: dict[str, Any]) -> list[tuple[int, ...]]:
    """Shapes of the graph's f32 outputs: the probabilities, or the loss, every variable and momentum."""
    if config["mode"] == "infer":
        return [(config["batch"], 10)]
    shapes = MODELS[config["model"]][0](config)
    return [(), *shapes, *shapes]


def lower(config: dict[str, Any]) -> bytes:
    """The serialized HloModuleProto of one graph: `mode` infer (weights as constants) or train
    (variables, one SGD step with momentum); `dtype` bf16 computes in bf16 on f32 variables."""
    shapes_of, forward, input_shape = MODELS[config["model"]]
    if config["dtype"] == "bf16":
        forward = _mixed_bf16(forward)
    values = _weights(shapes_of(config), seed=sum(map(ord, json.dumps(config, sort_keys=True))))
    batch = config["batch"]
    x = tf.constant(np.random.default_rng(1).standard_normal((batch, *input_shape)).astype(np.float32))
    labels = tf.constant(np.arange(batch) % 10, dtype=tf.int32)
    if config["mode"] == "infer":

        @tf.function(jit_compile=True)
        def infer(x: tf.Tensor) -> tf.Tensor:
            # Made inside the function: graph constants, so XLA sees them as HLO constants (a tensor
            # captured from outside would arrive as one more parameter).
            weights = [tf.constant(value) for value in values]
            return tf.nn.softmax(forward(weights, x, False))

        return infer.experimental_get_compiler_ir(x)(stage="hlo_serialized")
    variables = [tf.Variable(value) for value in values]
    momenta = [tf.Variable(tf.zeros_like(value)) for value in values]

    @tf.function(jit_compile=True)
    def train(x: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = forward(variables, x, True)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels, logits))
        for variable, momentum, gradient in zip(
            variables, momenta, tape.gradient(loss, variables), strict=True
        ):
            momentum.assign(0.9 * momentum + gradient)
            variable.assign_sub(0.01 * momentum)
        return loss

    return train.experimental_get_compiler_ir(x, labels)(stage="hlo_serialized")


if __name__ == "__main__":
    proto = base64.b64encode(lower(json.loads(sys.argv[1]))).decode()
    print(json.dumps({"proto": proto, "version": tf.__version__}))
