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
This module has the mbarriers and the TMA load, `nvvm_wgmma` the warpgroup MMA.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, IntegerAttr, StringAttr, i32, i64
from xdsl.dialects.llvm import LLVMPointerType
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import (
    irdl_op_definition,
    operand_def,
    prop_def,
    result_def,
    var_operand_def,
)
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from affinec.dialects.nvvm_intrinsics import IntrinsicOp, PtxOp, required_feature
from affinec.dialects.nvvm_wgmma import (
    MMAIntOverflowAttr,
    WgmmaFenceAlignedOp,
    WgmmaGroupSyncAlignedOp,
    WgmmaMmaAsyncOp,
    WGMMAScaleInAttr,
    WGMMAScaleOutAttr,
    WGMMATypeAttr,
    WgmmaWaitGroupSyncOp,
    accumulation_operands,
    accumulation_ptx,
    accumulation_run,
    accumulator_struct,
)

# --------------------------------------------------------------------------------------
# mbarriers
# --------------------------------------------------------------------------------------

_SHARED = LLVMPointerType(IntAttr(3))


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
    assembly_format = (
        "$addr `,` $phase `,` $ticks attr-dict `:` type($addr) `,` type($phase) `,` "
        "type($ticks)"
    )

    def __init__(self, addr: SSAValue, phase: SSAValue, ticks: SSAValue):
        super().__init__(operands=[addr, phase, ticks])

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
# registers
# --------------------------------------------------------------------------------------

SETMAXREGISTER_ACTIONS = ("increase", "decrease")


@irdl_op_definition
class SetMaxRegisterOp(IntrinsicOp):
    """`nvvm.setmaxregister increase 232` (or `decrease 40`): `setmaxnreg.inc` /
    `.dec.sync.aligned.u32`, every thread of the warpgroup at once: the warpgroup's
    threads each own this many registers from here on (a multiple of 8 from 24 to
    256). A loading warpgroup hands registers back to the multiplying ones."""

    name = "nvvm.setmaxregister"
    FEATURE: ClassVar[str] = "setmaxnreg"

    action = prop_def(StringAttr)
    regCount = prop_def(IntegerAttr)

    def __init__(self, action: str, count: int):
        super().__init__(
            properties={
                "action": StringAttr(action),
                "regCount": IntegerAttr(count, i32),
            }
        )

    @property
    def count(self) -> int:
        return self.regCount.value.data

    def intrinsic(self) -> str:
        verb = "inc" if self.action.data == "increase" else "dec"
        return f"llvm.nvvm.setmaxnreg.{verb}.sync.aligned.u32"

    def immediates(self) -> tuple:
        return (self.count,)

    def verify_(self) -> None:
        if self.action.data not in SETMAXREGISTER_ACTIONS:
            raise VerifyException(
                f"the action is increase or decrease, got '{self.action.data}'"
            )
        if not (24 <= self.count <= 256 and self.count % 8 == 0):
            raise VerifyException(
                f"the register count is a multiple of 8 from 24 to 256, got "
                f"{self.count}"
            )

    @classmethod
    def parse(cls, parser: Parser) -> SetMaxRegisterOp:
        at = parser.pos
        action = parser.parse_identifier()
        if action not in SETMAXREGISTER_ACTIONS:
            parser.raise_error("expected 'increase' or 'decrease'", at, parser.pos)
        count = parser.parse_integer(allow_boolean=False, allow_negative=False)
        op = cls(action, count)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.action.data} {self.count}")
        printer.print_op_attributes(self.attributes)


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
    SetMaxRegisterOp,
)
HOPPER_NVVM_ATTRIBUTES = (
    WGMMATypeAttr,
    WGMMAScaleInAttr,
    WGMMAScaleOutAttr,
    MMAIntOverflowAttr,
)

__all__ = [
    "HOPPER_NVVM_ATTRIBUTES",
    "HOPPER_NVVM_OPS",
    "CpAsyncBulkTensorGlobalToSharedClusterOp",
    "FenceMBarrierInitOp",
    "MBarrierArriveExpectTxOp",
    "MBarrierArriveOp",
    "MBarrierInitOp",
    "MBarrierTryWaitParityOp",
    "PtxOp",
    "SetMaxRegisterOp",
    "WgmmaFenceAlignedOp",
    "WgmmaGroupSyncAlignedOp",
    "WgmmaMmaAsyncOp",
    "WgmmaWaitGroupSyncOp",
    "accumulation_operands",
    "accumulation_ptx",
    "accumulation_run",
    "accumulator_struct",
    "required_feature",
]
