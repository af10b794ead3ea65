"""numpy's view of the IR's scalar types, for every level that needs one: the
interpreter (the type of each value), the lowering (element sizes) and the runtime (the
arrays a kernel takes)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
)
from xdsl.ir import Attribute

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""bf16, which numpy lacks: `ml_dtypes`' (it rounds like the GPU's)."""


def numpy_dtype(t: Attribute) -> np.dtype:
    """The numpy dtype that holds values of the scalar type `t` (index as int64)."""
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
    raise TypeError(f"no numpy type for {t}")


def element_size(t: Attribute) -> int:
    """Bytes of one element of scalar type `t`."""
    return numpy_dtype(t).itemsize


def is_floating(dtype: np.dtype) -> bool:
    """Whether `dtype` holds floating-point values (bf16 included)."""
    return dtype.kind == "f" or dtype == BFLOAT16
