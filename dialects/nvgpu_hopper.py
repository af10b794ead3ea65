"""nvgpu's Hopper ops, as MLIR's: mbarriers, TMA loads, and warpgroup MMA (`wgmma`)
reading both operands from shared memory.

    %bar = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers
    nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers
    nvgpu.tma.async.load %map[%x, %y], %bar[%c0] to %tile : !map, !barriers -> memref<64x64xf16, 3>
    nvgpu.mbarrier.try_wait.parity %bar[%c0], %parity, %ticks : !barriers
    %da = nvgpu.warpgroup.generate.descriptor %tile, %map : memref<64x64xf16, 3>, !map -> !descA
    %acc = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %d = nvgpu.warpgroup.mma %da, %db, %acc {transposeB} : !descA, !descB, !acc -> !acc
    nvgpu.warpgroup.mma.store %d, %out : !acc to memref<64x64xf32>

What they mean (the interpreter runs exactly this, `affinec.interpreter.hopper`):

- An **mbarrier** counts arrivals and bytes. `init` sets the arrivals a phase needs;
  a phase completes when they have all arrived and every byte announced with
  `arrive.expect_tx` has landed; `try_wait.parity %p` blocks until the phase of
  parity `%p` has completed (a new barrier is in phase 0, so parity 1 passes at once).
- **`tma.async.load`** copies the box of the tensor map at the coordinates (innermost
  dimension first, as PTX orders them; elements out of the tensor read zero) into the
  shared tile, swizzled as the map says, and counts its bytes on the barrier; the
  tile is written when the barrier's phase completes.
- **`warpgroup.mma`** is run by the 128 threads of a warpgroup together: D = A × B + C
  with A (M × K) read K-major from its tile and B (K × N) read from its row-major tile
  (`transposeB`: PTX's MN-major B), as `m64nNk16` instructions, each rounded once to
  f32. `warpgroup.mma.store` writes each thread's registers of the accumulator to
  their places in a memref (`affinec.wgmma_layouts` has the fragment).

The tiles `wgmma` reads are those TMA wrote, swizzled (32, 64 or 128 B): the
descriptor gets its swizzle from the tensor map. Verifiers are stricter than MLIR's
where the lowering needs it: f16 and bf16 operands, `transposeB` required,
`transposeA` refused, accumulators of f32.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IndexType,
    IntegerAttr,
    IntegerType,
    MemRefType,
    UnitAttr,
    UnrankedMemRefType,
    i1,
    i64,
)
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    AttrSizedOperandSegments,
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
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
)
from affinec.dialects.nvgpu_hopper_types import (
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    WarpgroupAccumulatorType,
    WarpgroupMatrixDescriptorType,
    parse_type_of,
)
from affinec.wgmma_layouts import WGMMA_M, TileLayout

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


def _print_type(printer: Printer, t: Attribute) -> None:
    printer.print_attribute(t)


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
        _print_type(printer, self.barriers.type)


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
        _print_type(printer, self.barriers.type)


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
        _print_type(printer, self.barriers.type)
        printer.print_string(" -> ")
        _print_type(printer, self.token.type)


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
        _print_type(printer, self.barriers.type)


# --------------------------------------------------------------------------------------
# TMA
# --------------------------------------------------------------------------------------


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
        _print_type(printer, self.tensorMap.type)

    def verify_(self) -> None:
        t = self.tensorMap.type
        assert isinstance(t, TensorMapDescriptorType)
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
        _print_type(printer, self.tensorMapDescriptor.type)
        printer.print_string(", ")
        _print_type(printer, self.barriers.type)
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


# --------------------------------------------------------------------------------------
# Warpgroup MMA
# --------------------------------------------------------------------------------------


def _operand_element(t: MemRefType, what: str) -> Attribute:
    element = t.get_element_type()
    if not isinstance(element, Float16Type | BFloat16Type):
        raise VerifyException(
            f"wgmma takes f16 or bf16 operands here, {what} holds {element}"
        )
    return element


@irdl_op_definition
class WarpgroupGenerateDescriptorOp(IRDLOperation):
    """`%d = nvgpu.warpgroup.generate.descriptor %tile, %map : memref<...>, !map ->
    !nvgpu.warpgroup.descriptor<...>`: the matrix descriptor of a shared tile that
    TMA wrote through `%map` (whose swizzle it takes)."""

    name = "nvgpu.warpgroup.generate.descriptor"

    tensor = operand_def(MemRefType)
    tensorMap = operand_def(TensorMapDescriptorType)
    descriptor = result_def(WarpgroupMatrixDescriptorType)

    def __init__(self, tensor, tensor_map):
        t = SSAValue.get(tensor).type
        assert isinstance(t, MemRefType)
        super().__init__(
            operands=[tensor, tensor_map],
            result_types=[WarpgroupMatrixDescriptorType(t)],
        )

    @classmethod
    def parse(cls, parser: Parser) -> WarpgroupGenerateDescriptorOp:
        tensor = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        tensor_map = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        tensor_type = parser.parse_type()
        parser.parse_punctuation(",")
        map_type = parse_type_of(parser, TensorMapDescriptorType)
        parser.parse_punctuation("->")
        result = parse_type_of(parser, WarpgroupMatrixDescriptorType)
        op = cls(
            parser.resolve_operand(tensor, tensor_type),
            parser.resolve_operand(tensor_map, map_type),
        )
        op.attributes |= attributes
        if op.descriptor.type != result:
            parser.raise_error(f"expected {op.descriptor.type}, got {result}")
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list((self.tensor, self.tensorMap), printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.tensor.type)
        printer.print_string(", ")
        _print_type(printer, self.tensorMap.type)
        printer.print_string(" -> ")
        _print_type(printer, self.descriptor.type)

    def layout(self) -> TileLayout:
        """The tile's layout in shared memory."""
        t = self.tensor.type
        m = self.tensorMap.type
        assert isinstance(t, MemRefType) and isinstance(m, TensorMapDescriptorType)
        rows, cols = t.get_shape()
        return TileLayout(
            rows, cols, element_bitwidth(t.get_element_type()) // 8, m.swizzle_span
        )

    def verify_(self) -> None:
        t = self.tensor.type
        assert isinstance(t, MemRefType)
        if memory_space_of(t) != SHARED_MEMORY_SPACE or t.get_num_dims() != 2:
            raise VerifyException(f"a wgmma operand is a 2-D shared memref, got {t}")
        _operand_element(t, "the tile")
        problem = self.layout().check()
        if problem:
            raise VerifyException(problem)
        if self.descriptor.type != WarpgroupMatrixDescriptorType(t):
            raise VerifyException(f"the result must describe {t}")


