"""The linalg dialect: xDSL's, with MLIR's named convolutions and products as affinec
reads them from MLIR's front ends (torch-mlir, IREE, StableHLO through MLIR).

    linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>,
                              strides = dense<2> : tensor<2xi64>}
        ins(%x, %w : memref<1x9x9x16xf16>, memref<3x3x16x32xf16>)
        outs(%y : memref<1x4x4x32xf16>)
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>)
        outs(%c : memref<8x4xf32>)

The named ops here (`conv_2d_nhwc_hwcf`, `conv_2d_nchw_fchw`,
`depthwise_conv_2d_nhwc_hwc`, `depthwise_conv_2d_nchw_chw`, `conv_2d_ngchw_gfchw`,
`matmul`, `batch_matmul`)
replace xDSL's
same-named ones, which build a body of the output's type (and so refuse f16 inputs
with an f32 output, which MLIR takes). They are read and written in both of MLIR's
forms, on memrefs: the tensor form is MLIR's bufferization's to turn into this one
first.
Their meaning is MLIR's (each output element the sum over the window or the
shared dimension of the inputs' products); `affinec-lower-linalg` turns them
into the naive IR the pipeline starts from. As MLIR's, each carries the body MLIR
builds for it (the inputs cast to the output's type, multiplied, added to the
output: `arith.extf`, `arith.mulf`, `arith.addf`, `linalg.yield`), shown in the
generic form only; the convolutions' `strides` and `dilations` and the products'
`indexing_maps` are properties, and a convolution memoizes its indexing maps in
`linalg.memoized_indexing_maps` as MLIR's does, so either form reads and prints as
MLIR's. A body other than that one (MLIR's named ops mean their body) or indexing
maps other than the default (a transposed product) are refused by the verifier.

The ops' common part (the custom form, the body, windows and products) is
`affinec.dialects.linalg_structured`; its public names are also this module's.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects import linalg as xdsl_linalg
from xdsl.ir import Dialect
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.irdl import irdl_op_definition
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.linalg_structured import (
    MEMOIZED_MAPS,
    NamedStructuredOp,
    ProductOp,
    WindowedOp,
    body_block,
)


@irdl_op_definition
class Conv2DNhwcHwcfOp(WindowedOp):
    """`out[n, oh, ow, f] += in[n, oh*sh + r*dh, ow*sw + s*dw, c] * w[r, s, c, f]`."""

    name = "linalg.conv_2d_nhwc_hwcf"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 4, 4)

    def output_shape(self) -> tuple[int, ...]:
        (n, h, w, c), (r, s, c2, f) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        return (n, *self.output_window(h, w, r, s), f)

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, oh, ow, f, r, s, c)
        d = [AffineExpr.dimension(k) for k in range(7)]
        return (
            AffineMap(7, 0, (d[0], *self.window_exprs(1, 4), d[6])),
            AffineMap(7, 0, (d[4], d[5], d[6], d[3])),
            AffineMap(7, 0, (d[0], d[1], d[2], d[3])),
        )


@irdl_op_definition
class Conv2DNhwcFhwcOp(WindowedOp):
    """`out[n, oh, ow, f] += in[n, oh*sh + r*dh, ow*sw + s*dw, c] * w[f, r, s, c]`
    (what TOSA's `conv2d` becomes)."""

    name = "linalg.conv_2d_nhwc_fhwc"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 4, 4)

    def output_shape(self) -> tuple[int, ...]:
        (n, h, w, c), (f, r, s, c2) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        return (n, *self.output_window(h, w, r, s), f)

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, oh, ow, f, r, s, c)
        d = [AffineExpr.dimension(k) for k in range(7)]
        return (
            AffineMap(7, 0, (d[0], *self.window_exprs(1, 4), d[6])),
            AffineMap(7, 0, (d[3], d[4], d[5], d[6])),
            AffineMap(7, 0, (d[0], d[1], d[2], d[3])),
        )


@irdl_op_definition
class Conv2DNchwFchwOp(WindowedOp):
    """`out[n, f, oh, ow] += in[n, c, oh*sh + r*dh, ow*sw + s*dw] * w[f, c, r, s]`."""

    name = "linalg.conv_2d_nchw_fchw"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 4, 4)

    def output_shape(self) -> tuple[int, ...]:
        (n, c, h, w), (f, c2, r, s) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        return (n, f, *self.output_window(h, w, r, s))

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, f, oh, ow, c, r, s)
        d = [AffineExpr.dimension(k) for k in range(7)]
        return (
            AffineMap(7, 0, (d[0], d[4], *self.window_exprs(2, 5))),
            AffineMap(7, 0, (d[1], d[4], d[5], d[6])),
            AffineMap(7, 0, (d[0], d[1], d[2], d[3])),
        )


@irdl_op_definition
class DepthwiseConv2DNhwcHwcOp(WindowedOp):
    """`out[n, oh, ow, c] += in[n, oh*sh + r*dh, ow*sw + s*dw, c] * w[r, s, c]`."""

    name = "linalg.depthwise_conv_2d_nhwc_hwc"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 3, 4)

    def output_shape(self) -> tuple[int, ...]:
        (n, h, w, c), (r, s, c2) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        return (n, *self.output_window(h, w, r, s), c)

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, oh, ow, c, r, s)
        d = [AffineExpr.dimension(k) for k in range(6)]
        return (
            AffineMap(6, 0, (d[0], *self.window_exprs(1, 4), d[3])),
            AffineMap(6, 0, (d[4], d[5], d[3])),
            AffineMap(6, 0, (d[0], d[1], d[2], d[3])),
        )


