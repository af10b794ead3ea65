"""TMA descriptors (CUtensorMap) for a launch: the rules a tiled tensor map must
meet, checked on the host with an error that says which, and the encoding of one by
the CUDA driver.

    spec = TiledTensorMap.of(map_type, array)      # checks shape, strides, box, swizzle
    descriptor = spec.encode(device_address)       # the driver's 128-byte CUtensorMap

The rules are the driver's (`cuTensorMapEncodeTiled`): 1 to 5 dimensions, the
innermost contiguous, the others' strides multiples of 16 bytes below 2^40, the
global address 16-byte aligned, box sizes from 1 to 256 with an innermost extent of
a multiple of 16 bytes, and with a swizzle an innermost box extent of at most its
span. A box with element strides (traversal strides from 1 to 8, the innermost 1)
takes every s-th element along a dimension of stride s: `box` counts the elements
that land, the driver's box spans s times as many (at most 256). The interpreter's `nvgpu.tma.create.descriptor` checks the same rules (this
module), so what it accepts the driver will.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from affinec.base.dtypes import BFLOAT16

MAX_BOX = 256
MAX_STRIDE = 1 << 40
MAX_ELEMENT_STRIDE = 8


class TensorMapError(ValueError):
    """A tensor map the driver would refuse, and why."""


_DATA_TYPES = {
    np.dtype(np.float16): "CU_TENSOR_MAP_DATA_TYPE_FLOAT16",
    np.dtype(np.float32): "CU_TENSOR_MAP_DATA_TYPE_FLOAT32",
    np.dtype(BFLOAT16): "CU_TENSOR_MAP_DATA_TYPE_BFLOAT16",
}
_SWIZZLES = {
    0: "CU_TENSOR_MAP_SWIZZLE_NONE",
    32: "CU_TENSOR_MAP_SWIZZLE_32B",
    64: "CU_TENSOR_MAP_SWIZZLE_64B",
    128: "CU_TENSOR_MAP_SWIZZLE_128B",
}


@dataclass(frozen=True)
class TiledTensorMap:
    """What a tiled TMA descriptor says: the global tensor (shape and byte strides,
    outermost first), the box, the swizzle span in bytes, the out-of-bounds fill."""

    dtype: np.dtype
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    box: tuple[int, ...]
    swizzle: int = 0
    nan_fill: bool = False
    element_strides: tuple[int, ...] = ()
    """The traversal stride along each dimension, outermost first (empty: all 1)."""

    @property
    def traversal(self) -> tuple[int, ...]:
        return self.element_strides or (1,) * len(self.box)

    @staticmethod
    def of(
        dtype: np.dtype,
        shape: tuple[int, ...],
        strides: tuple[int, ...],
        box: tuple[int, ...],
        swizzle: int = 0,
        nan_fill: bool = False,
        element_strides: tuple[int, ...] = (),
    ) -> TiledTensorMap:
        spec = TiledTensorMap(
            np.dtype(dtype),
            tuple(shape),
            tuple(strides),
            tuple(box),
            swizzle,
            nan_fill,
            tuple(element_strides) if any(k != 1 for k in element_strides) else (),
        )
        spec.check()
        return spec

    def check(self) -> None:
        """A `TensorMapError` naming the first rule broken."""
        rank, e = len(self.shape), self.dtype.itemsize
        if self.dtype not in _DATA_TYPES:
            raise TensorMapError(f"TMA copies f16, bf16 or f32 here, not {self.dtype}")
        if not 1 <= rank <= 5 or len(self.box) != rank or len(self.strides) != rank:
            raise TensorMapError(
                f"a tensor of {rank} dimensions with a box of {len(self.box)}: both "
                "1 to 5, the same"
            )
        if any(d < 1 or d >= 1 << 32 for d in self.shape):
            raise TensorMapError(f"dimensions from 1 to 2^32 - 1, got {self.shape}")
        if self.strides[-1] != e:
            raise TensorMapError(
                f"the innermost dimension must be contiguous (a stride of {e} bytes), "
                f"got {self.strides[-1]}"
            )
        for d, stride in enumerate(self.strides[:-1]):
            if stride % 16 or not 0 < stride < MAX_STRIDE:
                raise TensorMapError(
                    f"dimension {d} is {stride} bytes apart: TMA needs a positive "
                    "multiple of 16 below 2^40 (pad the rows)"
                )
        if len(self.traversal) != rank or not all(
            1 <= k <= MAX_ELEMENT_STRIDE for k in self.traversal
        ):
            raise TensorMapError(
                f"element strides from 1 to {MAX_ELEMENT_STRIDE}, one a dimension, "
                f"got {self.traversal}"
            )
        if self.traversal[-1] != 1:
            raise TensorMapError(
                "the innermost dimension's element stride must be 1 (no interleave), "
                f"got {self.traversal[-1]}"
            )
        if any(not 1 <= b <= MAX_BOX for b in self.box_dims):
            raise TensorMapError(
                f"box sizes from 1 to {MAX_BOX}, got {self.box_dims}"
                + (f" (a box of {self.box} at strides {self.traversal})"
                   if self.element_strides else "")
            )  # fmt: skip
        inner = self.box[-1] * e
        if inner % 16:
            raise TensorMapError(
                f"the box's innermost extent is {inner} bytes, not a multiple of 16"
            )
        if self.swizzle not in _SWIZZLES:
            raise TensorMapError(
                f"a swizzle of 0, 32, 64 or 128 bytes, not {self.swizzle}"
            )
        if self.swizzle and inner > self.swizzle:
            raise TensorMapError(
                f"the box's innermost extent of {inner} bytes is more than its "
                f"{self.swizzle}-byte swizzle"
            )
        if self.nan_fill and self.dtype.kind != "f":
            raise TensorMapError("a NaN fill needs a floating-point tensor")

    @property
    def box_dims(self) -> tuple[int, ...]:
        """The driver's boxDim, outermost first: the span the box traverses, s
        elements for each that lands along a dimension of element stride s."""
        return tuple(b * k for b, k in zip(self.box, self.traversal, strict=True))

    def encode(self, address: int) -> Any:
        """The driver's CUtensorMap for the tensor at device `address` (needs CUDA's
        driver, through cuda.bindings)."""
        if address % 16:
            raise TensorMapError(
                f"the tensor's address {address:#x} is not 16-byte aligned"
            )
        from cuda.bindings import driver

        rank = len(self.shape)
        result, descriptor = driver.cuTensorMapEncodeTiled(
            getattr(driver.CUtensorMapDataType, _DATA_TYPES[self.dtype]),
            rank,
            address,
            [driver.cuuint64_t(d) for d in reversed(self.shape)],
            [driver.cuuint64_t(s) for s in reversed(self.strides[:-1])],
            [driver.cuuint32_t(b) for b in reversed(self.box_dims)],
            [driver.cuuint32_t(k) for k in reversed(self.traversal)],
            driver.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
            getattr(driver.CUtensorMapSwizzle, _SWIZZLES[self.swizzle]),
            driver.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA
            if self.nan_fill
            else driver.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        )
        if result != driver.CUresult.CUDA_SUCCESS:
            raise TensorMapError(f"the driver refused the tensor map: {result}")
        return descriptor


def tensor_map_of(map_type: Any, shape, strides, dtype) -> TiledTensorMap:
    """The tensor map of a `!nvgpu.tensormap.descriptor` type over a tensor of
    `shape`, byte `strides` and `dtype`, checked."""
    return TiledTensorMap.of(
        dtype,
        tuple(shape),
        tuple(strides),
        tuple(map_type.tensor.get_shape()),
        map_type.swizzle_span,
        map_type.oob.data == "nan",
        map_type.element_strides,
    )


__all__ = ["TensorMapError", "TiledTensorMap", "tensor_map_of"]
