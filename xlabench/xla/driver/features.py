"""Module features: op count, opcode histogram over a fixed vocabulary, XLA's cost analysis.

Op count, precisely: the number of HLO instructions in every computation reachable from the ENTRY
computation -- the entry itself and every computation it calls, directly or not (while bodies and
conditions, conditional branches, `call` targets, and the reducer/comparator/scatter regions of
reduce, sort, scatter, map, select-and-scatter, ...) -- each computation counted once however often
it is called. Every opcode counts (constants, tuples, get-tuple-element included) except
`parameter`. Computations no longer reachable (left behind by a pass until DCE runs) do not count.
The histogram counts the same instructions, parameters included, by opcode; the element-type
histogram counts them by the element type of their result (a tuple-shaped result is "tuple").
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

# The vocabulary is fixed here, not read from the installed jaxlib, so feature vectors keep their
# meaning across compiler versions; opcodes outside it land in "other".
OPCODES: tuple[str, ...] = (
    "abs", "acos", "acosh", "add", "add-dependency", "after-all", "all-gather", "all-gather-done",
    "all-gather-start", "all-reduce", "all-reduce-done", "all-reduce-start", "all-to-all", "and", "asin",
    "asinh", "async-done", "async-start", "async-update", "atan2", "atanh", "batch-norm-grad",
    "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert", "broadcast", "call",
    "cbrt", "ceil", "cholesky", "clamp", "clz", "collective-broadcast", "collective-permute",
    "collective-permute-done", "collective-permute-start", "compare", "complex", "concatenate",
    "conditional", "constant", "convert", "convolution", "copy", "copy-done", "copy-start", "cos", "cosh",
    "custom-call", "divide", "domain", "dot", "dynamic-reshape", "dynamic-slice", "dynamic-update-slice",
    "erf", "exp", "expm1", "fft", "floor", "fusion", "gather", "get-dimension-size", "get-tuple-element",
    "imag", "infeed", "iota", "is-finite", "log", "log1p", "logistic", "map", "maximum", "minimum", "mulhi",
    "multiply", "negate", "not", "optimization-barrier", "or", "outfeed", "pad", "parameter",
    "partition-id", "population-count", "power", "ragged-all-to-all", "ragged-dot", "real", "recv",
    "recv-done", "reduce", "reduce-precision", "reduce-scatter", "reduce-window", "remainder",
    "replica-id", "reshape", "reverse", "rng", "rng-bit-generator", "rng-get-and-update-state",
    "round-nearest-afz", "round-nearest-even", "rsqrt", "scaled-dot", "scan", "scatter", "select",
    "select-and-scatter", "send", "send-done", "set-dimension-size", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sin", "sinh", "slice", "sort", "sqrt",
    "stochastic-convert", "subtract", "tan", "tanh", "top-k", "transpose", "triangular-solve", "tuple",
    "while", "xor",
)  # fmt: skip
OTHER = "other"
# Result element types an observation distinguishes (bf16 graphs want float normalization, s32/pred
# carry loop and index arithmetic); the rest land in "other".
ELEMENT_TYPES: tuple[str, ...] = (
    "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16", "bf16", "f32", "f64", "c64",
    "c128", "token", "tuple",
)  # fmt: skip


@dataclass(frozen=True)
class Cost:
    """XLA's HloCostAnalysis totals for the module."""

    flops: float
    transcendentals: float
    bytes_accessed: float


@dataclass(frozen=True)
class Features:
    """What xlabench measures of one module."""

    op_count: int
    histogram: dict[str, int] = field(hash=False)
    computations: int
    cost: Cost
    element_types: dict[str, int] = field(hash=False, default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> Features:
        """Build from the worker's plain-data answer."""
        return cls(
            op_count=int(data["op_count"]),
            histogram={str(k): int(v) for k, v in data["histogram"].items()},
            computations=int(data["computations"]),
            cost=Cost(**data["cost"]),
            element_types={str(k): int(v) for k, v in data["element_types"].items()},
        )

    def to_dict(self) -> dict:
        """Plain data for JSON."""
        return {
            "op_count": self.op_count,
            "histogram": dict(self.histogram),
            "computations": self.computations,
            "cost": {
                "flops": self.cost.flops,
                "transcendentals": self.cost.transcendentals,
                "bytes_accessed": self.cost.bytes_accessed,
            },
            "element_types": dict(self.element_types),
        }

    def histogram_vector(self) -> np.ndarray:
        """Counts per opcode in OPCODES order, then "other": a fixed-length observation."""
        return _vector(self.histogram, OPCODES)

    def element_type_vector(self) -> np.ndarray:
        """Counts per result element type in ELEMENT_TYPES order, then "other"."""
        return _vector(self.element_types, ELEMENT_TYPES)


def _vector(counts: dict[str, int], vocabulary: tuple[str, ...]) -> np.ndarray:
    vector = np.zeros(len(vocabulary) + 1, dtype=np.float32)
    index = {name: i for i, name in enumerate(vocabulary)}
    for name, count in counts.items():
        vector[index.get(name, len(vocabulary))] += count
    return vector
