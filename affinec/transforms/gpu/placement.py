"""Where each buffer of a block lives: shared memory or the threads' own.

A buffer allocated at grid level exists once per block. It is *private* when every
access to it is indexed by exactly the induction variables of phases with the same
iteration space: then each element is only ever touched by the thread that owns that
iteration, whatever the distribution, so each thread can keep its elements to itself
(registers, once the thread mapping shrinks the buffer). Any other buffer is *shared*
by the block's threads: shared memory. The decision is written into the type, as
MLIR's GPU dialect writes it, memory space 5 (private) or 3 (workgroup):

    %acc = memref.alloc() : memref<1x4x8x8xf32>
        becomes  memref<1x4x8x8xf32, 5 : i64>   (indexed by the phases' own ivs)
    %tile = memref.alloc() : memref<4x10x10xf32>
        becomes  memref<4x10x10xf32, 3 : i64>   (read across iterations)

Buffers already in one of these spaces (a promotion's shared tiles) are kept.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineDimExpr

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import PaddedLoadOp
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.shared_memory_layout import shared_overflow
from affinec.transforms.gpu.bands import GridAnalysis, byte_size


def check_shared_capacity(grid: Operation, shared_bytes: int) -> None:
    """Refuse a block whose shared buffers exceed what its chip gives a block (the
    module's `#nvvm.target`): 227 KiB on sm_90, 163 KiB on sm_80, 99 KiB on sm_86 and
    sm_89. Past the static limit (48 KiB) it is dynamic shared memory, which the
    kernel opts into: `convert-gpu-to-nvvm` places the buffers there."""
    if why := shared_overflow(shared_bytes, chip_of(grid)):
        raise PassError(grid, why)


@dataclass
class Placement:
    """The memory space chosen for each unplaced grid-level buffer."""

    private: list[Operation]
    shared: list[Operation]


def plan_placement(analysis: GridAnalysis) -> Placement:
    """Classify the grid's unplaced buffers, and refuse a block whose shared buffers
    would not fit in shared memory."""
    placement = Placement([], [])
    shared_bytes = 0
    for alloc in analysis.allocs:
        space = gpu.memory_space(alloc.results[0].type)
        if space == gpu.WORKGROUP_ADDRESS_SPACE:
            shared_bytes += byte_size(alloc)
        elif space == 0:
            if _is_private(alloc.results[0], analysis):
                placement.private.append(alloc)
            else:
                placement.shared.append(alloc)
                shared_bytes += byte_size(alloc)
        elif space != gpu.PRIVATE_ADDRESS_SPACE:
            raise PassError(alloc, f"a block's buffer in memory space {space}")
    check_shared_capacity(analysis.grid.op, shared_bytes)
    return placement


def _is_private(buffer: SSAValue, analysis: GridAnalysis) -> bool:
    signatures: set[tuple] = set()
    for use in buffer.uses:
        op = use.operation
        if isinstance(op, memref.DeallocOp):
            continue
        if not isinstance(op, affine.LoadOp | affine.StoreOp | PaddedLoadOp):
            return False
        if op.memref is not buffer:
            return False
        phase = analysis.phase_of(op)
        if phase is None or phase.signature is None:
            return False
        m = op.map.data
        ivs = list(phase.op.induction_variables)
        if len(m.results) != len(ivs) or m.num_symbols:
            return False
        for expr, iv in zip(m.results, ivs, strict=True):
            if not (
                isinstance(expr, AffineDimExpr) and op.indices[expr.position] is iv
            ):
                return False
        signatures.add(phase.signature)
    return len(signatures) == 1


def place(placement: Placement) -> None:
    """Write the placement into the buffers' types."""
    for allocs, space in (
        (placement.private, gpu.PRIVATE_ADDRESS_SPACE),
        (placement.shared, gpu.WORKGROUP_ADDRESS_SPACE),
    ):
        for alloc in allocs:
            retype_alloc(alloc, space)


def retype_alloc(alloc: Operation, space: int) -> Operation:
    """Replace `alloc` by one in memory space `space`; the uses follow. Returns the
    new allocation."""
    t = alloc.results[0].type
    assert isinstance(t, MemRefType)
    new = alloc_before(alloc, gpu.in_memory_space(t, space))
    alloc.results[0].replace_all_uses_with(new.results[0])
    block = alloc.parent_block()
    assert block is not None
    block.erase_op(alloc)
    return new


def alloc_before(like: Operation, t: MemRefType) -> Operation:
    """An allocation of `t`, of the kind of `like` (alloc or alloca) and with its
    name, inserted right before it."""
    new = type(like).build(operands=[[], []], result_types=[t])
    new.results[0].name_hint = like.results[0].name_hint
    new.location = like.location
    block = like.parent_block()
    assert block is not None
    block.insert_op_before(new, like)
    return new
