"""Hopper's ops in the nvvm dialect, as MLIR names and writes them: mbarriers, the TMA
load, and warpgroup MMA (`wgmma`).

    nvvm.mbarrier.init %bar, %count : !llvm.ptr<3>, i32
    nvvm.fence.mbarrier.init
    nvvm.mbarrier.arrive.expect_tx %bar, %bytes : !llvm.ptr<3>, i32
    %state = nvvm.mbarrier.arrive %bar : !llvm.ptr<3> -> i64
    nvvm.mbarrier.try_wait.parity %bar, %parity, %ticks : !llvm.ptr<3>, i32, i32
    nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %map, %bar, box[%x, %y]
        : !llvm.ptr<7>, !llvm.ptr
    nvvm.wgmma.fence.aligned
    %d = nvvm.wgmma.mma_async %descA, %descB, %c, <m = 64, n = 64, k = 16>,
        D[<f32>, <one>, <wrapped>], A[<f16>, <one>, <row>], B[<f16>, <one>, <row>]
        : !llvm.struct<(f32, ...)> -> !llvm.struct<(f32, ...)>
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0

Most are one LLVM intrinsic call (`IntrinsicOp`). Two are inline PTX (`PtxOp`, the
emitter writes `asm`): `try_wait.parity`, a loop until the phase completes (as
MLIR's lowering writes it), and `wgmma.mma_async`, for which LLVM has no intrinsic.
A `wgmma` operand's layout `row` for A and `row` for B (MLIR's words) is K-major A
and MN-major ("transposed") B, the tiles `nvgpu.warpgroup.mma` reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import Float32Type, IntAttr, IntegerAttr, i32, i64
from xdsl.dialects.llvm import LLVMPointerType, LLVMStructType
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from affinec.dialects.nvvm_intrinsics import IntrinsicOp
from affinec.dialects.nvvm_mma import MMALayout, MMALayoutAttr, MMAShapeAttr


def required_feature(op: Operation) -> str | None:
    """The chip feature (`affinec.chips`) an op's instruction needs, if any: LLVM
    stops the whole process on an intrinsic its target lacks, so the lowering and
    the emitter ask first."""
    return getattr(type(op), "FEATURE", None)


class PtxOp(IRDLOperation):
    """An op written as inline PTX: `ptx()` gives the assembly and the constraints;
    the operands are the assembly's inputs in order (a struct's members one by
    one), the result (a struct, or none) its outputs."""

    def ptx(self) -> tuple[str, str]:
        raise NotImplementedError


# --------------------------------------------------------------------------------------
# Attributes of wgmma (MLIR's)
# --------------------------------------------------------------------------------------


class _AngleEnum:
    """`#nvvm.<name><value>`: an enum attribute written in angle brackets."""

    def print_parameter(self, printer: Printer) -> None:
        printer.print_string(f"<{self.data.value}>")  # pyright: ignore

    @classmethod
    def parse_parameter(cls, parser: AttrParser):
        with parser.in_angle_brackets():
            return parser.parse_str_enum(cls.enum_type)  # pyright: ignore


class WGMMAType(StrEnum):
    F16 = "f16"
    BF16 = "bf16"
    TF32 = "tf32"
    F32 = "f32"


class WGMMAScaleIn(StrEnum):
    ONE = "one"
    NEG = "neg"


class WGMMAScaleOut(StrEnum):
    ZERO = "zero"
    ONE = "one"


class MMAIntOverflow(StrEnum):
    WRAPPED = "wrapped"
    SATFINITE = "satfinite"


@irdl_attr_definition
class WGMMATypeAttr(_AngleEnum, EnumAttribute[WGMMAType]):
    """`#nvvm.wgmma_type<f16>`."""

    name = "nvvm.wgmma_type"


@irdl_attr_definition
class WGMMAScaleInAttr(_AngleEnum, EnumAttribute[WGMMAScaleIn]):
    """`#nvvm.wgmma_scale_in<one>`: A or B as is, or negated."""

    name = "nvvm.wgmma_scale_in"


@irdl_attr_definition
class WGMMAScaleOutAttr(_AngleEnum, EnumAttribute[WGMMAScaleOut]):
    """`#nvvm.wgmma_scale_out<one>`: D = A·B + D, or (`zero`) D = A·B."""

    name = "nvvm.wgmma_scale_out"


@irdl_attr_definition
class MMAIntOverflowAttr(_AngleEnum, EnumAttribute[MMAIntOverflow]):
    """`#nvvm.mma_int_overflow<wrapped>` (integer MMAs only; f32 ignores it)."""

    name = "nvvm.mma_int_overflow"


# --------------------------------------------------------------------------------------
# mbarriers
# --------------------------------------------------------------------------------------

_SHARED = LLVMPointerType(IntAttr(3))


def _parse_operands_and_types(parser: Parser, count: int, types: int):
    operands = [parser.parse_unresolved_operand()]
    for _ in range(count - 1):
        parser.parse_punctuation(",")
        operands.append(parser.parse_unresolved_operand())
    attributes = parser.parse_optional_attr_dict()
    parser.parse_punctuation(":")
    parsed = [parser.parse_type()]
    for _ in range(types - 1):
        parser.parse_punctuation(",")
        parsed.append(parser.parse_type())
    return operands, attributes, parsed


@irdl_op_definition
class MBarrierInitOp(IntrinsicOp):
    """`nvvm.mbarrier.init %bar, %count : !llvm.ptr<3>, i32`."""

    name = "nvvm.mbarrier.init"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.mbarrier.init.shared"

    addr = operand_def(LLVMPointerType)
    count = operand_def(i32)
    assembly_format = "$addr `,` $count attr-dict `:` type($addr) `,` type($count)"

    def __init__(self, addr: SSAValue, count: SSAValue):
        super().__init__(operands=[addr, count])


@irdl_op_definition
class FenceMBarrierInitOp(IntrinsicOp):
    """`nvvm.fence.mbarrier.init`: make barriers just initialized visible to the
    asynchronous proxy (TMA) before they are used."""

    name = "nvvm.fence.mbarrier.init"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.fence.mbarrier_init.release.cluster"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class MBarrierArriveExpectTxOp(IntrinsicOp):
    """`nvvm.mbarrier.arrive.expect_tx %bar, %bytes : !llvm.ptr<3>, i32`."""

    name = "nvvm.mbarrier.arrive.expect_tx"
    FEATURE: ClassVar[str] = "tma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.mbarrier.arrive.expect.tx.scope.cta.space.cta"
    RESULT: ClassVar[Attribute] = i64
    """The intrinsic returns the barrier's state, which the op drops."""

    addr = operand_def(LLVMPointerType)
    txcount = operand_def(i32)
    assembly_format = "$addr `,` $txcount attr-dict `:` type($addr) `,` type($txcount)"

    def __init__(self, addr: SSAValue, txcount: SSAValue):
        super().__init__(operands=[addr, txcount])


