"""T5-style encoder-decoder: RMS norm, bucketed relative position bias, gated-GELU feed-forward.

`mode=train` is a teacher-forced training step; `mode=infer` encodes once and decodes greedily for
`seq_out` steps inside `lax.fori_loop`.
"""

from __future__ import annotations

import math
from typing import Any

import jax
import jax.numpy as jnp

from xlabench.models import common

_BUCKETS = 32
_MAX_DISTANCE = 128


def _attention_shapes(width: int) -> dict[str, tuple[int, ...]]:
    # T5 attention has no biases.
    return {"q": (width, width), "k": (width, width), "v": (width, width), "o": (width, width)}


def _ffn_shapes(width: int, hidden: int) -> dict[str, tuple[int, ...]]:
    return {"wi_gate": (width, hidden), "wi": (width, hidden), "wo": (hidden, width)}


def param_shapes(config: dict[str, Any]) -> dict[str, Any]:
    """Parameter shapes for shared embeddings, encoder, decoder and the two relative-bias tables."""
    width, hidden, heads = config["width"], config["ff"], config["heads"]
    encoder_layer = {
        "ln1": (width,),
        "attn": _attention_shapes(width),
        "ln2": (width,),
        "ffn": _ffn_shapes(width, hidden),
    }
    decoder_layer = {
        "ln1": (width,),
        "self_attn": _attention_shapes(width),
        "ln2": (width,),
        "cross_attn": _attention_shapes(width),
        "ln3": (width,),
        "ffn": _ffn_shapes(width, hidden),
    }
    return {
        "embed": (config["vocab"], width),
        "encoder": {
            "rel_bias": (_BUCKETS, heads),
            "layers": [encoder_layer] * config["layers"],
            "ln": (width,),
        },
        "decoder": {
            "rel_bias": (_BUCKETS, heads),
            "layers": [decoder_layer] * config["layers"],
            "ln": (width,),
        },
    }


def relative_buckets(q_len: int, k_len: int, bidirectional: bool) -> jax.Array:
    """T5 relative-position buckets [q_len, k_len]: exact for near offsets, log-spaced for far ones."""
    relative = jnp.arange(k_len)[None, :] - jnp.arange(q_len)[:, None]
    buckets = _BUCKETS
    offset = jnp.zeros_like(relative)
    if bidirectional:
        buckets //= 2
        offset = (relative > 0).astype(jnp.int32) * buckets
        distance = jnp.abs(relative)
    else:
        distance = -jnp.minimum(relative, 0)
    exact = buckets // 2
    far = exact + (
        jnp.log(jnp.maximum(distance, 1).astype(jnp.float32) / exact)
        / math.log(_MAX_DISTANCE / exact)
        * (buckets - exact)
    ).astype(jnp.int32)
    far = jnp.minimum(far, buckets - 1)
    return offset + jnp.where(distance < exact, distance, far)


def _position_bias(table: jax.Array, q_len: int, k_len: int, bidirectional: bool) -> jax.Array:
    # Embedding lookup of the bucket table: [q, k, H] -> [1, H, q, k].
    return table[relative_buckets(q_len, k_len, bidirectional)].transpose(2, 0, 1)[None]


def _attend(
    x: jax.Array,
    memory: jax.Array,
    p: dict[str, jax.Array],
    heads: int,
    mask: jax.Array | None,
    bias: jax.Array | None,
) -> jax.Array:
    q = common.split_heads(x @ p["q"], heads)
    k = common.split_heads(memory @ p["k"], heads)
    v = common.split_heads(memory @ p["v"], heads)
    # T5 folds the 1/sqrt(d) scale into initialisation; undo dot_attention's scaling to stay faithful.
    q = q * math.sqrt(q.shape[-1])
    return common.merge_heads(common.dot_attention(q, k, v, mask, bias)) @ p["o"]


def _ffn(x: jax.Array, p: dict[str, jax.Array]) -> jax.Array:
    return (jax.nn.gelu(x @ p["wi_gate"]) * (x @ p["wi"])) @ p["wo"]


