"""What the nvgpu dialect's modules share: the memory space of shared memory, the
checks of memref operands, and the token type of asynchronous copies."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import (
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
            f"expected {t.get_num_dims()} {what} indices for {t}, got {len(indices)}"
        )


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