@irdl_op_definition
class MBarrierArriveOp(IntrinsicOp):
    """`%state = nvvm.mbarrier.arrive %bar : !llvm.ptr<3> -> i64`."""

    name = "nvvm.mbarrier.arrive"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.mbarrier.arrive.shared"

    addr = operand_def(LLVMPointerType)
    res = result_def(i64)
    assembly_format = "$addr attr-dict `:` type($addr) `->` type($res)"

    def __init__(self, addr: SSAValue):
        super().__init__(operands=[addr], result_types=[i64])


@irdl_op_definition
class MBarrierTryWaitParityOp(PtxOp):
    """`nvvm.mbarrier.try_wait.parity %bar, %parity, %ticks : !llvm.ptr<3>, i32,
    i32`: wait until the phase of parity `%parity` has completed (a loop of
    `mbarrier.try_wait.parity`, each suspending up to `%ticks`)."""

    name = "nvvm.mbarrier.try_wait.parity"
    FEATURE: ClassVar[str] = "tma"

    addr = operand_def(LLVMPointerType)
    phase = operand_def(i32)
    ticks = operand_def(i32)

    def __init__(self, addr: SSAValue, phase: SSAValue, ticks: SSAValue):
        super().__init__(operands=[addr, phase, ticks])

    @classmethod
    def parse(cls, parser: Parser) -> MBarrierTryWaitParityOp:
        operands, attributes, types = _parse_operands_and_types(parser, 3, 3)
        op = cls(
            *(
                parser.resolve_operand(o, t)
                for o, t in zip(operands, types, strict=True)
            )
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(self.operands, printer.print_ssa_value)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list([v.type for v in self.operands], printer.print_attribute)

    def ptx(self) -> tuple[str, str]:
        return (
            "{\n.reg .pred done;\nwait:\n"
            "mbarrier.try_wait.parity.shared.b64 done, [$0], $1, $2;\n"
            "@!done bra.uni wait;\n}",
            "l,r,r",
        )


# --------------------------------------------------------------------------------------
# TMA
# --------------------------------------------------------------------------------------


@irdl_op_definition
class CpAsyncBulkTensorGlobalToSharedClusterOp(IntrinsicOp):
    """`nvvm.cp.async.bulk.tensor.shared.cluster.global %dst, %map, %bar, box[%x, ...]
    : !llvm.ptr<7>, !llvm.ptr`: the TMA load of the box at the coordinates
    (innermost first), completing its bytes on barrier `%bar`."""

    name = "nvvm.cp.async.bulk.tensor.shared.cluster.global"
    FEATURE: ClassVar[str] = "tma"

    dstMem = operand_def(LLVMPointerType)
    tmaDescriptor = operand_def(LLVMPointerType)
    mbar = operand_def(LLVMPointerType)
    coordinates = var_operand_def(i32)

    def __init__(self, dst, descriptor, mbar, coordinates: Sequence[SSAValue]):
        super().__init__(operands=[dst, descriptor, mbar, list(coordinates)])

    def intrinsic(self) -> str:
        return f"llvm.nvvm.cp.async.bulk.tensor.g2s.tile.{len(self.coordinates)}d"

    def call_operands(self) -> list[SSAValue]:
        return [self.dstMem, self.mbar, self.tmaDescriptor, *self.coordinates]

    def immediates(self) -> tuple:
        # no multicast mask, no cache hint, neither used, no CTA group
        return ((16, 0), (64, 0), (1, 0), (1, 0), (32, 0))

    @classmethod
    def parse(cls, parser: Parser) -> CpAsyncBulkTensorGlobalToSharedClusterOp:
        dst = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        descriptor = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        mbar = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        parser.parse_keyword("box")
        box = parser.parse_comma_separated_list(
            Parser.Delimiter.SQUARE, parser.parse_unresolved_operand
        )
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        dst_type = parser.parse_type()
        parser.parse_punctuation(",")
        descriptor_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(dst, dst_type),
            parser.resolve_operand(descriptor, descriptor_type),
            parser.resolve_operand(mbar, _SHARED),
            [parser.resolve_operand(b, i32) for b in box],
        )
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(
            (self.dstMem, self.tmaDescriptor, self.mbar), printer.print_ssa_value
        )
        printer.print_string(", box[")
        printer.print_list(self.coordinates, printer.print_ssa_value)
        printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_list(
            (self.dstMem.type, self.tmaDescriptor.type), printer.print_attribute
        )

    def verify_(self) -> None:
        if not 1 <= len(self.coordinates) <= 5:
            raise VerifyException(
                f"a TMA box has 1 to 5 coordinates, got {len(self.coordinates)}"
            )
        if self.dstMem.type != LLVMPointerType(IntAttr(7)):
            raise VerifyException("the destination is a !llvm.ptr<7> (shared::cluster)")
        if self.mbar.type != _SHARED:
            raise VerifyException("the barrier is a !llvm.ptr<3>")


