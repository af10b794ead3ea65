"""What the nvgpu dialect's modules share: the memory space of shared memory, the
checks of memref operands, and the token type of asynchronous copies."""

from __future__ import annotations

import re
from collections.abc import Sequence

from xdsl.dialects.builtin import (
    IntAttr,
    IntegerAttr,
    IntegerType,
    MemRefType,
    NoneAttr,
)
from xdsl.ir import (
    Attribute,
    ParametrizedAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.ir.affine import AffineMap
from xdsl.irdl import (
    irdl_attr_definition,
)
from xdsl.utils.exceptions import VerifyException

SHARED_MEMORY_SPACE = 3
"""The memory space of shared memory (as `gpu.WORKGROUP_ADDRESS_SPACE`)."""


def memory_space_of(t: MemRefType) -> int:
    space = t.memory_space
    return space.value.data if isinstance(space, IntegerAttr) else 0


def check_row_major(what: str, t: MemRefType) -> None:
    if not isinstance(t.layout, NoneAttr):
        raise VerifyException(f"{what} must be row-major (identity layout), got {t}")
    if any(d < 0 for d in t.get_shape()[1:]):
        # the outermost size (a dynamic batch) is the only one no stride depends on
        raise VerifyException(
            f"{what} may have a dynamic size only in its outermost dimension, got {t}"
        )


def check_indices(what: str, t: MemRefType, indices: Sequence[SSAValue]) -> None:
    if len(indices) != t.get_num_dims():
        raise VerifyException(
            f"expected {t.get_num_dims()} {what} indices, got {len(indices)}"
        )


NOT_SHARED = (
    "must have a memory space attribute of IntegerAttr(3) or "
    "gpu::AddressSpaceAttr(Workgroup)"
)
"""MLIR's words for a memref that should be in shared memory and is not."""


def last_dim_unit_stride(t: MemRefType) -> bool:
    """Whether the innermost dimension of `t` is contiguous (stride 1), as MLIR's
    `isLastDimUnitStride` says: with an identity layout, a strided layout whose last
    stride is 1, or a map that moves by 1 when the last index does."""
    layout = t.layout
    if isinstance(layout, NoneAttr) or t.get_num_dims() == 0:
        return True
    strides = getattr(layout, "strides", None)
    if strides is not None:
        last = strides.data[-1]
        return isinstance(last, IntAttr) and last.data == 1
    affine_map = getattr(layout, "data", None)
    if not isinstance(affine_map, AffineMap) or len(affine_map.results) != 1:
        return False
    rank = t.get_num_dims()
    symbols = [0] * affine_map.num_symbols
    (base,) = affine_map.eval([0] * rank, symbols)
    (step,) = affine_map.eval([0] * (rank - 1) + [1], symbols)
    return step - base == 1


def mlir_type_text(t: Attribute) -> str:
    """`t` as MLIR prints it in a diagnostic: an integer memory space without its
    type (`memref<16xf32, 3>`, where xDSL prints `3 : i64`)."""
    return re.sub(r", (\d+) : i64>$", r", \1>", str(t))


def element_bitwidth(t: Attribute) -> int:
    width = getattr(t, "bitwidth", None)
    if isinstance(t, IntegerType):
        width = t.width.data
    if not isinstance(width, int):
        raise VerifyException(f"expected an integer or float element type, got {t}")
    return width


# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------


@irdl_attr_definition
class DeviceAsyncTokenType(ParametrizedAttribute, TypeAttribute):
    """`!nvgpu.device.async.token`: a pending asynchronous copy, or a group of them."""

    name = "nvgpu.device.async.token"
