"""The gpu dialect's host-side ops on device memory, in MLIR's syntax: `gpu.alloc`,
`gpu.dealloc`, `gpu.memcpy`, `gpu.memset` (each synchronous, or `async` after a list
of tokens) and `gpu.set_default_device`.

    %m = gpu.alloc () : memref<4xf32>
    %d, %t1 = gpu.alloc async [%t0] host_shared (%n) : memref<?xf32>
    gpu.memcpy %m, %a : memref<4xf32>, memref<4xf32>
    %t2 = gpu.memset async [%t1] %d, %zero : memref<?xf32>, f32
    gpu.dealloc %m : memref<4xf32>
    gpu.set_default_device %device

affinec's host code passes numpy arrays (or torch tensors) to its kernels, so its
pipeline makes none of these; they are read and printed as MLIR's, and the
interpreter runs the synchronous ones (an allocation is a fresh buffer, a copy or a
fill checks the shapes and element types, as MLIR's verifier does).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import AffineMapAttr, IndexType, MemRefType, UnitAttr, i32
from xdsl.dialects.gpu import AsyncTokenType
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    opt_result_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.gpu_common import parse_async, print_async


def _async_results(is_async: bool) -> list[list[Attribute]]:
    return [[AsyncTokenType()] if is_async else []]


@irdl_op_definition
class AllocOp(IRDLOperation):
    """`%m = gpu.alloc async [%t] host_shared (%n) : memref<?xf32>`: device memory,
    one size per dynamic dimension."""

    name = "gpu.alloc"
    asyncDependencies = var_operand_def(AsyncTokenType)
    dynamicSizes = var_operand_def(IndexType)
    symbolOperands = var_operand_def(IndexType)
    memref = result_def(MemRefType)
    asyncToken = opt_result_def(AsyncTokenType)
    hostShared = opt_prop_def(UnitAttr)
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(
        self,
        memref_type: MemRefType,
        sizes: Sequence[SSAValue] = (),
        deps: Sequence[SSAValue] = (),
        is_async: bool = False,
        host_shared: bool = False,
        symbols: Sequence[SSAValue] = (),
    ):
        super().__init__(
            operands=[deps, sizes, symbols],
            result_types=[memref_type, *_async_results(is_async)],
            properties={"hostShared": UnitAttr() if host_shared else None},
        )

    def verify_(self) -> None:
        t = self.memref.type
        assert isinstance(t, MemRefType)
        layout = t.layout
        symbols = layout.data.num_symbols if isinstance(layout, AffineMapAttr) else 0
        if len(self.symbolOperands) != symbols:
            raise VerifyException(
                "symbol operand count does not equal memref symbol count"
            )
        dynamic = sum(1 for d in t.get_shape() if d < 0)
        if len(self.dynamicSizes) != dynamic:
            raise VerifyException(
                f"incorrect number of dynamic sizes, has {len(self.dynamicSizes)}, "
                f"expected {dynamic}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> AllocOp:
        is_async, deps = parse_async(parser)
        host_shared = parser.parse_optional_keyword("host_shared") is not None
        sizes = parser.parse_comma_separated_list(
            Parser.Delimiter.PAREN, lambda: parser.parse_operand(IndexType())
        )
        symbols = (
            parser.parse_optional_comma_separated_list(
                Parser.Delimiter.SQUARE, lambda: parser.parse_operand(IndexType())
            )
            or []
        )
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        pos = parser.pos
        t = parser.parse_type()
        if not isinstance(t, MemRefType):
            parser.raise_error("expected a memref type", pos)
        op = cls(t, sizes, deps, is_async, host_shared, symbols)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        print_async(printer, self.asyncToken, self.asyncDependencies)
        if self.hostShared is not None:
            printer.print_string(" host_shared")
        printer.print_string(" (")
        printer.print_list(self.dynamicSizes, printer.print_ssa_value)
        printer.print_string(")")
        if self.symbolOperands:
            printer.print_string("[")
            printer.print_list(self.symbolOperands, printer.print_ssa_value)
            printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.memref.type)


def _print_memory_op(printer: Printer, op: IRDLOperation, operands) -> None:
    """` async [%deps] %a, %b : type, type`, as MLIR prints its memory ops."""
    print_async(printer, op.asyncToken, op.asyncDependencies)  # pyright: ignore
    printer.print_string(" ")
    printer.print_list(operands, printer.print_ssa_value)
    printer.print_op_attributes(op.attributes)
    printer.print_string(" : ")
    printer.print_list([v.type for v in operands], printer.print_attribute)


def _parse_operands_and_types(parser: Parser, count: int) -> list[SSAValue]:
    """`%a, %b : type, type` after an async prefix."""
    names = [parser.parse_unresolved_operand()]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        names.append(parser.parse_unresolved_operand())
    parser.parse_punctuation(":")
    types = [parser.parse_type()]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        types.append(parser.parse_type())
    return [parser.resolve_operand(n, t) for n, t in zip(names, types, strict=True)]


@irdl_op_definition
class DeallocOp(IRDLOperation):
    """`gpu.dealloc async [%t] %m : memref<4xf32>`."""

    name = "gpu.dealloc"
    asyncDependencies = var_operand_def(AsyncTokenType)
    memref = operand_def(MemRefType)
    asyncToken = opt_result_def(AsyncTokenType)

    def __init__(
        self, memref: SSAValue, deps: Sequence[SSAValue] = (), is_async: bool = False
    ):
        super().__init__(operands=[deps, memref], result_types=_async_results(is_async))

    @classmethod
    def parse(cls, parser: Parser) -> DeallocOp:
        is_async, deps = parse_async(parser)
        name = parser.parse_unresolved_operand()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        op = cls(parser.resolve_operand(name, parser.parse_type()), deps, is_async)
        op.attributes |= attrs
        return op

    def print(self, printer: Printer):
        _print_memory_op(printer, self, [self.memref])


@irdl_op_definition
class MemcpyOp(IRDLOperation):
    """`gpu.memcpy async [%t] %dst, %src : memref<4xf32>, memref<4xf32>`."""

    name = "gpu.memcpy"
    asyncDependencies = var_operand_def(AsyncTokenType)
    dst = operand_def(MemRefType)
    src = operand_def(MemRefType)
    asyncToken = opt_result_def(AsyncTokenType)

    def __init__(
        self,
        dst: SSAValue,
        src: SSAValue,
        deps: Sequence[SSAValue] = (),
        is_async: bool = False,
    ):
        super().__init__(
            operands=[deps, dst, src], result_types=_async_results(is_async)
        )

    def verify_(self) -> None:
        dst, src = self.dst.type, self.src.type
        assert isinstance(dst, MemRefType) and isinstance(src, MemRefType)
        if dst.get_element_type() != src.get_element_type():
            raise VerifyException("arguments have incompatible element type")
        if dst.get_shape() != src.get_shape():
            raise VerifyException("arguments have incompatible shape")

    @classmethod
    def parse(cls, parser: Parser) -> MemcpyOp:
        is_async, deps = parse_async(parser)
        dst, src = _parse_operands_and_types(parser, 2)
        return cls(dst, src, deps, is_async)

    def print(self, printer: Printer):
        _print_memory_op(printer, self, [self.dst, self.src])


@irdl_op_definition
class MemsetOp(IRDLOperation):
    """`gpu.memset async [%t] %dst, %value : memref<4xf32>, f32`."""

    name = "gpu.memset"
    asyncDependencies = var_operand_def(AsyncTokenType)
    dst = operand_def(MemRefType)
    value = operand_def()
    asyncToken = opt_result_def(AsyncTokenType)

    def __init__(
        self,
        dst: SSAValue,
        value: SSAValue,
        deps: Sequence[SSAValue] = (),
        is_async: bool = False,
    ):
        super().__init__(
            operands=[deps, dst, value], result_types=_async_results(is_async)
        )

    def verify_(self) -> None:
        t = self.dst.type
        assert isinstance(t, MemRefType)
        if t.get_element_type() != self.value.type:
            raise VerifyException(
                "failed to verify that all of {dst, value} have same element type"
            )

    @classmethod
    def parse(cls, parser: Parser) -> MemsetOp:
        is_async, deps = parse_async(parser)
        dst, value = _parse_operands_and_types(parser, 2)
        return cls(dst, value, deps, is_async)

    def print(self, printer: Printer):
        _print_memory_op(printer, self, [self.dst, self.value])


@irdl_op_definition
class SetDefaultDeviceOp(IRDLOperation):
    """`gpu.set_default_device %device`: the device later ops run on."""

    name = "gpu.set_default_device"
    devIndex = operand_def(i32)
    assembly_format = "attr-dict $devIndex"

    def __init__(self, device: SSAValue):
        super().__init__(operands=[device])
