"""cf branches as llvm branches; a loop's back edge keeps `affinec.unroll`."""

from __future__ import annotations

from xdsl.dialects import cf, llvm
from xdsl.dialects.builtin import (
    UnitAttr,
)

from affinec.dialects.affinec import UNROLL
from affinec.transforms.nvvm.converter import KernelConverter, converts


@converts(cf.BranchOp)
def _br(op: cf.BranchOp, c: KernelConverter):
    br = llvm.BrOp(c.blocks[op.successor], *(c.v(a) for a in op.arguments))
    if UNROLL in op.attributes:
        br.attributes[UNROLL] = UnitAttr()
    c.emit(br)
    return []


@converts(cf.ConditionalBranchOp)
def _cond_br(op: cf.ConditionalBranchOp, c: KernelConverter):
    c.emit(
        llvm.CondBrOp(
            c.v(op.cond),
            c.blocks[op.then_block],
            [c.v(a) for a in op.then_arguments],
            c.blocks[op.else_block],
            [c.v(a) for a in op.else_arguments],
        )
    )
    return []
