"""The owner of a block's shared memory: padding, placement, capacity.

Producers state what they need — promotion and the tensor cores a tile's shape and
element type (the k padding an MMA reads is part of the shape), the staged output
its lifetime (`affinec.overlay`: it may take the bytes of buffers dead by then) —
and `plan_shared_memory` decides the rest for each grid band, in one place:

1. **bank padding**: each buffer's innermost dimension grows by what costs its
   accesses the fewest wavefronts (`bank_conflicts.best_padding`); asked to, a
   buffer read with a stride is first stored by phase where no padding helps
   (`phase_split`: a strided window's input tile);
2. **placement**: static buffers, or offsets in dynamic shared memory with the
   overlays on dead buffers (`affinec.ir.shared_memory_layout`), recorded on each
   alloc as `affinec.shared_offset`;
   a tile `wgmma` reads is instead laid out as `wgmma` reads it (8 x 8 core
   matrices: `wgmma_lowering_layout`), never padded nor split;
3. **capacity**: the padded, overlaid whole against the chip the IR is compiled
   for (`#nvvm.target`).

    %input_shared = memref.alloc() : memref<3x1x4x32x32xf16, 3 : i64>
    %filter_shared = memref.alloc() : memref<3x32x64xf16, 3 : i64>

becomes (past 48 KiB)

    %input_shared = memref.alloc() {affinec.shared_offset = 0 : i64}
        : memref<3x1x4x32x40xf16, 3 : i64>
    %filter_shared = memref.alloc() {affinec.shared_offset = 30720 : i64}
        : memref<3x32x72xf16, 3 : i64>
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntegerAttr, MemRefType, i64
from xdsl.ir import Operation

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import OVERLAY, SHARED_OFFSET
from affinec.dialects.nvvm_target import chip_of
from affinec.hardware.chips import Chip
from affinec.ir.shared_memory_layout import placed_layout, shared_overflow
from affinec.transforms.gpu import phase_split
from affinec.transforms.gpu.bands import analyze_grid, is_shared, reallocated_shared
from affinec.transforms.gpu.bank_conflicts import best_padding, shared_accesses
from affinec.transforms.gpu.wgmma_lowering_layout import (
    interleave_wgmma_tiles,
    pack_wgmma_tiles,
    wgmma_tiles,
)


def plan_shared_memory(
    grid: affine.ParallelOp, pad: bool = True, split_phases: bool = False
) -> None:
    """Store by phase (if `split_phases`), pad (if `pad`), place and check the
    shared buffers of `grid`'s blocks."""
    # wgmma's tiles take its layout, never padded nor split (its descriptors).
    interleave_wgmma_tiles(grid, pad=pad)
    if split_phases:
        split_phases_against_bank_conflicts(grid)
    if pad:
        pad_against_bank_conflicts(grid)
    target = chip_of(grid)
    allocs, offsets, total = _placed(grid, target)
    if shared_overflow(total, target) and pack_wgmma_tiles(grid):
        # the wgmma tiles' core matrices packed again: the padding does not fit
        allocs, offsets, total = _placed(grid, target)
    if why := shared_overflow(total, target, " once padded and placed"):
        raise PassError(grid, why)
    for alloc, offset in zip(allocs, offsets, strict=False):
        alloc.attributes[SHARED_OFFSET] = IntegerAttr(offset, i64)


def _placed(
    grid: affine.ParallelOp, target: Chip
) -> tuple[list[Operation], list[int], int]:
    """The grid's shared allocations, their offsets and the bytes they take."""
    allocs = shared_allocs(grid)
    types = [_type(a) for a in allocs]
    overlays = {k for k, a in enumerate(allocs) if OVERLAY in a.attributes}
    offsets, total = placed_layout(types, overlays, target)
    return allocs, offsets, total


def shared_allocs(grid: affine.ParallelOp) -> list[Operation]:
    """The grid band's shared buffers, in the order the launch will hold them."""
    return [a for a in analyze_grid(grid).allocs if is_shared(a.results[0])]


def _laid_out_here(grid: affine.ParallelOp) -> list[tuple[Operation, list]]:
    """Each shared buffer whose layout against bank conflicts is this planner's
    (wgmma's tiles take theirs from their descriptors), with its accesses as
    `best_padding` and `best_phase_split` take them."""
    accesses = shared_accesses(grid)
    fixed = wgmma_tiles(grid)
    return [
        (alloc, [(o, i, w) for o, b, i, w in accesses if b is alloc.results[0]])
        for alloc in shared_allocs(grid)
        if alloc.results[0] not in fixed
    ]


def split_phases_against_bank_conflicts(grid: affine.ParallelOp) -> None:
    """Store each shared buffer whose accesses stride over a dimension by phase,
    where that costs them fewer wavefronts than any padding (`phase_split`)."""
    for alloc, mine in _laid_out_here(grid):
        if choice := phase_split.best_phase_split(alloc.results[0], mine):
            phase_split.split_phases(alloc, *choice)


def pad_against_bank_conflicts(grid: affine.ParallelOp) -> None:
    """Grow each shared buffer's rows by the padding that costs its accesses the
    fewest wavefronts (in 16-byte steps where an access moves 16 bytes a lane, the
    smallest on ties). Nothing reads the padding."""
    work = []
    for alloc, mine in _laid_out_here(grid):
        if mine and (pad := best_padding(alloc.results[0], mine)):
            work.append((alloc, pad))
    for alloc, pad in work:
        *rows, last = _type(alloc).get_shape()
        new = reallocated_shared(alloc, [*rows, last + pad])
        alloc.results[0].replace_all_uses_with(new.memref)
        alloc.parent_block().erase_op(alloc)  # pyright: ignore


def _type(alloc: Operation) -> MemRefType:
    t = alloc.results[0].type
    assert isinstance(t, MemRefType)
    return t
