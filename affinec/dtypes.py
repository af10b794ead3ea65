"""numpy's view of the IR's scalar types, for every level that needs one: the
interpreter (the type of each value), the lowering (element sizes) and the runtime (the
arrays a kernel takes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    FixedBitwidthType,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)
from xdsl.ir import Attribute

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""bf16, which numpy lacks: `ml_dtypes`' (it rounds like the GPU's)."""


class UnsupportedType(TypeError):
    """A scalar type affinec has no numpy type for (`tf32`, `f80`, `i3`...):
    the one "not supported" error for types, which callers locate at their op."""

    def __init__(self, t: Attribute) -> None:
        super().__init__(f"{t} is not supported (affinec has no numpy type for it)")
        self.type = t


def numpy_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype that holds values of the scalar type `t` (index as int64);
    `UnsupportedType` for any other type."""
    match t:
        case Float16Type():
            return np.dtype(np.float16)
        case BFloat16Type():
            return BFLOAT16
        case Float32Type():
            return np.dtype(np.float32)
        case Float64Type():
            return np.dtype(np.float64)
        case IndexType():
            return np.dtype(np.int64)
        case IntegerType(width=w) if w.data == 1:
            return np.dtype(np.bool_)
        case IntegerType(width=w) if w.data in (8, 16, 32, 64):
            return np.dtype(f"int{w.data}")
    raise UnsupportedType(t)


def element_size(t: Attribute) -> int:
    """Bytes of one element of scalar type `t` in memory: its width rounded up to
    bytes (an `i1` takes one; `index` is 64-bit), numpy type or not."""
    if isinstance(t, IndexType):
        return 8
    if isinstance(t, FixedBitwidthType):
        return max(1, -(-t.bitwidth // 8))
    raise UnsupportedType(t)


def is_floating(dtype: np.dtype) -> bool:
    """Whether `dtype` holds floating-point values (bf16 included)."""
    return dtype.kind == "f" or dtype == BFLOAT16
