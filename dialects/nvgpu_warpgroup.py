"""nvgpu's warpgroup MMA, as MLIR's (`nvgpu_hopper` says what it means):

%da = nvgpu.warpgroup.generate.descriptor %tile, %map : memref<64x64xf16, 3>, !map -> !descA
%acc = nvgpu.warpgroup.mma.init.accumulator -> !acc
%d = nvgpu.warpgroup.mma %da, %db, %acc {transposeB} : !descA, !descB, !acc -> !acc
nvgpu.warpgroup.mma.store %d, %out : !acc to memref<64x64xf32>
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    result_def,
    traits_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.memory_effects import AccessesOperands
from affinec.dialects.nvgpu_common import (
    SHARED_MEMORY_SPACE,
    element_bitwidth,
    memory_space_of,
)
from affinec.dialects.nvgpu_hopper_types import (
    TensorMapDescriptorType,
    WarpgroupAccumulatorType,
    WarpgroupMatrixDescriptorType,
    parse_type_of,
)
from affinec.hardware.wgmma_layouts import WGMMA_M, TileLayout

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
        printer.print_attribute(self.tensorMap.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.descriptor.type)

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
        printer.print_attribute(self.matrixC.type)


@irdl_op_definition
class WarpgroupMmaOp(IRDLOperation):
    """`%d = nvgpu.warpgroup.mma %a, %b, %c {transposeB, waitGroup = 1} : !descA,
    !descB, !acc -> !acc`: D = A × B + C by the warpgroup, as ⌈M/64⌉ × K/16 `wgmma`
    instructions committed as one group, after which at most `waitGroup` groups
    (1 by default, as in MLIR) are in flight: the result may feed the next
    `warpgroup.mma` at once, and `warpgroup.mma.store` waits for all."""

    name = "nvgpu.warpgroup.mma"
    FEATURE: ClassVar[str] = "wgmma"

    descriptorA = operand_def(WarpgroupMatrixDescriptorType)
    descriptorB = operand_def(WarpgroupMatrixDescriptorType)
    matrixC = operand_def(WarpgroupAccumulatorType)
    waitGroup = opt_prop_def(IntegerAttr)
    transposeA = opt_prop_def(UnitAttr)
    transposeB = opt_prop_def(UnitAttr)
    matrixD = result_def(WarpgroupAccumulatorType)

    MAX_GROUPS: ClassVar[int] = 7

    def __init__(
        self, a, b, c, transpose_b: bool = True, wait_group: int | None = None
    ):
        acc = SSAValue.get(c)
        super().__init__(
            operands=[a, b, acc],
            properties={
                "transposeB": UnitAttr() if transpose_b else None,
                # absent: MLIR's default, 1 (given, kept, as MLIR keeps it)
                "waitGroup": None
                if wait_group is None
                else IntegerAttr(wait_group, i64),
            },
            result_types=[acc.type],
        )

    @property
    def groups_in_flight(self) -> int:
        """How many groups of `wgmma`s (this op's among them) may still run when the
        op returns: `waitGroup`, 1 when absent (MLIR's default). Their reads of
        shared memory go on until a later wait retires them."""
        return 1 if self.waitGroup is None else self.waitGroup.value.data

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
        if self.groups_in_flight == 1:
            shown.pop("waitGroup", None)  # the default, left out as MLIR does
        printer.print_op_attributes(shown)
        printer.print_string(" : ")
        printer.print_list(
            (self.descriptorA.type, self.descriptorB.type, self.matrixC.type),
            printer.print_attribute,
        )
        printer.print_string(" -> ")
        printer.print_attribute(self.matrixD.type)

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
            or wait.type != i64
            or not 0 <= wait.value.data <= self.MAX_GROUPS
        ):
            got = f", got {wait.value.data}" if isinstance(wait, IntegerAttr) else ""
            raise VerifyException(
                f"waitGroup is an i64 from 0 to {self.MAX_GROUPS}{got}"
            )


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
        printer.print_attribute(self.matrixD.type)
        printer.print_string(" to ")
        printer.print_attribute(self.dstMemref.type)

    def verify_(self) -> None:
        t = self.dstMemref.type
        acc = self.matrixD.type
        assert isinstance(t, MemRefType) and isinstance(acc, WarpgroupAccumulatorType)
        if t.get_shape() != acc.shape:
            raise VerifyException(f"stores a {acc.shape} accumulator into {t}")