# --------------------------------------------------------------------------------------
# wgmma
# --------------------------------------------------------------------------------------


@irdl_op_definition
class WgmmaFenceAlignedOp(IntrinsicOp):
    """`nvvm.wgmma.fence.aligned`: order register and shared-memory accesses before
    the `wgmma`s that follow."""

    name = "nvvm.wgmma.fence.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.fence.sync.aligned"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WgmmaGroupSyncAlignedOp(IntrinsicOp):
    """`nvvm.wgmma.commit.group.sync.aligned`: the `wgmma`s issued so far form a
    group."""

    name = "nvvm.wgmma.commit.group.sync.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.commit_group.sync.aligned"
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class WgmmaWaitGroupSyncOp(IntrinsicOp):
    """`nvvm.wgmma.wait.group.sync.aligned N`: wait until at most N groups of
    `wgmma` are in flight; their results are in registers then."""

    name = "nvvm.wgmma.wait.group.sync.aligned"
    FEATURE: ClassVar[str] = "wgmma"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.wgmma.wait_group.sync.aligned"

    group = prop_def(IntegerAttr)

    def __init__(self, group: int = 0):
        super().__init__(properties={"group": IntegerAttr(group, i64)})

    def immediates(self) -> tuple:
        return ((64, self.group.value.data),)

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaWaitGroupSyncOp:
        group = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = cls(group)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.group.value.data}")
        printer.print_op_attributes(self.attributes)


