"""gpu ops as nvvm: ids from special registers, `gpu.barrier` as `nvvm.barrier0`."""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    UnitAttr,
)

from affinec.dialects import gpu, nvvm
from affinec.transforms.nvvm.converter import KernelConverter, converts


@converts(gpu.ReturnOp)
def _return(op: gpu.ReturnOp, c: KernelConverter):
    c.emit(llvm.ReturnOp())
    return []


@converts(gpu.ThreadIdOp, gpu.BlockIdOp, gpu.BlockDimOp, gpu.GridDimOp)
def _id(op: gpu.ThreadIdOp, c: KernelConverter):
    kind = {
        gpu.ThreadIdOp: "thread_id",
        gpu.BlockIdOp: "block_id",
        gpu.BlockDimOp: "block_dim",
        gpu.GridDimOp: "grid_dim",
    }[type(op)]
    register = c.emit(nvvm.SPECIAL_REGISTERS[(kind, op.dim)]())
    assert register is not None
    if c.index_type.width.data == 32:
        return [register]
    return [c.emit(llvm.ZExtOp(register, c.index_type, non_neg=UnitAttr()))]


@converts(gpu.GlobalIdOp)
def _global_id(op: gpu.GlobalIdOp, c: KernelConverter):
    """block_id * block_dim + thread_id, as MLIR's lowering computes it."""
    ids = [
        _id(kind(op.dim), c)[0]  # pyright: ignore[reportIndexIssue]
        for kind in (gpu.BlockIdOp, gpu.BlockDimOp, gpu.ThreadIdOp)
    ]
    product = c.emit(llvm.MulOp(ids[0], ids[1]))
    return [c.emit(llvm.AddOp(product, ids[2]))]


@converts(gpu.BarrierOp)
def _barrier(op: gpu.BarrierOp, c: KernelConverter):
    c.emit(nvvm.BarrierOp())
    return []
