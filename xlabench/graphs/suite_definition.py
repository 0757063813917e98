"""The benchmark suite definition: every graph's name, family, model config and split.

Splits:
- `train`: graphs policies are trained on;
- `val`: other configs of the training families, listed by hand (`_VALIDATION`), or for the
  model-library families the next 15% of the hash space below: every choice made while training
  (hyperparameters, seeds, configurations, when to stop) is made on them, never on `test`;
- `test`: held-out configs of the training families (every config appears once in the suite, so no test
  config is shared with train);
- configs listed in `_TRAINING` are `train` whatever their hash: each program a held-out split holds
  in a precision the grid left out of `train` (`training_gaps`);
- `unseen`: whole families (ViT, MLP-Mixer, GNN, and every equinox family: a whole library) that no
  policy is ever trained on.

Within a training family a graph goes to `test` when the sha256 of its name falls in the first quarter of
the hash space: the split is stable when configs are added or reordered, and needs no hand-picked list.
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the models import jax: only building a graph needs them, not every command
    from xlabench.models.common import Program

SPLITS: tuple[str, ...] = ("train", "val", "test", "unseen")
# Whole families no policy is trained or selected on; equinox's are a whole library nobody trained on.
UNSEEN_FAMILIES: frozenset[str] = frozenset(
    {"vit", "mlp_mixer", "gnn", "eqx_transformer", "eqx_unet", "eqx_resnext"}
)
# Families the pytest plugin's default run does not gate yet: added after the shipped version was made,
# it has no baselines on them. Listed, not hidden: every other command (eval, retrain, SPECs) has them,
# and `pytest --xlabench-graphs FAMILY` gates them today. Emptied when a version ships with their
# baselines (general@v3.0 did, for the model-library families and `tf_mobilenet_bn`).
STAGED_FAMILIES: frozenset[str] = frozenset()
_TEST_FRACTION = 0.25
# Families without hand-listed `val` configs (`_VALIDATION`) draw them by the same hash: the next 15%.
_VALIDATION_FRACTION = 0.15

# family -> (module under xlabench.models, config keys spelled into the graph name with their prefixes)
_FAMILIES: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {
    "gpt2": ("gpt2", (("layers", "l"), ("width", "d"), ("heads", "h"), ("seq", "s"), ("batch", "b"))),
    "bert": (
        "bert",
        (("mode", ""), ("layers", "l"), ("width", "d"), ("heads", "h"), ("seq", "s"), ("batch", "b")),
    ),
    "resnet": ("resnet", (("mode", ""), ("blocks", "n"), ("width", "w"), ("image", "i"), ("batch", "b"))),
    "t5": (
        "t5",
        (
            ("mode", ""),
            ("layers", "l"),
            ("width", "d"),
            ("heads", "h"),
            ("seq_in", "s"),
            ("seq_out", "t"),
            ("batch", "b"),
        ),
    ),
    "recurrent": (
        "recurrent",
        (("cell", ""), ("mode", ""), ("layers", "l"), ("hidden", "h"), ("seq", "s"), ("batch", "b")),
    ),
    "control_flow": ("control_flow", (("program", ""), ("variant", ""))),
    "moe": (
        "mixture_of_experts",
        (
            ("mode", ""),
            ("layers", "l"),
            ("experts", "e"),
            ("top_k", "k"),
            ("width", "d"),
            ("seq", "s"),
            ("batch", "b"),
        ),
    ),
    "vit": (
        "vit",
        (
            ("mode", ""),
            ("layers", "l"),
            ("width", "d"),
            ("heads", "h"),
            ("patch", "p"),
            ("image", "i"),
            ("batch", "b"),
        ),
    ),
    "mlp_mixer": (
        "mlp_mixer",
        (("mode", ""), ("layers", "l"), ("width", "d"), ("patch", "p"), ("image", "i"), ("batch", "b")),
    ),
    "gnn": ("gnn", (("mode", ""), ("layers", "l"), ("width", "d"), ("nodes", "n"), ("edges", "e"))),
    # Model-library families (`xlabench.models.flax_models`, `haiku_models`, `equinox_models`): the
    # libraries' own layers and networks, optax optimizers, mixed bf16 as each library sets it.
    "flax_resnet": (
        "flax_models.flax_resnet",
        (("mode", ""), ("block", ""), ("stages", "n"), ("width", "w"), ("image", "i"), ("batch", "b")),
    ),
    "flax_efficientnet": (
        "flax_models.efficientnet",
        (("mode", ""), ("stages", ""), ("stem", "c"), ("image", "i"), ("batch", "b")),
    ),
    "flax_densenet": (
        "flax_models.densenet",
        (("mode", ""), ("blocks", "n"), ("growth", "k"), ("image", "i"), ("batch", "b")),
    ),
    "flax_lm": (
        "flax_models.lm",
        (("mode", ""), ("layers", "l"), ("width", "d"), ("heads", "h"), ("seq", "s"), ("batch", "b")),
    ),
    "nnx_convnext": (
        "flax_models.convnext",
        (("mode", ""), ("depths", "n"), ("width", "w"), ("image", "i"), ("batch", "b")),
    ),
    "nnx_transformer": (
        "flax_models.nnx_transformer",
        (
            ("mode", ""),
            ("layers", "l"),
            ("width", "d"),
            ("heads", "h"),
            ("kv_heads", "g"),
            ("seq", "s"),
            ("batch", "b"),
        ),
    ),  # fmt: skip
    "haiku_resnet": (
        "haiku_models.haiku_resnet",
        (
            ("mode", ""),
            ("version", ""),
            ("block", ""),
            ("blocks", "n"),
            ("width", "w"),
            ("image", "i"),
            ("batch", "b"),
        ),
    ),  # fmt: skip
    "haiku_mobilenet": (
        "haiku_models.mobilenet",
        (("mode", ""), ("blocks", "n"), ("divisor", "q"), ("image", "i"), ("batch", "b")),
    ),
    "haiku_vqvae": (
        "haiku_models.vqvae",
        (
            ("mode", ""),
            ("quantizer", ""),
            ("hidden", "h"),
            ("layers", "l"),
            ("codes", "k"),
            ("image", "i"),
            ("batch", "b"),
        ),
    ),  # fmt: skip
    "eqx_transformer": (
        "equinox_models.eqx_transformer",
        (("mode", ""), ("layers", "l"), ("width", "d"), ("heads", "h"), ("seq", "s"), ("batch", "b")),
    ),
    "eqx_unet": (
        "equinox_models.unet",
        (("mode", ""), ("levels", "n"), ("width", "w"), ("image", "i"), ("batch", "b")),
    ),
    "eqx_resnext": (
        "equinox_models.resnext",
        (("mode", ""), ("blocks", "n"), ("width", "w"), ("groups", "g"), ("image", "i"), ("batch", "b")),
    ),
    # Lowered by TensorFlow's XLA bridge, not by jax (`xlabench.models.tensorflow_models`).
    "tensorflow": (
        "tensorflow_models",
        (("model", ""), ("mode", ""), ("layers", "l"), ("width", "d"), ("batch", "b")),
    ),
    # TensorFlow's MobileNet with fused batch norm: XLA's batch-norm-* ops, which no jax library emits
    # and torch-xla and TF1-style code do (`tensorflow_models`, model "mobilenet").
    "tf_mobilenet_bn": (
        "tensorflow_models",
        (("mode", ""), ("layers", "l"), ("width", "d"), ("batch", "b")),
    ),
}
# The framework that lowers each family's graphs: jax, unless named here.
FRAMEWORKS: dict[str, str] = {"tensorflow": "tensorflow", "tf_mobilenet_bn": "tensorflow"}


@dataclass(frozen=True)
class GraphSpec:
    """One suite entry: what to lower (family + config) and where it belongs (split)."""

    name: str
    family: str
    split: str
    config: dict[str, Any] = field(hash=False)

    @property
    def framework(self) -> str:
        """The framework whose XLA bridge lowers this graph: jax or tensorflow."""
        return FRAMEWORKS.get(self.family, "jax")

    def program(self) -> Program:
        """Build the family's function and abstract arguments for this config (jax families)."""
        module = importlib.import_module(f"xlabench.models.{_FAMILIES[self.family][0]}")
        return module.make_program(self.config)


