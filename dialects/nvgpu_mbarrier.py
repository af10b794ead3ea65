"""nvgpu's mbarriers and TMA loads, as MLIR's (`nvgpu_hopper` says what they mean):

%bar = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers
nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers
nvgpu.tma.async.load %map[%x, %y], %bar[%c0] to %tile : !map, !barriers -> memref<64x64xf16, 3>
nvgpu.mbarrier.try_wait.parity %bar[%c0], %parity, %ticks : !barriers
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    IndexType,
    IntegerType,
    MemRefType,
    UnrankedMemRefType,
    i1,
)
from xdsl.ir import SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.nvgpu_common import (
    SHARED_MEMORY_SPACE,
    element_bitwidth,
    memory_space_of,
    mlir_type_text,
)
from affinec.dialects.nvgpu_hopper_types import (
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    parse_type_of,
)

_INDEX = IndexType()


def _parse_indexed(parser: Parser) -> tuple[UnresolvedOperand, UnresolvedOperand]:
    """`%barriers[%id]`."""
    value = parser.parse_unresolved_operand()
    parser.parse_punctuation("[")
    index = parser.parse_unresolved_operand()
    parser.parse_punctuation("]")
    return value, index


def _print_indexed(printer: Printer, value: SSAValue, index: SSAValue) -> None:
    printer.print_ssa_value(value)
    printer.print_string("[")
    printer.print_ssa_value(index)
    printer.print_string("]")


def _parse_predicate(parser: Parser) -> UnresolvedOperand | None:
    """`, predicate = %p`, if there."""
    if parser.parse_optional_punctuation(",") is None:
        return None
    parser.parse_keyword("predicate")
    parser.parse_punctuation("=")
    return parser.parse_unresolved_operand()


def _print_predicate(printer: Printer, predicate: SSAValue | None) -> None:
    if predicate is not None:
        printer.print_string(", predicate = ")
        printer.print_ssa_value(predicate)


# --------------------------------------------------------------------------------------
# mbarriers
# --------------------------------------------------------------------------------------


@irdl_op_definition
class MBarrierCreateOp(IRDLOperation):
    """`%b = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<...>`: a group of barriers
    in the block's shared memory (one allocation per op, as a workgroup buffer)."""

    name = "nvgpu.mbarrier.create"

    barriers = result_def(MBarrierGroupType)

    def __init__(self, group: MBarrierGroupType):
        super().__init__(result_types=[group])

    @classmethod
    def parse(cls, parser: Parser) -> MBarrierCreateOp:
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation("->")
        op = cls(parse_type_of(parser, MBarrierGroupType))
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" -> ")
        printer.print_attribute(self.barriers.type)


