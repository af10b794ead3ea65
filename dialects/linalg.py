"""The linalg dialect: xDSL's, with MLIR's named convolutions and products as affinec
reads them from MLIR's front ends (torch-mlir, IREE, StableHLO through MLIR).

    linalg.conv_2d_nhwc_hwcf {dilations = dense<1> : tensor<2xi64>,
                              strides = dense<2> : tensor<2xi64>}
        ins(%x, %w : memref<1x9x9x16xf16>, memref<3x3x16x32xf16>)
        outs(%y : memref<1x4x4x32xf16>)
    linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x4xf32>)
        outs(%c : memref<8x4xf32>)

The named ops here (`conv_2d_nhwc_hwcf`, `conv_2d_nchw_fchw`,
`depthwise_conv_2d_nhwc_hwc`, `matmul`, `batch_matmul`) replace xDSL's
same-named ones, which build a body of the output's type (and so refuse f16 inputs
with an f32 output, which MLIR takes). They are written in MLIR's custom form, on
memrefs: the tensor form is MLIR's bufferization's to turn into this one first.
Their meaning is MLIR's (each output element the sum over the window or the
shared dimension of the inputs' products); `affinec-lower-linalg` turns them
into the naive IR the pipeline starts from. Unlike MLIR's, they keep no body
region: their generic form (`"linalg.matmul"(...) ({...})`) is not read or written.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects import linalg as xdsl_linalg
from xdsl.dialects.builtin import DenseIntOrFPElementsAttr, MemRefType
from xdsl.ir import Attribute, Dialect, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands


class NamedStructuredOp(IRDLOperation):
    """`linalg.NAME [{attrs}] ins(%a, %b : A, B) outs(%c : C)` on memrefs."""

    inputs = var_operand_def()
    outputs = var_operand_def()
    results_ = var_result_def()

    irdl_options = (AttrSizedOperandSegments(as_property=True),)
    traits = traits_def(
        AccessesOperands(reads=("inputs", "outputs"), writes=("outputs",))
    )

    RANKS: ClassVar[tuple[int, int, int]]
    """The ranks of the two inputs and the output."""
    WINDOWED: ClassVar[bool] = False
    """Whether the op takes `strides` and `dilations` (the convolutions)."""

    def __init__(
        self,
        inputs: Sequence[SSAValue],
        outputs: Sequence[SSAValue],
        attributes: dict[str, Attribute] | None = None,
    ):
        super().__init__(
            operands=[inputs, outputs], result_types=[[]], attributes=attributes
        )

    def window(self, name: str) -> tuple[int, int]:
        """`strides` or `dilations` (MLIR's default: 1, 1)."""
        attr = self.attributes.get(name)
        if attr is None:
            return (1, 1)
        if not isinstance(attr, DenseIntOrFPElementsAttr):
            raise VerifyException(f"'{name}' must be a dense array of two integers")
        values = [int(v) for v in attr.get_values()]
        if len(values) != 2 or min(values) < 1:
            raise VerifyException(f"'{name}' takes two positive integers, got {values}")
        return (values[0], values[1])

    def types(self) -> tuple[MemRefType, MemRefType, MemRefType]:
        a, b = (v.type for v in self.inputs)
        (c,) = (v.type for v in self.outputs)
        return a, b, c  # pyright: ignore[reportReturnType]

    def verify_(self) -> None:
        if self.results_:
            raise VerifyException(
                "the tensor form (with results) is not taken: bufferize to memrefs first"
            )
        if len(self.inputs) != 2 or len(self.outputs) != 1:
            raise VerifyException("takes two inputs and one output")
        for v in (*self.inputs, *self.outputs):
            if not isinstance(v.type, MemRefType):
                raise VerifyException(f"takes memrefs, got {v.type}")
            if any(d < 0 for d in v.type.get_shape()):
                raise VerifyException(f"takes static shapes, got {v.type}")
        ranks = tuple(t.get_num_dims() for t in self.types())
        if ranks != self.RANKS:
            raise VerifyException(f"takes operands of ranks {self.RANKS}, got {ranks}")
        if self.WINDOWED:
            self.window("strides")
            self.window("dilations")
        expected = self.output_shape()
        got = tuple(self.types()[2].get_shape())
        if got != expected:
            raise VerifyException(
                f"the output's shape is {got}, the inputs make it {expected}"
            )

    def output_shape(self) -> tuple[int, ...]:
        raise NotImplementedError

    @classmethod
    def parse(cls, parser: Parser) -> NamedStructuredOp:
        attributes = parser.parse_optional_attr_dict()

        def operands(keyword: str) -> list[SSAValue]:
            parser.parse_keyword(keyword)
            parser.parse_punctuation("(")
            names = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_unresolved_operand
            )
            parser.parse_punctuation(":")
            types = parser.parse_comma_separated_list(
                parser.Delimiter.NONE, parser.parse_type
            )
            parser.parse_punctuation(")")
            if len(names) != len(types):
                parser.raise_error(
                    f"{len(names)} {keyword} operands but {len(types)} types"
                )
            return [
                parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)
            ]

        inputs = operands("ins")
        outputs = operands("outs")
        if parser.parse_optional_punctuation("->") is not None:
            parser.raise_error(
                "the tensor form (with results) is not taken: bufferize to memrefs "
                "first"
            )
        return cls(inputs, outputs, attributes)

    def print(self, printer: Printer) -> None:
        if self.attributes:
            printer.print_string(" ")
            printer.print_attr_dict(self.attributes)
        for keyword, values in (("ins", self.inputs), ("outs", self.outputs)):
            printer.print_string(f" {keyword}(")
            printer.print_list(values, printer.print_operand)
            printer.print_string(" : ")
            printer.print_list([v.type for v in values], printer.print_attribute)
            printer.print_string(")")


