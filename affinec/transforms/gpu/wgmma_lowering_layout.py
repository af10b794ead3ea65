"""The shared tiles `wgmma` reads, laid out as it reads them: the planner's part of
`affinec-wgmma` (`affinec-plan-shared-memory` calls `interleave_wgmma_tiles`).

`wgmma` takes its operands from shared memory through 64-bit descriptors, which
describe tiles made of core matrices of 8 rows of 16 bytes. Without swizzle the
layout is affine: a tile of R x C 16-bit elements becomes `[R/8, C/8, 8, 8]`,
element (r, c) at `[r floordiv 8, c floordiv 8, r mod 8, c mod 8]`, that is at
byte

    (r floordiv 8) * (C/8) * 128 + (c floordiv 8) * 128 + (r mod 8) * 16 + (c mod 8) * 2

— K-major A (rows M, columns K) with a leading byte offset of 128 (the next 8 of
K) and a stride byte offset of C/8 * 128 (the next 8 rows), MN-major B (rows K,
columns N) with 128 between 8-column groups of N and C/8 * 128 between 8-row groups
of K. Every access to the tile is rewritten to match (the promotion's 16-byte
asynchronous copies each land in one core matrix's row, unchanged but for their
indices), and the tile's rows are not padded: that would break the core matrices. The
core matrices themselves may be: `[R/8, C/8, P, 8]` with P > 8 puts them P x 16
bytes apart (the descriptor's offsets follow), where the bank model finds the
copies into the tile cost fewer wavefronts so (16-byte copies of one row, one per
core matrix, all on the same four banks when packed).

    %A_shared = memref.alloc() : memref<2x64x32xf16, 3>
    nvgpu.device_async_copy %A[..], %A_shared[%s, %r, %c], 8 ...

becomes

    %A_shared = memref.alloc() : memref<2x8x4x8x8xf16, 3>
    %r8 = affine.apply affine_map<(d0) -> (d0 floordiv 8)>(%r)   (and c, r mod 8, c mod 8)
    nvgpu.device_async_copy %A[..], %A_shared[%s, %r8, %c8, %ri, %ci], 8 ...
"""

from __future__ import annotations

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, nvgpu
from affinec.dialects.affinec_wgmma import (
    CORE,
    WGMMA_STEP_OPS,
    WarpgroupMmaStepOp,
    interleaved_shape,
)
from affinec.transforms.gpu.bands import reallocated_shared
from affinec.transforms.gpu.bank_conflicts import evaluate, padded_cost, shared_accesses


def _read_tiles(op: Operation) -> list[tuple[SSAValue, int]]:
    """The shared tiles a `wgmma` step reads through descriptors, and the pitch of
    their core matrices (0: row-major), none for other ops (A from registers is
    read by `ldmatrix`: its tile is padded as `affinec-mma-sync`'s)."""
    if isinstance(op, WarpgroupMmaStepOp):
        return [(op.a, op.a_tile()[2]), (op.b, op.b_tile()[2])]
    if isinstance(op, WGMMA_STEP_OPS):
        return [(op.b, op.b_tile()[2])]
    return []


def wgmma_tiles(grid: Operation) -> set[SSAValue]:
    """The shared buffers `wgmma` steps read through descriptors in `grid`."""
    return {tile for op in grid.walk() for tile, _ in _read_tiles(op)}


def interleave_wgmma_tiles(grid: Operation, pad: bool = True) -> None:
    """Lay out each tile `wgmma` reads in `grid` in the interleaved layout (see the
    module), its accesses rewritten; with `pad`, its core matrices as far apart
    (16-byte rows) as costs the accesses to it the fewest wavefronts by the bank
    model. Tiles already so laid out are left alone."""
    steps = [op for op in grid.walk() if isinstance(op, WGMMA_STEP_OPS)]
    done: set[SSAValue] = set()
    for step in steps:
        for tile, pitch in _read_tiles(step):
            if tile in done or pitch:
                continue
            done.add(tile)
            new = _interleave(tile)
            if pad and (best := _best_pitch(grid, new)) != CORE:
                _retype(new, best)


def pack_wgmma_tiles(grid: Operation) -> bool:
    """Put the core matrices of every tile `wgmma` reads in `grid` back together
    (a pitch of 8 rows): where their padding leaves the block too little shared
    memory. Whether any tile changed."""
    changed = False
    pitches = {}
    for op in grid.walk():
        pitches.update(_read_tiles(op))
    for tile, pitch in pitches.items():
        if pitch > CORE:
            _retype(tile, CORE)
            changed = True
    return changed