class _BarrierOp(IRDLOperation):
    """An op on barrier `mbarId` of a group, with one index operand and an optional
    predicate (`%b[%id], %value (, predicate = %p)? : type`)."""

    VALUE: ClassVar[str]

    @classmethod
    def parse(cls, parser: Parser):
        barriers, index = _parse_indexed(parser)
        parser.parse_punctuation(",")
        value = parser.parse_unresolved_operand()
        predicate = _parse_predicate(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        group = parse_type_of(parser, MBarrierGroupType)
        op = cls(
            parser.resolve_operand(barriers, group),
            parser.resolve_operand(index, _INDEX),
            parser.resolve_operand(value, _INDEX),
            None if predicate is None else parser.resolve_operand(predicate, i1),
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_indexed(printer, self.barriers, self.mbarId)  # pyright: ignore
        printer.print_string(", ")
        printer.print_ssa_value(getattr(self, self.VALUE))
        _print_predicate(printer, self.predicate)  # pyright: ignore
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.barriers.type)


@irdl_op_definition
class MBarrierInitOp(_BarrierOp):
    """`nvgpu.mbarrier.init %b[%id], %count : !group`: barrier `%id` starts phase 0,
    each phase waiting for `%count` arrivals. One thread initializes; the others may
    use the barrier after a `gpu.barrier`."""

    name = "nvgpu.mbarrier.init"

    barriers = operand_def(MBarrierGroupType)
    count = operand_def(IndexType)
    mbarId = operand_def(IndexType)
    predicate = opt_operand_def(i1)
    VALUE: ClassVar[str] = "count"

    def __init__(self, barriers, mbar_id, count, predicate=None):
        super().__init__(
            operands=[
                barriers,
                count,
                mbar_id,
                [] if predicate is None else [predicate],
            ]
        )


@irdl_op_definition
class MBarrierArriveExpectTxOp(_BarrierOp):
    """`nvgpu.mbarrier.arrive.expect_tx %b[%id], %bytes : !group`: announce `%bytes`
    more bytes for the current phase, and arrive."""

    name = "nvgpu.mbarrier.arrive.expect_tx"
    FEATURE: ClassVar[str] = "tma"

    barriers = operand_def(MBarrierGroupType)
    txcount = operand_def(IndexType)
    mbarId = operand_def(IndexType)
    predicate = opt_operand_def(i1)
    VALUE: ClassVar[str] = "txcount"

    def __init__(self, barriers, mbar_id, txcount, predicate=None):
        super().__init__(
            operands=[
                barriers,
                txcount,
                mbar_id,
                [] if predicate is None else [predicate],
            ]
        )


@irdl_op_definition
class MBarrierArriveOp(IRDLOperation):
    """`%t = nvgpu.mbarrier.arrive %b[%id] : !group -> !nvgpu.mbarrier.token`: arrive
    on the current phase (a consumer releasing a stage)."""

    name = "nvgpu.mbarrier.arrive"

    barriers = operand_def(MBarrierGroupType)
    mbarId = operand_def(IndexType)
    token = result_def(MBarrierTokenType)

    def __init__(self, barriers, mbar_id):
        super().__init__(
            operands=[barriers, mbar_id], result_types=[MBarrierTokenType()]
        )

    @classmethod
    def parse(cls, parser: Parser) -> MBarrierArriveOp:
        barriers, index = _parse_indexed(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        group = parse_type_of(parser, MBarrierGroupType)
        parser.parse_punctuation("->")
        parse_type_of(parser, MBarrierTokenType)
        op = cls(
            parser.resolve_operand(barriers, group),
            parser.resolve_operand(index, _INDEX),
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_indexed(printer, self.barriers, self.mbarId)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.barriers.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.token.type)


@irdl_op_definition
class MBarrierTryWaitParityOp(IRDLOperation):
    """`nvgpu.mbarrier.try_wait.parity %b[%id], %parity, %ticks : !group`: wait until
    the phase of parity `%parity` (i1) of barrier `%id` has completed (`%ticks` is
    the hardware's suspend-time hint)."""

    name = "nvgpu.mbarrier.try_wait.parity"
    FEATURE: ClassVar[str] = "tma"

    barriers = operand_def(MBarrierGroupType)
    phaseParity = operand_def(i1)
    ticks = operand_def(IndexType)
    mbarId = operand_def(IndexType)

    def __init__(self, barriers, mbar_id, parity, ticks):
        super().__init__(operands=[barriers, parity, ticks, mbar_id])

    @classmethod
    def parse(cls, parser: Parser) -> MBarrierTryWaitParityOp:
        barriers, index = _parse_indexed(parser)
        parser.parse_punctuation(",")
        parity = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        ticks = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        group = parse_type_of(parser, MBarrierGroupType)
        op = cls(
            parser.resolve_operand(barriers, group),
            parser.resolve_operand(index, _INDEX),
            parser.resolve_operand(parity, i1),
            parser.resolve_operand(ticks, _INDEX),
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        _print_indexed(printer, self.barriers, self.mbarId)
        printer.print_string(", ")
        printer.print_list((self.phaseParity, self.ticks), printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.barriers.type)


# --------------------------------------------------------------------------------------
# TMA
# --------------------------------------------------------------------------------------


MAX_TMA_RANK = 5
"""The most dimensions a TMA tensor map has."""

MAX_TMA_BOX = 256
"""The most elements a TMA box has along any dimension."""


def _check_shared_and_static(t: MemRefType, what: str) -> None:
    """MLIR's two checks of a memref a TMA load reads or fills, in its words: it
    is in shared memory and its shape is static."""
    if memory_space_of(t) != SHARED_MEMORY_SPACE:
        raise VerifyException(
            f"{what} has incorrect address space, it must be shared memory "
            "address space."
        )
    if any(d < 0 for d in t.get_shape()):
        raise VerifyException(f"{what} must be static shaped")


def check_tensor_map(
    descriptor: TensorMapDescriptorType, dst: MemRefType | None = None
) -> None:
    """MLIR's checks of a tensor map's box (and of the memref a load fills), in its
    order and words: no interleave, a static shared box of 1 to 256 elements a
    dimension, an innermost dimension as wide as the swizzle's span, and a
    destination of the box's type in shared memory."""
    box = descriptor.tensor
    if descriptor.interleave.data != "none":
        raise VerifyException("Interleave options are not supported yet.")
    _check_shared_and_static(box, "the tensor map descriptor")
    for size in box.get_shape():
        if not 0 < size <= MAX_TMA_BOX:
            raise VerifyException(
                "the tensor map descriptor must have dimensions between 1 and "
                f"{MAX_TMA_BOX} but it is {size}"
            )
    width = element_bitwidth(box.get_element_type())
    last_bytes = box.get_shape()[-1] * width // 8 if box.get_shape() else 0
    span = descriptor.swizzle_span
    if box.get_num_dims() > 1 and span and last_bytes != span:
        raise VerifyException(
            f"the tensormap descriptor must have last dimension of {span} bytes "
            f"but it is {last_bytes} bytes"
        )
    if dst is None:
        return
    if dst.get_element_type() != box.get_element_type():
        raise VerifyException(
            "the element type of tensor map descriptor and memref must be same"
        )
    _check_shared_and_static(dst, "the destination memref")
    if dst.get_num_dims() != box.get_num_dims():
        raise VerifyException(
            "the shape of tensor map descriptor and memref must have same rank"
        )
    if tuple(dst.get_shape()) != tuple(box.get_shape()):
        raise VerifyException(
            f"memref and tensor map shapes mismatch {mlir_type_text(box)} != "
            f"{mlir_type_text(dst)}"
        )
    if last_bytes % 16:
        raise VerifyException(
            "the bytes in the last dimension of the tensor map must be a multiple of 16"
        )


@irdl_op_definition
class TmaCreateDescriptorOp(IRDLOperation):
    """`%map = nvgpu.tma.create.descriptor %tensor box[%d0, %d1] : memref<*xf16> ->
    !map`: on the host, the TMA descriptor of a global tensor (unranked, as in MLIR:
    `memref.cast` it), copying boxes of the given sizes (outermost first)."""

    name = "nvgpu.tma.create.descriptor"

    tensor = operand_def(UnrankedMemRefType)
    boxDimensions = var_operand_def(IndexType)
    tensorMap = result_def(TensorMapDescriptorType)

    def __init__(
        self, tensor, box: Sequence[SSAValue], result: TensorMapDescriptorType
    ):
        super().__init__(operands=[tensor, list(box)], result_types=[result])

    @classmethod
    def parse(cls, parser: Parser) -> TmaCreateDescriptorOp:
        tensor = parser.parse_unresolved_operand()
        parser.parse_keyword("box")
        box = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        tensor_type = parser.parse_type()
        parser.parse_punctuation("->")
        result = parse_type_of(parser, TensorMapDescriptorType)
        op = cls(
            parser.resolve_operand(tensor, tensor_type),
            [parser.resolve_operand(b, _INDEX) for b in box],
            result,
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.tensor)
        printer.print_string(" box[")
        printer.print_list(self.boxDimensions, printer.print_ssa_value)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.tensorMap.type)

    def verify_(self) -> None:
        t = self.tensorMap.type
        assert isinstance(t, TensorMapDescriptorType)
        if len(self.boxDimensions) > MAX_TMA_RANK:
            raise VerifyException(f"Maximum {MAX_TMA_RANK} coordinates are supported.")
        check_tensor_map(t)
        if len(self.boxDimensions) != t.tensor.get_num_dims():
            raise VerifyException(
                f"the box of {t.tensor} has {t.tensor.get_num_dims()} dimensions, "
                f"got {len(self.boxDimensions)} sizes"
            )


@irdl_op_definition
class TmaAsyncLoadOp(IRDLOperation):
    """`nvgpu.tma.async.load %map[%x, %y], %b[%id] to %tile : !map, !group ->
    memref<...>`: one thread starts the copy of the box at the coordinates (innermost
    first) into `%tile`; its bytes complete on barrier `%id`."""

    name = "nvgpu.tma.async.load"
    FEATURE: ClassVar[str] = "tma"

    dst = operand_def(MemRefType)
    barriers = operand_def(MBarrierGroupType)
    tensorMapDescriptor = operand_def(TensorMapDescriptorType)
    coordinates = var_operand_def(IndexType)
    mbarId = operand_def(IndexType)
    multicastMask = opt_operand_def(IntegerType(16))
    predicate = opt_operand_def(i1)

    traits = traits_def(AccessesOperands(writes=("dst",)))
    irdl_options = (AttrSizedOperandSegments(as_property=True),)

    def __init__(self, tensor_map, coordinates, barriers, mbar_id, dst, predicate=None):
        super().__init__(
            operands=[
                dst,
                barriers,
                tensor_map,
                list(coordinates),
                mbar_id,
                [],
                [] if predicate is None else [predicate],
            ]
        )

    @classmethod
    def parse(cls, parser: Parser) -> TmaAsyncLoadOp:
        tensor_map = parser.parse_unresolved_operand()
        coordinates = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        parser.parse_punctuation(",")
        barriers, index = _parse_indexed(parser)
        parser.parse_keyword("to")
        dst = parser.parse_unresolved_operand()
        predicate = _parse_predicate(parser)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        map_type = parse_type_of(parser, TensorMapDescriptorType)
        parser.parse_punctuation(",")
        group = parse_type_of(parser, MBarrierGroupType)
        parser.parse_punctuation("->")
        dst_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(tensor_map, map_type),
            [parser.resolve_operand(c, _INDEX) for c in coordinates],
            parser.resolve_operand(barriers, group),
            parser.resolve_operand(index, _INDEX),
            parser.resolve_operand(dst, dst_type),
            None if predicate is None else parser.resolve_operand(predicate, i1),
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_ssa_value(self.tensorMapDescriptor)
        printer.print_string("[")
        printer.print_list(self.coordinates, printer.print_ssa_value)
        printer.print_string("], ")
        _print_indexed(printer, self.barriers, self.mbarId)
        printer.print_string(" to ")
        printer.print_ssa_value(self.dst)
        _print_predicate(printer, self.predicate)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensorMapDescriptor.type)
        printer.print_string(", ")
        printer.print_attribute(self.barriers.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.dst.type)

    @property
    def map_type(self) -> TensorMapDescriptorType:
        t = self.tensorMapDescriptor.type
        assert isinstance(t, TensorMapDescriptorType)
        return t

    def verify_(self) -> None:
        box = self.map_type.tensor
        dst = self.dst.type
        assert isinstance(dst, MemRefType)
        check_tensor_map(self.map_type, dst)
        if len(self.coordinates) > MAX_TMA_RANK:
            raise VerifyException(f"Maximum {MAX_TMA_RANK} coordinates are supported.")
        if len(self.coordinates) != box.get_num_dims():
            raise VerifyException(
                "number of coordinates do not match with the rank of tensor "
                "descriptor map."
            )
        # affinec's own words for what MLIR leaves to the driver
        if memory_space_of(dst) != SHARED_MEMORY_SPACE:
            raise VerifyException(f"the destination must be shared memory, got {dst}")
        if dst.get_shape() != box.get_shape() or (
            dst.get_element_type() != box.get_element_type()
        ):
            raise VerifyException(
                f"the destination {dst} is not the tensor map's box {box}"
            )
        if len(self.coordinates) != box.get_num_dims():
            raise VerifyException(
                f"a box of {box.get_num_dims()} dimensions takes as many "
                f"coordinates, got {len(self.coordinates)}"
            )
        span = self.map_type.swizzle_span
        inner = box.get_shape()[-1] * element_bitwidth(box.get_element_type()) // 8
        if span and inner != span:
            raise VerifyException(
                f"a box swizzled with {span} B has an innermost dimension of "
                f"{span} bytes, this one has {inner}"
            )
        if inner % 16:
            raise VerifyException(
                f"a box's innermost dimension is a multiple of 16 bytes, got {inner}"
            )
        if self.map_type.interleave.data != "none":
            raise VerifyException("interleaved tensor maps are not supported")
