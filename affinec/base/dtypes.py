"""numpy's view of the IR's scalar types, for every level that needs one: the
interpreter (the type of each value), the lowering (element sizes) and the runtime (the
arrays a kernel takes)."""

from __future__ import annotations

from typing import Any

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

from affinec.base.element_types import UnsupportedType, storage_type

BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
"""bf16, which numpy lacks: `ml_dtypes`'. From float32 it rounds like the GPU's
`cvt.rn.bf16.f32`; from float64 it rounds twice (`round_to_bfloat16` rounds once)."""


def round_to_bfloat16(value: object) -> Any:
    """`value` (a float or an array of them, any width) rounded once to bf16, to
    nearest even, as the GPU's `cvt.rn.bf16.f64` (or LLVM's round-to-odd lowering of
    it on sm_80) rounds.

    `ml_dtypes` converts a float64 through float32 and so rounds twice: 1 + 2**-8 +
    2**-30 becomes 1 + 2**-8 in float32, a tie, and then 1 in bf16, where rounding
    once gives 1 + 2**-7. Here the float64 is first rounded to float32 *to odd* (an
    inexact result gets an odd last bit, so it never lands on a tie it was not at),
    then to bf16: float32 keeps more than 8 + 2 bits, so the second rounding is the
    correct single one (Boldo and Melquiond). Values that are float32 already (and
    bf16 and f16 ones) convert exactly to float64 and take the plain path.
    """
    wide = np.asarray(value, np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        narrow = wide.astype(np.float32)
        inexact = np.isfinite(wide) & (narrow.astype(np.float64) != wide)
    nudge = inexact & ((narrow.view(np.uint32) & 1) == 0)
    if np.any(nudge):
        toward = np.where(wide > narrow, np.float32(np.inf), np.float32(-np.inf))
        narrow = np.where(nudge, np.nextafter(narrow, toward), narrow)
    rounded = narrow.astype(BFLOAT16)
    return rounded[()] if rounded.ndim == 0 else rounded


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


def storage_numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of arrays stored as `name`: bf16 is `ml_dtypes.bfloat16`."""
    return numpy_dtype(storage_type(name))


def is_floating(dtype: np.dtype) -> bool:
    """Whether `dtype` holds floating-point values (bf16 included)."""
    return dtype.kind == "f" or dtype == BFLOAT16
