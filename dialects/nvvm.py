"""An nvvm dialect named after MLIR's: NVIDIA's special registers and barriers.

Each op stands for one LLVM intrinsic, named in the op class's `INTRINSIC` (the emitter
calls it; nothing else needs to know):

    %tid = nvvm.read.ptx.sreg.tid.x : i32      // llvm.nvvm.read.ptx.sreg.tid.x
    nvvm.barrier0                              // llvm.nvvm.barrier.cta.sync.aligned.all(0)

Later levels add `mma.sync`, `ldmatrix` and `cp.async`.
"""

from __future__ import annotations

from typing import ClassVar

from xdsl.dialects.builtin import IntegerType, i32
from xdsl.ir import Dialect
from xdsl.irdl import IRDLOperation, irdl_op_definition, result_def


class SpecialRegisterOp(IRDLOperation):
    """`%r = nvvm.read.ptx.sreg.<name> : i32`: a PTX special register, as an i32."""

    INTRINSIC: ClassVar[str]
    UPPER_BOUND: ClassVar[int | None] = None
    """The register's values lie in `[0, upper_bound)` (LLVM knows it too).."""

    res = result_def(IntegerType)
    assembly_format = "attr-dict `:` type($res)"

    def __init__(self):
        super().__init__(result_types=[i32])


@irdl_op_definition
class BarrierOp(IRDLOperation):
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


KERNEL = "nvvm.kernel"
"""Unit attribute marking an `llvm.func` as a kernel entry point (MLIR's name)."""

MAXNTID = "nvvm.maxntid"
"""Attribute on a kernel `llvm.func`: the most threads per block it is launched with."""

MINCTASM = "nvvm.minctasm"
"""Integer attribute on a kernel `llvm.func`: the fewest blocks per multiprocessor
the kernel must allow (PTX `.minnctapersm`). With `.maxntid` alone ptxas may cap the
registers for an occupancy of its own choosing and spill a register tile; saying
one block is enough lets it keep the tile in registers."""

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


NVVM = Dialect(
    "nvvm",
    [
        BarrierOp,
        *SPECIAL_REGISTERS.values(),
        LaneIdOp,
        WarpSizeOp,
    ],
    [],
)
