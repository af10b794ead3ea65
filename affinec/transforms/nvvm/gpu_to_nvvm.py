"""gpu ops as nvvm: ids from special registers, `gpu.barrier` as `nvvm.barrier0`;
and the casts `convert-nvgpu-to-nvvm` leaves (a tensor map as the pointer to its
by-value parameter), which the kernel's own conversion makes exact."""

from __future__ import annotations

from xdsl.dialects import llvm
from xdsl.dialects.builtin import (
    UnitAttr,
    UnrealizedConversionCastOp,
)

from affinec.base.diagnostics import PassError
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


@converts(UnrealizedConversionCastOp)
def _cast(op: UnrealizedConversionCastOp, c: KernelConverter):
    """A cast to the type its operand converts to: the converted operand."""
    converted = [c.v(v) for v in op.inputs]
    if [v.type for v in converted] != [r.type for r in op.outputs]:
        raise PassError(
            op,
            "casts to other types than convert-gpu-to-nvvm gives its operands "
            f"({', '.join(str(v.type) for v in converted)})",
        )
    return converted