@irdl_op_definition
class WarpgroupMmaInitAccumulatorOp(IRDLOperation):
    """`%acc = nvgpu.warpgroup.mma.init.accumulator -> !acc`: zeros."""

    name = "nvgpu.warpgroup.mma.init.accumulator"

    matrixC = result_def(WarpgroupAccumulatorType)

    def __init__(self, t: WarpgroupAccumulatorType):
        super().__init__(result_types=[t])

    @classmethod
    def parse(cls, parser: Parser) -> WarpgroupMmaInitAccumulatorOp:
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation("->")
        op = cls(parse_type_of(parser, WarpgroupAccumulatorType))
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_op_attributes(self.attributes)
        printer.print_string(" -> ")
        _print_type(printer, self.matrixC.type)


@irdl_op_definition
class WarpgroupMmaOp(IRDLOperation):
    """`%d = nvgpu.warpgroup.mma %a, %b, %c {transposeB} : !descA, !descB, !acc ->
    !acc`: D = A × B + C by the warpgroup, as ⌈M/64⌉ × K/16 `wgmma` instructions."""

    name = "nvgpu.warpgroup.mma"
    FEATURE: ClassVar[str] = "wgmma"

    descriptorA = operand_def(WarpgroupMatrixDescriptorType)
    descriptorB = operand_def(WarpgroupMatrixDescriptorType)
    matrixC = operand_def(WarpgroupAccumulatorType)
    waitGroup = opt_prop_def(IntegerAttr)
    transposeA = opt_prop_def(UnitAttr)
    transposeB = opt_prop_def(UnitAttr)
    matrixD = result_def(WarpgroupAccumulatorType)

    def __init__(self, a, b, c, transpose_b: bool = True):
        acc = SSAValue.get(c)
        super().__init__(
            operands=[a, b, acc],
            properties={"transposeB": UnitAttr() if transpose_b else None},
            result_types=[acc.type],
        )

    @classmethod
    def parse(cls, parser: Parser) -> WarpgroupMmaOp:
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        c = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        ta = parse_type_of(parser, WarpgroupMatrixDescriptorType)
        parser.parse_punctuation(",")
        tb = parse_type_of(parser, WarpgroupMatrixDescriptorType)
        parser.parse_punctuation(",")
        tc = parse_type_of(parser, WarpgroupAccumulatorType)
        parser.parse_punctuation("->")
        parse_type_of(parser, WarpgroupAccumulatorType)
        op = cls(
            parser.resolve_operand(a, ta),
            parser.resolve_operand(b, tb),
            parser.resolve_operand(c, tc),
            transpose_b="transposeB" in attributes,
        )
        for key in ("transposeA", "waitGroup"):
            if key in attributes:
                op.properties[key] = attributes.pop(key)
        attributes.pop("transposeB", None)
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(
            (self.descriptorA, self.descriptorB, self.matrixC), printer.print_ssa_value
        )
        shown = dict(self.attributes)
        for key in ("transposeA", "transposeB", "waitGroup"):
            if key in self.properties:
                shown[key] = self.properties[key]
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_list(
            (self.descriptorA.type, self.descriptorB.type, self.matrixC.type),
            lambda t: _print_type(printer, t),
        )
        printer.print_string(" -> ")
        _print_type(printer, self.matrixD.type)

    def shapes(self) -> tuple[MemRefType, MemRefType, tuple[int, int]]:
        a, b, c = (v.type for v in (self.descriptorA, self.descriptorB, self.matrixC))
        assert isinstance(a, WarpgroupMatrixDescriptorType)
        assert isinstance(b, WarpgroupMatrixDescriptorType)
        assert isinstance(c, WarpgroupAccumulatorType)
        return a.tensor, b.tensor, c.shape

    def verify_(self) -> None:
        a, b, (m, n) = self.shapes()
        ea = _operand_element(a, "A")
        if _operand_element(b, "B") != ea:
            raise VerifyException(f"A and B must have one element type, got {a}, {b}")
        (am, ak), (bk, bn) = a.get_shape(), b.get_shape()
        if ak != bk:
            raise VerifyException(f"A is {am}x{ak} and B {bk}x{bn}: K differs")
        if (am, bn) != (m, n):
            raise VerifyException(
                f"A ({am}x{ak}) times B ({bk}x{bn}) is {am}x{bn}, the accumulator "
                f"is {m}x{n}"
            )
        if am % WGMMA_M or ak % 16:
            raise VerifyException(
                f"M must be a multiple of {WGMMA_M} and K of 16, got {am}x{ak}"
            )
        if self.transposeA is not None:
            raise VerifyException("transposeA is not supported: A is read K-major")
        if self.transposeB is None:
            raise VerifyException(
                "B is read from its row-major K x N tile (PTX's transposed B): "
                "set transposeB"
            )
        if self.matrixD.type != self.matrixC.type:
            raise VerifyException("the result must have the accumulator's type")
        wait = self.waitGroup
        if wait is not None and (
            not isinstance(wait, IntegerAttr)
            or wait.value.data != 1
            or wait.type != i64
        ):
            raise VerifyException("waitGroup other than 1 is not supported")


