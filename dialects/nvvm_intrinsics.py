"""The base of affinec's nvvm ops and the simplest of them: `IntrinsicOp` (an op that
is one call of an LLVM intrinsic), `PtxOp` (an op written as inline PTX, where LLVM
has no intrinsic), `required_feature` (what a chip must have for an op), the PTX
special registers
(`nvvm.read.ptx.sreg.tid.x`, ... with the bounds of their values) and `nvvm.barrier0`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntegerType, i32
from xdsl.ir import Attribute, Operation, SSAValue
from xdsl.irdl import IRDLOperation, irdl_op_definition, result_def


class IntrinsicOp(IRDLOperation):
    """An op that is one call of an LLVM intrinsic: the operands, then `immediates()`
    as i32 constants; the op's one result (if any) is the call's."""

    INTRINSIC: ClassVar[str]
    INTRINSIC_ARGS: ClassVar[tuple[int, ...]] = ()
    RESULT: ClassVar[Attribute | None] = None
    """What the intrinsic returns when the op has no result (the op drops it)."""

    def intrinsic(self) -> str:
        """The name of the intrinsic this op calls."""
        return self.INTRINSIC

    def call_operands(self) -> Sequence[SSAValue]:
        """The call's arguments before the immediates: the operands, in order."""
        return self.operands

    def immediates(self) -> tuple[int | tuple[int, int], ...]:
        """Constant arguments after the operands: i32s, or (bits, value) pairs."""
        return self.INTRINSIC_ARGS


class SpecialRegisterOp(IntrinsicOp):
    """`%r = nvvm.read.ptx.sreg.<name> : i32`: a PTX special register, as an i32."""

    INTRINSIC: ClassVar[str]
    UPPER_BOUND: ClassVar[int | None] = None
    """The register's values lie in `[0, upper_bound)` (LLVM knows it too).."""

    res = result_def(IntegerType)
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class BarrierOp(IntrinsicOp):
    """`nvvm.barrier0`: `bar.sync 0`, CUDA's `__syncthreads()`."""

    name = "nvvm.barrier0"
    INTRINSIC: ClassVar[str] = "llvm.nvvm.barrier.cta.sync.aligned.all"
    INTRINSIC_ARGS: ClassVar[tuple[int, ...]] = (0,)
    """Constant i32 arguments the intrinsic takes: barrier 0."""

    assembly_format = "attr-dict"


def _sreg(register: str, bound: int | None) -> type[SpecialRegisterOp]:
    name = f"nvvm.read.ptx.sreg.{register}"

    class Op(SpecialRegisterOp):
        INTRINSIC: ClassVar[str] = f"llvm.{name}"
        UPPER_BOUND: ClassVar[int | None] = bound

    Op.name = name  # pyright: ignore[reportAttributeAccessIssue]
    Op.__name__ = Op.__qualname__ = (
        "".join(p.capitalize() for p in register.split(".")) + "Op"
    )
    Op.__doc__ = f"`%r = {name} : i32`."
    return irdl_op_definition(Op)


_MAX_BLOCK = 1024
_MAX_GRID = (1 << 31) - 1

ThreadIdXOp = _sreg("tid.x", _MAX_BLOCK)
ThreadIdYOp = _sreg("tid.y", _MAX_BLOCK)
ThreadIdZOp = _sreg("tid.z", 64)
BlockDimXOp = _sreg("ntid.x", _MAX_BLOCK + 1)
BlockDimYOp = _sreg("ntid.y", _MAX_BLOCK + 1)
BlockDimZOp = _sreg("ntid.z", 65)
BlockIdXOp = _sreg("ctaid.x", _MAX_GRID)
BlockIdYOp = _sreg("ctaid.y", 65535)
BlockIdZOp = _sreg("ctaid.z", 65535)
GridDimXOp = _sreg("nctaid.x", _MAX_GRID + 1)
GridDimYOp = _sreg("nctaid.y", 65536)
GridDimZOp = _sreg("nctaid.z", 65536)
LaneIdOp = _sreg("laneid", 32)
WarpSizeOp = _sreg("warpsize", 33)

SPECIAL_REGISTERS: dict[tuple[str, str], type[SpecialRegisterOp]] = {
    ("thread_id", "x"): ThreadIdXOp,
    ("thread_id", "y"): ThreadIdYOp,
    ("thread_id", "z"): ThreadIdZOp,
    ("block_dim", "x"): BlockDimXOp,
    ("block_dim", "y"): BlockDimYOp,
    ("block_dim", "z"): BlockDimZOp,
    ("block_id", "x"): BlockIdXOp,
    ("block_id", "y"): BlockIdYOp,
    ("block_id", "z"): BlockIdZOp,
    ("grid_dim", "x"): GridDimXOp,
    ("grid_dim", "y"): GridDimYOp,
    ("grid_dim", "z"): GridDimZOp,
}
"""The register behind each gpu id/size op, by (gpu op kind, dimension)."""


def required_feature(op: Operation) -> str | None:
    """The chip feature (`affinec.hardware.chips`) an op's instruction needs, if any: LLVM
    stops the whole process on an intrinsic its target lacks, so the lowering and
    the emitter ask first."""
    return getattr(type(op), "FEATURE", None)


class PtxOp(IRDLOperation):
    """An op written as inline PTX: `ptx()` gives the assembly and the constraints;
    the operands are the assembly's inputs in order (a struct's members one by
    one), the result (a struct, or none) its outputs."""

    def ptx(self) -> tuple[str, str]:
        raise NotImplementedError
