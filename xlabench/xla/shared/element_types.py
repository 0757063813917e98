"""XLA element types and their numpy dtypes: the one map between the two."""

from __future__ import annotations

import ml_dtypes
import numpy as np

# Element types xlabench can feed and read back as numpy arrays (bf16 through ml_dtypes).
XLA_TO_NUMPY = {
    "pred": "bool", "s8": "int8", "s16": "int16", "s32": "int32", "s64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "bf16": "bfloat16",
    "c64": "complex64", "c128": "complex128",
}  # fmt: skip
FLOAT_TYPES = frozenset({"f16", "bf16", "f32", "f64"})
INTEGER_TYPES = frozenset({"s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64"})


def numpy_dtype_name(element_type: str) -> str | None:
    """The numpy dtype name of an XLA element type (`bf16` -> `bfloat16`); None when there is none."""
    return XLA_TO_NUMPY.get(element_type)


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a numpy dtype name or an XLA element type; bfloat16 is ml_dtypes'."""
    name = XLA_TO_NUMPY.get(name, name)
    return np.dtype(ml_dtypes.bfloat16) if name == "bfloat16" else np.dtype(name)
