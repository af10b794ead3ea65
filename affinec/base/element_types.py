"""The IR's scalar types as the passes see them: their sizes in memory and the
storage dtypes a spec names. numpy's view of the same types lives in
`affinec.base.dtypes`; this module stays free of numpy, so that reading and
rewriting IR does not import it."""

from __future__ import annotations

import math

from xdsl.dialects.builtin import (
    AnyFloat,
    BFloat16Type,
    FixedBitwidthType,
    IndexType,
    IntegerType,
    MemRefType,
    VectorType,
    bf16,
    f16,
    f32,
)
from xdsl.ir import Attribute


class UnsupportedType(TypeError):
    """A scalar type affinec has no numpy type for (`tf32`, `f80`, `i3`...):
    the one "not supported" error for types, which callers locate at their op."""

    def __init__(self, t: Attribute) -> None:
        super().__init__(f"{t} is not supported (affinec has no numpy type for it)")
        self.type = t


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


def storage_bytes(name: str) -> int:
    """Bytes of one element of the storage dtype `name` ("f32", "f16" or "bf16")."""
    return element_size(storage_type(name))


def intrinsic_suffix(t: Attribute) -> str:
    """LLVM's name of a scalar or 1-D vector type in an overloaded intrinsic's name
    (`f32` in `llvm.fma.f32`, `v2f16` in `llvm.maximum.v2f16`, `i8` in
    `llvm.smax.i8`)."""
    if isinstance(t, VectorType):
        return f"v{t.get_shape()[0]}{intrinsic_suffix(t.get_element_type())}"
    if isinstance(t, BFloat16Type):
        return "bf16"
    if isinstance(t, IntegerType):
        return f"i{t.width.data}"
    assert isinstance(t, AnyFloat), t
    return f"f{t.bitwidth}"