@irdl_op_definition
class WarpgroupMmaStoreOp(IRDLOperation):
    """`nvgpu.warpgroup.mma.store %d, %out : !acc to memref<MxNxf32>`: each thread
    writes its registers of the accumulator to their places."""

    name = "nvgpu.warpgroup.mma.store"

    matrixD = operand_def(WarpgroupAccumulatorType)
    dstMemref = operand_def(MemRefType)

    traits = traits_def(AccessesOperands(writes=("dstMemref",)))

    def __init__(self, d, dst):
        super().__init__(operands=[d, dst])

    @classmethod
    def parse(cls, parser: Parser) -> WarpgroupMmaStoreOp:
        d = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        dst = parser.parse_unresolved_operand()
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        td = parse_type_of(parser, WarpgroupAccumulatorType)
        parser.parse_keyword("to")
        tdst = parser.parse_type()
        op = cls(parser.resolve_operand(d, td), parser.resolve_operand(dst, tdst))
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list((self.matrixD, self.dstMemref), printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        _print_type(printer, self.matrixD.type)
        printer.print_string(" to ")
        printer.print_attribute(self.dstMemref.type)

    def verify_(self) -> None:
        t = self.dstMemref.type
        acc = self.matrixD.type
        assert isinstance(t, MemRefType) and isinstance(acc, WarpgroupAccumulatorType)
        if t.get_shape() != acc.shape:
            raise VerifyException(f"stores a {acc.shape} accumulator into {t}")


HOPPER_OPS: tuple[type[Operation], ...] = (
    MBarrierCreateOp,
    MBarrierInitOp,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierTryWaitParityOp,
    TmaCreateDescriptorOp,
    TmaAsyncLoadOp,
    WarpgroupGenerateDescriptorOp,
    WarpgroupMmaInitAccumulatorOp,
    WarpgroupMmaOp,
    WarpgroupMmaStoreOp,
)
HOPPER_TYPES = (
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    WarpgroupMatrixDescriptorType,
    WarpgroupAccumulatorType,
)