def _windowed(extent: int, taps: int, stride: int, dilation: int) -> int:
    return (extent - (taps - 1) * dilation - 1) // stride + 1


@irdl_op_definition
class Conv2DNhwcHwcfOp(NamedStructuredOp):
    """`out[n, oh, ow, f] += in[n, oh*sh + r*dh, ow*sw + s*dw, c] * w[r, s, c, f]`."""

    name = "linalg.conv_2d_nhwc_hwcf"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 4, 4)
    WINDOWED: ClassVar[bool] = True

    def output_shape(self) -> tuple[int, ...]:
        (n, h, w, c), (r, s, c2, f) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        (sh, sw), (dh, dw) = self.window("strides"), self.window("dilations")
        return (n, _windowed(h, r, sh, dh), _windowed(w, s, sw, dw), f)


@irdl_op_definition
class Conv2DNchwFchwOp(NamedStructuredOp):
    """`out[n, f, oh, ow] += in[n, c, oh*sh + r*dh, ow*sw + s*dw] * w[f, c, r, s]`."""

    name = "linalg.conv_2d_nchw_fchw"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 4, 4)
    WINDOWED: ClassVar[bool] = True

    def output_shape(self) -> tuple[int, ...]:
        (n, c, h, w), (f, c2, r, s) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        (sh, sw), (dh, dw) = self.window("strides"), self.window("dilations")
        return (n, f, _windowed(h, r, sh, dh), _windowed(w, s, sw, dw))


@irdl_op_definition
class DepthwiseConv2DNhwcHwcOp(NamedStructuredOp):
    """`out[n, oh, ow, c] += in[n, oh*sh + r*dh, ow*sw + s*dw, c] * w[r, s, c]`."""

    name = "linalg.depthwise_conv_2d_nhwc_hwc"
    RANKS: ClassVar[tuple[int, int, int]] = (4, 3, 4)
    WINDOWED: ClassVar[bool] = True

    def output_shape(self) -> tuple[int, ...]:
        (n, h, w, c), (r, s, c2) = (t.get_shape() for t in self.types()[:2])
        if c != c2:
            raise VerifyException(f"input has {c} channels, the filter {c2}")
        (sh, sw), (dh, dw) = self.window("strides"), self.window("dilations")
        return (n, _windowed(h, r, sh, dh), _windowed(w, s, sw, dw), c)


@irdl_op_definition
class MatmulOp(NamedStructuredOp):
    """`C[m, n] += A[m, k] * B[k, n]`."""

    name = "linalg.matmul"
    RANKS: ClassVar[tuple[int, int, int]] = (2, 2, 2)

    def output_shape(self) -> tuple[int, ...]:
        (m, k), (k2, n) = (t.get_shape() for t in self.types()[:2])
        if k != k2:
            raise VerifyException(f"A has {k} columns, B {k2} rows")
        return (m, n)


@irdl_op_definition
class BatchMatmulOp(NamedStructuredOp):
    """`C[b, m, n] += A[b, m, k] * B[b, k, n]`."""

    name = "linalg.batch_matmul"
    RANKS: ClassVar[tuple[int, int, int]] = (3, 3, 3)

    def output_shape(self) -> tuple[int, ...]:
        (b, m, k), (b2, k2, n) = (t.get_shape() for t in self.types()[:2])
        if k != k2 or b != b2:
            raise VerifyException(f"A is {b}x{m}x{k}, B {b2}x{k2}x{n}")
        return (b, m, n)


NAMED_OPS = (
    Conv2DNhwcHwcfOp,
    Conv2DNchwFchwOp,
    DepthwiseConv2DNhwcHwcOp,
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