def encode(params: dict[str, Any], tokens: jax.Array, heads: int) -> jax.Array:
    """Encoder states [B, S_in, D]."""
    enc = params["encoder"]
    seq = tokens.shape[1]
    bias = _position_bias(enc["rel_bias"], seq, seq, bidirectional=True)
    x = params["embed"][tokens]
    for layer in enc["layers"]:
        x = x + _attend(
            common.rms_norm(x, layer["ln1"]),
            common.rms_norm(x, layer["ln1"]),
            layer["attn"],
            heads,
            None,
            bias,
        )
        x = x + _ffn(common.rms_norm(x, layer["ln2"]), layer["ffn"])
    return common.rms_norm(x, enc["ln"])


def decode(params: dict[str, Any], memory: jax.Array, targets_in: jax.Array, heads: int) -> jax.Array:
    """Decoder logits [B, S_out, V] with causal self-attention and cross-attention to `memory`."""
    dec = params["decoder"]
    seq = targets_in.shape[1]
    bias = _position_bias(dec["rel_bias"], seq, seq, bidirectional=False)
    mask = common.causal_mask(seq)
    x = params["embed"][targets_in]
    for layer in dec["layers"]:
        h = common.rms_norm(x, layer["ln1"])
        x = x + _attend(h, h, layer["self_attn"], heads, mask, bias)
        x = x + _attend(common.rms_norm(x, layer["ln2"]), memory, layer["cross_attn"], heads, None, None)
        x = x + _ffn(common.rms_norm(x, layer["ln3"]), layer["ffn"])
    x = common.rms_norm(x, dec["ln"])
    # Tied embeddings are rescaled by 1/sqrt(d) as in T5.
    return (x * (x.shape[-1] ** -0.5)) @ params["embed"].T


def make_program(config: dict[str, Any]) -> common.Program:
    """`mode=train`: teacher-forced loss + AdamW step; `mode=infer`: greedy decoding in a fori_loop."""
    heads, batch = config["heads"], config["batch"]
    param_specs = common.specs(param_shapes(config), common.dtype_of(config))
    inputs = common.int_spec(batch, config["seq_in"])

    if config["mode"] == "train":

        def train_step(
            params: Any, opt_state: Any, inputs: jax.Array, targets: jax.Array
        ) -> tuple[Any, Any, jax.Array]:
            def loss_fn(p: Any) -> jax.Array:
                # Shift right with the pad id 0 as the decoder start token.
                targets_in = jnp.pad(targets[:, :-1], ((0, 0), (1, 0)))
                logits = decode(p, encode(p, inputs, heads), targets_in, heads)
                return common.cross_entropy(logits, targets, weights=targets != 0)

            loss, grads = jax.value_and_grad(loss_fn)(params)
            params, opt_state = common.adam_update(params, grads, opt_state, lr=1e-3)
            return params, opt_state, loss

        targets = common.int_spec(batch, config["seq_out"])
        return common.Program(
            train_step, (param_specs, common.adam_state_specs(param_specs), inputs, targets)
        )

    seq_out = config["seq_out"]

    def greedy_decode(params: Any, inputs: jax.Array) -> jax.Array:
        memory = encode(params, inputs, heads)

        def step(i: jax.Array, tokens: jax.Array) -> jax.Array:
            logits = decode(params, memory, tokens, heads)
            next_token = jnp.argmax(jax.lax.dynamic_index_in_dim(logits, i, axis=1, keepdims=False), axis=-1)
            return jax.lax.dynamic_update_index_in_dim(tokens, next_token.astype(jnp.int32), i + 1, axis=1)

        # Position 0 holds the start token; each step fills the next slot, so the buffer has one extra.
        tokens = jnp.zeros((batch, seq_out + 1), jnp.int32)
        return jax.lax.fori_loop(0, seq_out, step, tokens)[:, 1:]

    return common.Program(greedy_decode, (param_specs, inputs))