@irdl_op_definition
class DepthwiseConv2DNchwChwOp(WindowedOp):
    """`out[n, c, oh, ow] += in[n, c, oh*sh + r*dh, ow*sw + s*dw] * w[c, r, s]`."""

    name = "linalg.depthwise_conv_2d_nchw_chw"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 3, 4)

    def output_shape(self) -> tuple[int, ...]:
        (n, c, h, w), (c2, r, s) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        return (n, c, *self.output_window(h, w, r, s))

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, oh, ow, c, r, s)
        d = [AffineExpr.dimension(k) for k in range(6)]
        return (
            AffineMap(6, 0, (d[0], d[3], *self.window_exprs(1, 4))),
            AffineMap(6, 0, (d[3], d[4], d[5])),
            AffineMap(6, 0, (d[0], d[3], d[1], d[2])),
        )


@irdl_op_definition
class Conv2DNgchwGfchwOp(WindowedOp):
    """`out[n, g, f, oh, ow] += in[n, g, c, oh*sh + r*dh, ow*sw + s*dw] *
    w[g, f, c, r, s]`: a grouped convolution, as torch-mlir writes one."""

    name = "linalg.conv_2d_ngchw_gfchw"
    RANKS: ClassVar[tuple[int, int, int]] = (5, 5, 5)

    def output_shape(self) -> tuple[int, ...]:
        (n, g, c, h, w), (g2, f, c2, r, s) = (t.get_shape() for t in self.types()[:2])
        if c != c2 or g != g2:
            raise VerifyException(
                f"input has {g} groups of {c} channels, the filter {g2} of {c2}"
            )
        return (n, g, f, *self.output_window(h, w, r, s))

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        # (n, g, f, oh, ow, c, r, s)
        d = [AffineExpr.dimension(k) for k in range(8)]
        return (
            AffineMap(8, 0, (d[0], d[1], d[5], *self.window_exprs(3, 6))),
            AffineMap(8, 0, (d[1], d[2], d[5], d[6], d[7])),
            AffineMap(8, 0, (d[0], d[1], d[2], d[3], d[4])),
        )


@irdl_op_definition
class MatmulOp(ProductOp):
    """`C[m, n] += A[m, k] * B[k, n]`."""

    name = "linalg.matmul"
    RANKS: ClassVar[tuple[int, int, int]] = (2, 2, 2)

    def output_shape(self) -> tuple[int, ...]:
        (m, k), (k2, n) = (t.get_shape() for t in self.types()[:2])
        if k != k2:
            raise VerifyException(f"A has {k} columns, B {k2} rows")
        return (m, n)

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        d0, d1, d2 = (AffineExpr.dimension(k) for k in range(3))
        return (
            AffineMap(3, 0, (d0, d2)),
            AffineMap(3, 0, (d2, d1)),
            AffineMap(3, 0, (d0, d1)),
        )


@irdl_op_definition
class BatchMatmulOp(ProductOp):
    """`C[b, m, n] += A[b, m, k] * B[b, k, n]`."""

    name = "linalg.batch_matmul"
    RANKS: ClassVar[tuple[int, int, int]] = (3, 3, 3)

    def output_shape(self) -> tuple[int, ...]:
        (b, m, k), (b2, k2, n) = (t.get_shape() for t in self.types()[:2])
        if k != k2 or b != b2:
            raise VerifyException(f"A is {b}x{m}x{k}, B {b2}x{k2}x{n}")
        return (b, m, n)

    def default_maps(self) -> tuple[AffineMap, AffineMap, AffineMap]:
        d0, d1, d2, d3 = (AffineExpr.dimension(k) for k in range(4))
        return (
            AffineMap(4, 0, (d0, d1, d3)),
            AffineMap(4, 0, (d0, d3, d2)),
            AffineMap(4, 0, (d0, d1, d2)),
        )


NAMED_OPS = (
    Conv2DNhwcHwcfOp,
    Conv2DNhwcFhwcOp,
    Conv2DNchwFchwOp,
    DepthwiseConv2DNhwcHwcOp,
    DepthwiseConv2DNchwChwOp,
    Conv2DNgchwGfchwOp,
    MatmulOp,
    BatchMatmulOp,
)

Linalg = Dialect(
    "linalg",
    [
        *(
            o
            for o in xdsl_linalg.Linalg.operations
            if o.name not in {n.name for n in NAMED_OPS}
        ),
        *NAMED_OPS,
    ],
    [*xdsl_linalg.Linalg.attributes],
)

__all__ = [
    "MEMOIZED_MAPS",
    "NAMED_OPS",
    "BatchMatmulOp",
    "Conv2DNchwFchwOp",
    "Conv2DNgchwGfchwOp",
    "Conv2DNhwcFhwcOp",
    "Conv2DNhwcHwcfOp",
    "DepthwiseConv2DNchwChwOp",
    "DepthwiseConv2DNhwcHwcOp",
    "Linalg",
    "MatmulOp",
    "NamedStructuredOp",
    "ProductOp",
    "WindowedOp",
    "body_block",
]