def _best_pitch(grid: Operation, tile: SSAValue) -> int:
    """The pitch of the core matrices (8 to 15 rows of 16 bytes) that costs the
    accesses to `tile` the fewest wavefronts (its copies: `wgmma`'s own reads are
    not modelled), the smallest on ties."""
    accesses = [(o, i, w) for o, b, i, w in shared_accesses(grid) if b is tile]
    evaluated = evaluate(accesses)
    if not accesses or len(evaluated) < len(accesses):
        return CORE
    t = tile.type
    assert isinstance(t, MemRefType)
    *outer, _, _ = t.get_shape()
    best, best_cost = CORE, None
    for pitch in range(CORE, 2 * CORE):
        shape = [*outer, pitch, CORE]
        _, cost = padded_cost(tile, evaluated, shape, max_words=0)
        if best_cost is None or cost < best_cost:
            best, best_cost = pitch, cost
    return best


def _retype(tile: SSAValue, pitch: int) -> None:
    """The interleaved tile with its core matrices `pitch` rows apart (the indices
    stay: rows past the eighth are never touched)."""
    alloc = tile.owner
    t = tile.type
    assert isinstance(alloc, memref.AllocOp) and isinstance(t, MemRefType)
    *outer, _, last = t.get_shape()
    new = reallocated_shared(alloc, [*outer, pitch, last])
    tile.replace_all_uses_with(new.memref)
    alloc.parent_block().erase_op(alloc)  # pyright: ignore


def _interleave(tile: SSAValue) -> SSAValue:
    alloc = tile.owner
    t = tile.type
    if not isinstance(alloc, memref.AllocOp) or not isinstance(t, MemRefType):
        raise PassError(
            alloc if isinstance(alloc, Operation) else None,  # pyright: ignore
            "a tile wgmma reads must be a memref.alloc of the block",
        )
    *lead, rows, cols = t.get_shape()
    if rows % CORE or cols % CORE:
        raise PassError(
            alloc, f"a wgmma tile of {rows}x{cols}: both a multiple of {CORE}"
        )
    users = [u.operation for u in tile.uses]
    for user in users:
        _check_access(user, tile)
    new = reallocated_shared(alloc, [*lead, *interleaved_shape(rows, cols)])
    for user in users:
        if not isinstance(user, WGMMA_STEP_OPS):
            _rewrite(user)
    tile.replace_all_uses_with(new.memref)
    alloc.parent_block().erase_op(alloc)  # pyright: ignore
    return new.memref


_AFFINE_ACCESSES = (
    affine.LoadOp,
    affine.StoreOp,
    affine.VectorLoadOp,
    affine.VectorStoreOp,
)


def _check_access(op: Operation, tile: SSAValue) -> None:
    if isinstance(op, WGMMA_STEP_OPS):
        return
    if isinstance(op, nvgpu.DeviceAsyncCopyOp) and op.dst is tile:
        if op.elements > CORE:
            raise PassError(
                op,
                f"copies {op.elements} elements into a wgmma tile: at most {CORE} "
                "(one row of a core matrix)",
            )
        return
    if isinstance(op, _AFFINE_ACCESSES):
        vector = getattr(op, "result", None) or getattr(op, "value", None)
        shape = getattr(getattr(vector, "type", None), "get_shape", None)
        if shape is not None and len(shape()) and shape()[-1] > CORE:
            raise PassError(
                op, f"a vector of more than {CORE} elements across a wgmma tile's rows"
            )
        return
    raise PassError(
        op,
        "uses a tile wgmma reads: the planner lays such tiles out for wgmma and "
        "rewrites affine accesses and asynchronous copies into them only",
    )


def _rewrite(op: Operation) -> None:
    d0, d1 = AffineExpr.dimension(0), AffineExpr.dimension(1)
    parts = (d0 // CORE, d1 // CORE, d0 % CORE, d1 % CORE)
    if isinstance(op, nvgpu.DeviceAsyncCopyOp):
        *lead, r, c = op.dstIndices
        block = op.parent_block()
        assert block is not None
        applies = [affine.ApplyOp([r, c], AffineMap(2, 0, (p,))) for p in parts]
        for a in applies:
            block.insert_op_before(a, op)
        new = nvgpu.DeviceAsyncCopyOp(
            op.src,
            list(op.srcIndices),
            op.dst,
            [*lead, *(a.result for a in applies)],
            op.elements,
            op.srcElements,
            op.bypassL1 is not None,
        )
        new.attributes |= op.attributes
        block.insert_op_before(new, op)
        op.results[0].replace_all_uses_with(new.results[0])
        block.erase_op(op)
        return
    assert isinstance(op, _AFFINE_ACCESSES)
    m = op.map.data
    *lead, r, c = m.results
    inner = [p.replace_dims_and_symbols([r, c], []) for p in parts]
    op.map = type(op.map)(AffineMap(m.num_dims, m.num_symbols, (*lead, *inner)))


__all__ = ["interleave_wgmma_tiles", "pack_wgmma_tiles", "wgmma_tiles"]