def families() -> tuple[str, ...]:
    """All family names, in suite order."""
    return tuple(_FAMILIES)


def _cycle(values: list[Any], index: int) -> Any:
    """Pick a value for a secondary axis so variants cover it without a full cross product."""
    return values[index % len(values)]


def _gpt2() -> Iterator[dict[str, Any]]:
    shapes = [(64, 2), (128, 4), (256, 8)]
    for i, (layers, (width, heads)) in enumerate(itertools.product([1, 2, 3, 4, 6, 8], shapes)):
        # dtype alternates instead of doubling the grid: GPT-2 steps are the costliest graphs to compile.
        yield {
            "layers": layers,
            "width": width,
            "heads": heads,
            "seq": _cycle([32, 64, 128], i // 3 + i),
            "batch": _cycle([2, 4], i // 2),
            "vocab": 512,
            "dtype": _cycle(["f32", "bf16"], i),
        }


def _bert() -> Iterator[dict[str, Any]]:
    for mode, layers_options, shapes in (
        ("train", [1, 2, 4], [(64, 2), (128, 4), (192, 6)]),
        ("infer", [1, 2, 4, 8], [(64, 2), (192, 6)]),
    ):
        for i, (layers, (width, heads)) in enumerate(itertools.product(layers_options, shapes)):
            seq = _cycle([32, 64, 128], i)
            config = {
                "mode": mode,
                "layers": layers,
                "width": width,
                "heads": heads,
                "seq": seq,
                "batch": _cycle([2, 4], i // 2),
                "vocab": 1024,
                "dtype": _cycle(["f32", "bf16"], i // 2 + i),
            }
            if mode == "train":
                config["masked"] = seq // 8
            yield config


def _resnet() -> Iterator[dict[str, Any]]:
    for offset, mode in enumerate(("train", "infer")):
        for i, (blocks, width) in enumerate(
            itertools.product([[1, 1, 1], [2, 2, 2], [3, 3, 3], [2, 2, 2, 2]], [8, 16])
        ):
            yield {
                "mode": mode,
                "blocks": blocks,
                "width": width,
                "image": _cycle([16, 32], i // 2 + offset),
                "batch": _cycle([2, 4, 8], i),
                "classes": 10,
                "dtype": _cycle(["f32", "bf16"], i + offset),
            }


def _t5() -> Iterator[dict[str, Any]]:
    shapes = [(64, 2, 128), (128, 4, 256)]
    for offset, (mode, layers_options) in enumerate((("train", [1, 2, 3]), ("infer", [1, 2, 4]))):
        for i, (layers, (width, heads, ff)) in enumerate(itertools.product(layers_options, shapes)):
            yield {
                "mode": mode,
                "layers": layers,
                "width": width,
                "heads": heads,
                "ff": ff,
                "seq_in": _cycle([16, 32, 64], i),
                "seq_out": _cycle([8, 16], i // 2),
                "batch": 2,
                "vocab": 512,
                "dtype": _cycle(["f32", "bf16"], i // 2 + i + offset),
            }


def _recurrent() -> Iterator[dict[str, Any]]:
    for i, (cell, mode, layers) in enumerate(
        itertools.product(["lstm", "gru"], ["train", "infer"], [1, 2, 3])
    ):
        yield {
            "cell": cell,
            "mode": mode,
            "layers": layers,
            "hidden": _cycle([64, 128, 256], i // 2),
            "embed": 32,
            "vocab": 256,
            "seq": _cycle([16, 32, 64], i),
            "batch": _cycle([4, 8], i // 3),
            "dtype": _cycle(["f32", "bf16"], i // 3 + i),
        }


def _control_flow() -> Iterator[dict[str, Any]]:
    for i, (n, batch, jacobi) in enumerate(itertools.product([16, 64], [1, 4], [False, True])):
        if i in (0, 5):
            continue  # six CG variants are plenty for a loop this small
        yield {
            "program": "cg",
            "variant": f"n{n}-b{batch}-{'jacobi' if jacobi else 'plain'}",
            "n": n,
            "batch": batch,
            "jacobi": jacobi,
            "max_iter": 4 * n,
            "dtype": _cycle(["f32", "bf16"], i // 2) if batch > 1 else "f32",
        }
    for i, (samples, features) in enumerate(itertools.product([64, 256], [8, 32, 64])):
        yield {
            "program": "newton_cg",
            "variant": f"m{samples}-f{features}",
            "samples": samples,
            "features": features,
            "newton_steps": 20,
            "cg_steps": features,
            "dtype": _cycle(["f32", "bf16"], i),
        }
    for i, (vocab, hidden) in enumerate(itertools.product([64, 512, 4096], [32, 128])):
        yield {
            "program": "early_exit_decode",
            "variant": f"v{vocab}-h{hidden}",
            "vocab": vocab,
            "hidden": hidden,
            "batch": 4,
            "max_len": 32,
            "dtype": _cycle(["f32", "bf16"], i),
        }
    for i, (width, threshold) in enumerate(itertools.product([32, 128, 256], [0.5, 1.5])):
        yield {
            "program": "adaptive_depth",
            "variant": f"d{width}-t{threshold}",
            "width": width,
            "batch": 8,
            "max_steps": 12,
            "threshold": threshold,
            "dtype": _cycle(["f32", "bf16"], i // 2 + i),
        }
    for i, (layers, width) in enumerate(itertools.product([2, 4, 6, 8], [32, 128])):
        yield {
            "program": "cond_train",
            "variant": f"l{layers}-d{width}",
            "layers": layers,
            "width": width,
            "batch": 16,
            "classes": 10,
            "dtype": _cycle(["f32", "bf16"], i // 2 + i),
        }


def _moe() -> Iterator[dict[str, Any]]:
    for offset, mode in enumerate(("train", "infer")):
        for i, (layers, (experts, top_k)) in enumerate(
            itertools.product([1, 2, 4], [(4, 1), (4, 2), (8, 2)])
        ):
            if mode == "train" and layers == 4 and experts == 8:
                continue  # the one config well past 5,000 instructions
            yield {
                "mode": mode,
                "layers": layers,
                "experts": experts,
                "top_k": top_k,
                "width": _cycle([64, 128], i),
                "heads": 2,
                "expert_hidden": 128,
                "capacity_factor": 1.25,
                "seq": _cycle([16, 32, 64], i // 2),
                "batch": 2,
                "vocab": 512,
                "dtype": _cycle(["f32", "bf16"], i // 3 + i + offset),
            }


def _vit() -> Iterator[dict[str, Any]]:
    shapes = [(64, 2), (128, 4)]
    for offset, (mode, layers_options) in enumerate((("train", [1, 2, 4]), ("infer", [2, 4, 8]))):
        for i, (layers, (width, heads)) in enumerate(itertools.product(layers_options, shapes)):
            image = _cycle([16, 32], i // 2)
            yield {
                "mode": mode,
                "layers": layers,
                "width": width,
                "heads": heads,
                "patch": image // 4,
                "image": image,
                "mlp_ratio": 4,
                "classes": 10,
                "batch": _cycle([2, 4], i),
                "dtype": _cycle(["f32", "bf16"], i // 2 + i + offset),
            }


def _mlp_mixer() -> Iterator[dict[str, Any]]:
    for offset, (mode, layers_options) in enumerate((("train", [1, 2, 4]), ("infer", [2, 4, 8]))):
        for i, (layers, width) in enumerate(itertools.product(layers_options, [64, 128])):
            image = _cycle([16, 32], i // 2)
            yield {
                "mode": mode,
                "layers": layers,
                "width": width,
                "patch": 4,
                "image": image,
                "token_hidden": width // 2,
                "channel_hidden": 4 * width,
                "classes": 10,
                "batch": _cycle([2, 4], i),
                "dtype": _cycle(["f32", "bf16"], i // 2 + i + offset),
            }


def _gnn() -> Iterator[dict[str, Any]]:
    for offset, mode in enumerate(("train", "infer")):
        for i, (layers, width) in enumerate(itertools.product([1, 2, 4], [32, 64])):
            nodes = _cycle([64, 256], i // 2)
            yield {
                "mode": mode,
                "layers": layers,
                "width": width,
                "node_features": 16,
                "edge_features": 4,
                "nodes": nodes,
                "edges": 4 * nodes,
                "graphs": 8,
                "classes": 4,
                "dtype": _cycle(["f32", "bf16"], i // 2 + i + offset),
            }


def _tensorflow() -> Iterator[dict[str, Any]]:
    # Inference freezes the weights into the module as constants; training takes them as variables.
    # (Sizes from the third of five small grids tried: the first put none of its graphs in `test`.)
    f32_sizes = {"mlp": [(1, 64), (3, 128)], "cnn": [(1, 16), (2, 32)], "rnn": [(1, 32), (2, 48)]}
    # bf16: mixed precision as Keras' `mixed_bfloat16` (f32 variables, bf16 compute), where XLA's
    # float normalization has the most to place; other sizes, so no held-out graph is a train graph
    # in another dtype.
    bf16_sizes = {"mlp": [(2, 64), (1, 128)], "cnn": [(1, 32), (2, 24)], "rnn": [(1, 48), (2, 32)]}
    for dtype, sizes in (("f32", f32_sizes), ("bf16", bf16_sizes)):
        for model, shapes in sizes.items():
            for mode in ("infer", "train"):
                for i, (layers, width) in enumerate(shapes):
                    yield {"model": model, "mode": mode, "layers": layers, "width": width,
                           "batch": _cycle([8, 4], i), "dtype": dtype}  # fmt: skip


def _tf_mobilenet_bn() -> Iterator[dict[str, Any]]:
    # Other sizes per dtype, as in `_tensorflow`, so no held-out graph is a train graph in another dtype.
    sizes = {"f32": [(1, 16), (1, 32), (2, 24)], "bf16": [(1, 24), (2, 16), (2, 32)]}
    for dtype, shapes in sizes.items():
        for mode in ("infer", "train"):
            for i, (layers, width) in enumerate(shapes):
                yield {"model": "mobilenet", "mode": mode, "layers": layers, "width": width,
                       "batch": _cycle([8, 4], i), "dtype": dtype}  # fmt: skip


# ---------------------------------------------------------------------------- model-library families
# Grids over depth and width; the secondary axes (image size, batch, dtype) cycle. bf16 is what each
# library offers: mixed precision in flax and haiku (f32 parameters, bf16 compute), bf16 parameters and
# compute in equinox (it has no mixed-precision policy).


def _modes_product(*axes: list[Any]) -> Iterator[tuple[int, str, tuple[Any, ...]]]:
    """(index, mode, values) over train/infer and the product of `axes`, index counting within a mode."""
    for offset, mode in enumerate(("train", "infer")):
        for i, values in enumerate(itertools.product(*axes)):
            yield i + offset, mode, values


def _flax_resnet() -> Iterator[dict[str, Any]]:
    stage_options = [[1, 1], [2, 2], [1, 1, 1], [2, 2, 2]]
    for i, mode, (block, stages) in _modes_product(["basic", "bottleneck"], stage_options):
        yield {"mode": mode, "block": block, "stages": stages, "width": _cycle([8, 16], i // 2),
               "image": _cycle([16, 32], i), "batch": _cycle([2, 4], i // 3), "classes": 10,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _flax_efficientnet() -> Iterator[dict[str, Any]]:
    for i, mode, (stages, stem) in _modes_product(["s", "m", "l"], [8, 16]):
        yield {"mode": mode, "stages": stages, "stem": stem, "image": _cycle([32, 16], i // 2),
               "batch": _cycle([2, 4], i), "classes": 10,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _flax_densenet() -> Iterator[dict[str, Any]]:
    for i, mode, (blocks, growth) in _modes_product([[2, 2], [4, 4], [3, 3, 3], [4, 4, 4]], [4, 8]):
        yield {"mode": mode, "blocks": blocks, "growth": growth, "image": _cycle([16, 32], i // 3),
               "batch": _cycle([2, 4], i), "classes": 10,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _flax_lm() -> Iterator[dict[str, Any]]:
    for i, mode, (layers, (width, heads)) in _modes_product([1, 2, 4], [(64, 2), (128, 4)]):
        yield {"mode": mode, "layers": layers, "width": width, "heads": heads,
               "seq": _cycle([32, 64, 128], i), "batch": _cycle([2, 4], i // 2), "vocab": 512,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _nnx_convnext() -> Iterator[dict[str, Any]]:
    for i, mode, (depths, width) in _modes_product([[1, 1], [2, 2], [1, 1, 1], [2, 2, 2]], [16, 32]):
        yield {"mode": mode, "depths": depths, "width": width, "image": 32, "batch": _cycle([2, 4], i),
               "classes": 10, "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _nnx_transformer() -> Iterator[dict[str, Any]]:
    for i, mode, (layers, (width, heads, kv_heads)) in _modes_product([1, 2, 4], [(64, 4, 2), (128, 4, 4)]):
        yield {"mode": mode, "layers": layers, "width": width, "heads": heads, "kv_heads": kv_heads,
               "seq": _cycle([32, 64, 128], i), "batch": _cycle([2, 4], i // 2), "vocab": 512,
               "dtype": _cycle(["bf16", "f32"], i // 2 + i)}  # fmt: skip


def _haiku_resnet() -> Iterator[dict[str, Any]]:
    axes = (["v1", "v2"], ["basic", "bottleneck"], [[1, 1, 1, 1], [2, 2, 2, 2]])
    for i, mode, (version, block, blocks) in _modes_product(*axes):
        yield {"mode": mode, "version": version, "block": block, "blocks": blocks, "width": 8,
               "image": _cycle([16, 32], i // 2), "batch": _cycle([2, 4], i), "classes": 10,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _haiku_mobilenet() -> Iterator[dict[str, Any]]:
    for i, mode, (blocks, divisor) in _modes_product([5, 7, 9, 13], [8, 16]):
        yield {"mode": mode, "blocks": blocks, "divisor": divisor, "image": 32, "batch": _cycle([2, 4], i),
               "classes": 10, "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _haiku_vqvae() -> Iterator[dict[str, Any]]:
    sizes = [(32, 1), (32, 2), (64, 2)]
    for i, mode, (quantizer, (hidden, layers)) in _modes_product(["ema", "plain"], sizes):
        yield {"mode": mode, "quantizer": quantizer, "hidden": hidden, "layers": layers, "embedding": 16,
               "codes": _cycle([64, 256], i), "image": _cycle([16, 32], i // 2), "batch": 4,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _eqx_transformer() -> Iterator[dict[str, Any]]:
    for i, mode, (layers, width) in _modes_product([1, 2, 4], [64, 128]):
        yield {"mode": mode, "layers": layers, "width": width, "heads": 4, "seq": _cycle([32, 64], i),
               "batch": _cycle([2, 4], i // 2), "vocab": 512, "classes": 4,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _eqx_unet() -> Iterator[dict[str, Any]]:
    for i, mode, (levels, width) in _modes_product([2, 3], [8, 16]):
        yield {"mode": mode, "levels": levels, "width": width, "image": 16, "batch": _cycle([2, 4], i),
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


def _eqx_resnext() -> Iterator[dict[str, Any]]:
    for i, mode, (blocks, groups) in _modes_product([[1, 1], [1, 1, 1], [2, 2]], [4, 8]):
        yield {"mode": mode, "blocks": blocks, "width": 16, "groups": groups, "image": 16,
               "batch": _cycle([2, 4], i), "classes": 10,
               "dtype": _cycle(["f32", "bf16"], i // 2 + i)}  # fmt: skip


# Validation configs: each family's own grid leaves these out (layer counts, widths or lengths it does
# not use), so no `val` graph is also a `train` or `test` graph.
_VALIDATION: dict[str, list[dict[str, Any]]] = {
    "gpt2": [
        {"layers": 5, "width": 64, "heads": 2, "seq": 32, "batch": 4, "vocab": 512, "dtype": "bf16"},
        {"layers": 5, "width": 128, "heads": 4, "seq": 64, "batch": 2, "vocab": 512, "dtype": "f32"},
        {"layers": 7, "width": 64, "heads": 2, "seq": 128, "batch": 2, "vocab": 512, "dtype": "f32"},
    ],
    "bert": [
        {"mode": "train", "layers": 3, "width": 128, "heads": 4, "seq": 64, "batch": 2, "vocab": 1024,
         "dtype": "f32", "masked": 8},
        {"mode": "infer", "layers": 3, "width": 64, "heads": 2, "seq": 64, "batch": 4, "vocab": 1024,
         "dtype": "bf16"},
        {"mode": "infer", "layers": 6, "width": 128, "heads": 4, "seq": 32, "batch": 2, "vocab": 1024,
         "dtype": "f32"},
    ],
    "resnet": [
        {"mode": "train", "blocks": [2, 1, 1], "width": 8, "image": 16, "batch": 4, "classes": 10,
         "dtype": "f32"},
        {"mode": "infer", "blocks": [1, 2, 2], "width": 16, "image": 32, "batch": 2, "classes": 10,
         "dtype": "bf16"},
        {"mode": "infer", "blocks": [3, 2, 1], "width": 8, "image": 16, "batch": 8, "classes": 10,
         "dtype": "f32"},
    ],
    "t5": [
        {"mode": "train", "layers": 4, "width": 64, "heads": 2, "ff": 128, "seq_in": 32, "seq_out": 16,
         "batch": 2, "vocab": 512, "dtype": "f32"},
        {"mode": "infer", "layers": 3, "width": 128, "heads": 4, "ff": 256, "seq_in": 16, "seq_out": 8,
         "batch": 2, "vocab": 512, "dtype": "bf16"},
        {"mode": "infer", "layers": 5, "width": 64, "heads": 2, "ff": 128, "seq_in": 64, "seq_out": 16,
         "batch": 2, "vocab": 512, "dtype": "f32"},
    ],
    "recurrent": [
        {"cell": "lstm", "mode": "infer", "layers": 4, "hidden": 96, "embed": 32, "vocab": 256, "seq": 24,
         "batch": 4, "dtype": "f32"},
        {"cell": "gru", "mode": "train", "layers": 2, "hidden": 96, "embed": 32, "vocab": 256, "seq": 24,
         "batch": 8, "dtype": "bf16"},
        {"cell": "lstm", "mode": "train", "layers": 1, "hidden": 192, "embed": 32, "vocab": 256, "seq": 16,
         "batch": 4, "dtype": "f32"},
    ],
    "control_flow": [
        {"program": "cg", "variant": "n32-b2-plain", "n": 32, "batch": 2, "jacobi": False, "max_iter": 128,
         "dtype": "f32"},
        {"program": "newton_cg", "variant": "m128-f16", "samples": 128, "features": 16, "newton_steps": 20,
         "cg_steps": 16, "dtype": "bf16"},
        {"program": "early_exit_decode", "variant": "v1024-h64", "vocab": 1024, "hidden": 64, "batch": 4,
         "max_len": 32, "dtype": "f32"},
        {"program": "cond_train", "variant": "l3-d64", "layers": 3, "width": 64, "batch": 16, "classes": 10,
         "dtype": "f32"},
    ],
    "moe": [
        {"mode": "train", "layers": 3, "experts": 4, "top_k": 2, "width": 64, "heads": 2,
         "expert_hidden": 128, "capacity_factor": 1.25, "seq": 32, "batch": 2, "vocab": 512, "dtype": "f32"},
        {"mode": "infer", "layers": 3, "experts": 8, "top_k": 1, "width": 128, "heads": 2,
         "expert_hidden": 128, "capacity_factor": 1.25, "seq": 16, "batch": 2, "vocab": 512, "dtype": "bf16"},
        {"mode": "infer", "layers": 1, "experts": 2, "top_k": 1, "width": 64, "heads": 2,
         "expert_hidden": 128, "capacity_factor": 1.25, "seq": 64, "batch": 2, "vocab": 512, "dtype": "f32"},
    ],
    "flax_lm": [
        {"mode": "train", "layers": 3, "width": 64, "heads": 2, "seq": 64, "batch": 2, "vocab": 512,
         "dtype": "bf16"},
        {"mode": "infer", "layers": 3, "width": 128, "heads": 4, "seq": 32, "batch": 4, "vocab": 512,
         "dtype": "f32"},
    ],
    "tensorflow": [
        {"model": "mlp", "mode": "infer", "layers": 2, "width": 96, "batch": 4, "dtype": "f32"},
        {"model": "cnn", "mode": "train", "layers": 1, "width": 24, "batch": 4, "dtype": "f32"},
        {"model": "rnn", "mode": "infer", "layers": 1, "width": 40, "batch": 8, "dtype": "f32"},
    ],
}  # fmt: skip

# Train configs beyond the grids: the grids' hash split left these programs out of `train` in one
# precision that `val` or `test` holds (an LSTM step in bf16, where a bf16 float normalization meets a
# while loop, was only ever held out). Small sizes no other split uses.
_TRAINING: dict[str, list[dict[str, Any]]] = {
    "recurrent": [
        {"cell": "lstm", "mode": "infer", "layers": 1, "hidden": 128, "embed": 32, "vocab": 256, "seq": 16,
         "batch": 8, "dtype": "bf16"},
        {"cell": "lstm", "mode": "train", "layers": 1, "hidden": 64, "embed": 32, "vocab": 256, "seq": 16,
         "batch": 4, "dtype": "bf16"},
    ],
    "tensorflow": [
        {"model": "mlp", "mode": "infer", "layers": 3, "width": 96, "batch": 8, "dtype": "bf16"},
        {"model": "cnn", "mode": "train", "layers": 2, "width": 16, "batch": 8, "dtype": "f32"},
    ],
}  # fmt: skip

_CONFIGS: dict[str, Callable[[], Iterator[dict[str, Any]]]] = {
    "gpt2": _gpt2,
    "bert": _bert,
    "resnet": _resnet,
    "t5": _t5,
    "recurrent": _recurrent,
    "control_flow": _control_flow,
    "moe": _moe,
    "vit": _vit,
    "mlp_mixer": _mlp_mixer,
    "gnn": _gnn,
    "tensorflow": _tensorflow,
    "tf_mobilenet_bn": _tf_mobilenet_bn,
    "flax_resnet": _flax_resnet,
    "flax_efficientnet": _flax_efficientnet,
    "flax_densenet": _flax_densenet,
    "flax_lm": _flax_lm,
    "nnx_convnext": _nnx_convnext,
    "nnx_transformer": _nnx_transformer,
    "haiku_resnet": _haiku_resnet,
    "haiku_mobilenet": _haiku_mobilenet,
    "haiku_vqvae": _haiku_vqvae,
    "eqx_transformer": _eqx_transformer,
    "eqx_unet": _eqx_unet,
    "eqx_resnext": _eqx_resnext,
}


def _format(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(v) for v in value)
    return str(value)


def graph_name(family: str, config: dict[str, Any]) -> str:
    """Readable unique name: family, identifying config values, dtype (e.g. `gpt2-l2-d128-h4-s64-b2-f32`)."""
    parts = [family] + [f"{prefix}{_format(config[key])}" for key, prefix in _FAMILIES[family][1]]
    return "-".join(parts + [config["dtype"]])


# Graphs staged one by one, as `STAGED_FAMILIES` are (general@v3.0 shipped with `_TRAINING`'s).
STAGED_GRAPHS: frozenset[str] = frozenset()


def is_staged(family: str, name: str) -> bool:
    """Whether the plugin's default run leaves the graph out (`STAGED_FAMILIES`, `STAGED_GRAPHS`)."""
    return family in STAGED_FAMILIES or name in STAGED_GRAPHS


def split_of(family: str, name: str) -> str:
    """The split a graph belongs to; see the module docstring for the rule."""
    if family in UNSEEN_FAMILIES:
        return "unseen"
    bucket = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") / 2**64
    if bucket < _TEST_FRACTION:
        return "test"
    if family not in _VALIDATION and bucket < _TEST_FRACTION + _VALIDATION_FRACTION:
        return "val"
    return "train"


# The config keys that make a graph another program; with the dtype, a program kind (`agents.imitation`).
PROGRAM_KEYS: tuple[str, ...] = ("program", "model", "cell", "mode")


def training_gaps(specs: list[GraphSpec]) -> list[str]:
    """Programs (family and `PROGRAM_KEYS`) that `val` or `test` hold in a dtype `train` lacks."""
    held: dict[tuple[str, ...], set[str]] = {}
    trained: dict[tuple[str, ...], set[str]] = {}
    for spec in specs:
        program = (spec.family, *(str(spec.config[key]) for key in PROGRAM_KEYS if key in spec.config))
        if spec.split in ("val", "test"):
            held.setdefault(program, set()).add(spec.config["dtype"])
        elif spec.split == "train":
            trained.setdefault(program, set()).add(spec.config["dtype"])
    return [
        f"{'-'.join(program)} in {dtype}"
        for program, dtypes in sorted(held.items())
        for dtype in sorted(dtypes - trained.get(program, set()))
    ]


def suite() -> list[GraphSpec]:
    """Every graph of the suite, in a fixed order (family order, then config order, then `val` configs,
    then `_TRAINING`'s)."""
    specs = []
    for family, configs in _CONFIGS.items():
        for config in configs():
            name = graph_name(family, config)
            specs.append(GraphSpec(name=name, family=family, split=split_of(family, name), config=config))
        for config in _VALIDATION.get(family, []):
            name = graph_name(family, config)
            specs.append(GraphSpec(name=name, family=family, split="val", config=config))
        for config in _TRAINING.get(family, []):
            name = graph_name(family, config)
            specs.append(GraphSpec(name=name, family=family, split="train", config=config))
    names = [spec.name for spec in specs]
    if len(set(names)) != len(names):  # a validation config that is also one of the grid's
        raise ValueError(f"suite graph names repeat: {sorted({n for n in names if names.count(n) > 1})}")
    return specs
