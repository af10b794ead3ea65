"""numpy's view of the IR's scalar types, for every level that needs one: the
interpreter (the type of each value), the lowering (element sizes) and the runtime (the
arrays a kernel takes)."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np
from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    FixedBitwidthType,
    Float16Type,
    Float32Type,
    Float64Type,
    IndexType,
    IntegerType,
    MemRefType,
    bf16,
    f16,
    f32,
)
from xdsl.ir import Attribute

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


STORAGE_TYPES: dict[str, AnyFloat] = {"f32": f32, "f16": f16, "bf16": bf16}
"""The IR type of each storage dtype a spec names (`affinec.base.spec.DTYPES`)."""


def storage_type(name: str) -> AnyFloat:
    """The IR element type of the storage dtype `name` ("f32", "f16" or "bf16")."""
    try:
        return STORAGE_TYPES[name]
    except KeyError:
        raise ValueError(
            f"unknown storage dtype {name!r} (expected one of "
            f"{', '.join(STORAGE_TYPES)})"
        ) from None


def storage_numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of arrays stored as `name`: bf16 is `ml_dtypes.bfloat16`."""
    return numpy_dtype(storage_type(name))


def element_size(t: Attribute) -> int:
    """Bytes of one element of scalar type `t` in memory: its width rounded up to
    bytes (an `i1` takes one; `index` is 64-bit), numpy type or not."""
    if isinstance(t, IndexType):
        return 8
    if isinstance(t, FixedBitwidthType):
        return max(1, -(-t.bitwidth // 8))
    raise UnsupportedType(t)


def memref_bytes(t: Attribute) -> int:
    """Bytes of a statically shaped memref of type `t`, laid out densely."""
    if not isinstance(t, MemRefType):
        raise UnsupportedType(t)
    return math.prod(t.get_shape()) * element_size(t.get_element_type())


def is_floating(dtype: np.dtype) -> bool:
    """Whether `dtype` holds floating-point values (bf16 included)."""
    return dtype.kind == "f" or dtype == BFLOAT16