def accumulator_struct(n: int) -> LLVMStructType:
    """The registers of an m64nNk16 f32 accumulator: N/2 f32 a thread."""
    return LLVMStructType.from_type_list([Float32Type()] * (n // 2))


@irdl_op_definition
class WgmmaMmaAsyncOp(PtxOp):
    """`nvvm.wgmma.mma_async`: one `wgmma.mma_async.sync.aligned.m64nNk16.f32` of the
    warpgroup, A and B from shared memory through their 64-bit descriptors, D =
    A × B + C in each thread's N/2 registers (D = A × B with `D[<f32>, <zero>, ...]`,
    C's registers then unread)."""

    name = "nvvm.wgmma.mma_async"
    FEATURE: ClassVar[str] = "wgmma"

    descriptorA = operand_def(i64)
    descriptorB = operand_def(i64)
    inouts = operand_def(LLVMStructType)
    shape = prop_def(MMAShapeAttr)
    typeA = prop_def(WGMMATypeAttr)
    typeB = prop_def(WGMMATypeAttr)
    typeD = prop_def(WGMMATypeAttr)
    scaleD = prop_def(WGMMAScaleOutAttr)
    scaleA = prop_def(WGMMAScaleInAttr)
    scaleB = prop_def(WGMMAScaleInAttr)
    layoutA = prop_def(MMALayoutAttr)
    layoutB = prop_def(MMALayoutAttr)
    satfinite = opt_prop_def(MMAIntOverflowAttr)
    res = result_def(LLVMStructType)

    def __init__(
        self,
        a: SSAValue,
        b: SSAValue,
        c: SSAValue,
        n: int,
        operands: str,
        accumulate: bool = True,
    ):
        kind = WGMMATypeAttr(WGMMAType(operands))
        super().__init__(
            operands=[a, b, c],
            properties={
                "shape": MMAShapeAttr(64, n, 16),
                "typeA": kind,
                "typeB": kind,
                "typeD": WGMMATypeAttr(WGMMAType.F32),
                "scaleD": WGMMAScaleOutAttr(
                    WGMMAScaleOut.ONE if accumulate else WGMMAScaleOut.ZERO
                ),
                "scaleA": WGMMAScaleInAttr(WGMMAScaleIn.ONE),
                "scaleB": WGMMAScaleInAttr(WGMMAScaleIn.ONE),
                "layoutA": MMALayoutAttr(MMALayout.ROW),
                "layoutB": MMALayoutAttr(MMALayout.ROW),
                "satfinite": MMAIntOverflowAttr(MMAIntOverflow.WRAPPED),
            },
            result_types=[accumulator_struct(n)],
        )

    @property
    def n(self) -> int:
        return self.shape.n.data

    @property
    def accumulates(self) -> bool:
        return self.scaleD.data == WGMMAScaleOut.ONE

    @property
    def transposed_b(self) -> bool:
        """PTX's imm-trans-b: B is MN-major (MLIR's `row` B)."""
        return self.layoutB.data == MMALayout.ROW

    @classmethod
    def parse(cls, parser: Parser) -> WgmmaMmaAsyncOp:
        a = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        b = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        c = parser.parse_unresolved_operand()
        parser.parse_punctuation(",")
        pos = parser.pos
        m, n, k = (x.data for x in MMAShapeAttr.parse_parameters(parser))
        if not (8 <= n <= 256 and n % 8 == 0):
            parser.raise_error(
                f"a wgmma's N is one of 8, 16, ..., 256, got {n}", pos, parser.pos
            )

        def operand(letter: str, scale, third) -> tuple:
            parser.parse_punctuation(",")
            parser.parse_characters(letter)
            parser.parse_punctuation("[")
            kind = WGMMATypeAttr(WGMMATypeAttr.parse_parameter(parser))
            parser.parse_punctuation(",")
            s = scale(scale.parse_parameter(parser))
            parser.parse_punctuation(",")
            t = third(third.parse_parameter(parser))
            parser.parse_punctuation("]")
            return kind, s, t

        d = operand("D", WGMMAScaleOutAttr, MMAIntOverflowAttr)
        ta = operand("A", WGMMAScaleInAttr, MMALayoutAttr)
        tb = operand("B", WGMMAScaleInAttr, MMALayoutAttr)
        attributes = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        c_type = parser.parse_type()
        parser.parse_punctuation("->")
        result_type = parser.parse_type()
        op = cls(
            parser.resolve_operand(a, i64),
            parser.resolve_operand(b, i64),
            parser.resolve_operand(c, c_type),
            n,
            ta[0].data.value,
        )
        op.properties |= {
            "shape": MMAShapeAttr(m, n, k),
            "typeD": d[0], "scaleD": d[1], "satfinite": d[2],
            "typeA": ta[0], "scaleA": ta[1], "layoutA": ta[2],
            "typeB": tb[0], "scaleB": tb[1], "layoutB": tb[2],
        }  # fmt: skip
        op.results[0]._type = result_type  # pyright: ignore[reportAttributeAccessIssue]
        op.attributes |= attributes
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_list(
            (self.descriptorA, self.descriptorB, self.inouts), printer.print_ssa_value
        )
        printer.print_string(", ")
        self.shape.print_parameters(printer)
        for letter, kind, scale, third in (
            ("D", self.typeD, self.scaleD, self.satfinite),
            ("A", self.typeA, self.scaleA, self.layoutA),
            ("B", self.typeB, self.scaleB, self.layoutB),
        ):
            printer.print_string(f", {letter}[")
            for k, attr in enumerate((kind, scale, third)):
                if k:
                    printer.print_string(", ")
                attr.print_parameter(printer)  # pyright: ignore
            printer.print_string("]")
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.inouts.type)
        printer.print_string(" -> ")
        printer.print_attribute(self.res.type)

    def verify_(self) -> None:
        m, n, k = self.shape.mnk
        if (m, k) != (64, 16) or not (8 <= n <= 256 and n % 8 == 0):
            raise VerifyException(
                f"affinec's wgmma is m64nNk16 (N = 8, 16, ..., 256), got m{m}n{n}k{k}"
            )
        if self.typeA != self.typeB or self.typeA.data not in (
            WGMMAType.F16,
            WGMMAType.BF16,
        ):
            raise VerifyException("A and B are both f16 or both bf16")
        if self.typeD.data != WGMMAType.F32:
            raise VerifyException("D is f32")
        if self.scaleA.data != WGMMAScaleIn.ONE or self.scaleB.data != WGMMAScaleIn.ONE:
            raise VerifyException("negated operands are not supported")
        if self.layoutA.data != MMALayout.ROW:
            raise VerifyException("A is K-major (row)")
        expected = accumulator_struct(n)
        for what, t in (("C", self.inouts.type), ("D", self.res.type)):
            if t != expected:
                raise VerifyException(f"{what} is {expected}, got {t}")

    def ptx(self) -> tuple[str, str]:
        registers = self.n // 2
        d = ", ".join(f"${r}" for r in range(registers))
        kind = self.typeA.data.value
        scale_d = 1 if self.scaleD.data == WGMMAScaleOut.ONE else 0
        asm = (
            "{\n.reg .pred scale_d;\n"
            f"setp.ne.b32 scale_d, {scale_d}, 0;\n"
            f"wgmma.mma_async.sync.aligned.m64n{self.n}k16.f32.{kind}.{kind} "
            f"{{{d}}}, ${registers}, ${registers + 1}, scale_d, 1, 1, 0, "
            f"{int(self.transposed_b)};\n}}"
        )
        constraints = ",".join(
            ["=f"] * registers + ["l", "l"] + [str(r) for r in range(registers)]
        )
        return asm, constraints


HOPPER_NVVM_OPS: tuple[type[Operation], ...] = (
    MBarrierInitOp,
    FenceMBarrierInitOp,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierTryWaitParityOp,
    CpAsyncBulkTensorGlobalToSharedClusterOp,
    WgmmaFenceAlignedOp,
    WgmmaGroupSyncAlignedOp,
    WgmmaWaitGroupSyncOp,
    WgmmaMmaAsyncOp,
)
HOPPER_NVVM_ATTRIBUTES = (
    WGMMATypeAttr,
    WGMMAScaleInAttr,
    WGMMAScaleOutAttr,
    MMAIntOverflowAttr,
)
