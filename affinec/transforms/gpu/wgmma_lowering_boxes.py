"""`affinec-wgmma` reading a box of pixels by descriptor: where the block's A tile
holds the block's output pixels in several dimensions (images x rows x columns of
a convolution, one tap at a time) it is still one 2-D tile for `wgmma`, its rows
the pixels row-major, K-major.

A convolution tiled one tap at a time (reduction tiles `(1, 1, C)`, the taps as
loops around the compute band) is promoted as, for each (tap, channel step), the
input at the tap's shifted origin over the block's pixel box, and the tap's C x N
filter tile:

    %input_shared = memref.alloc() : memref<2x1x8x8x64xf16, 3>     // stage, n, h, w, c
    %filter_shared = memref.alloc() : memref<2x1x1x64x64xf16, 3>   // stage, r, s, c, k
    affine.parallel (%n1, %oh1, %ow1, %k1) = (0, 0, 0, 0) to (1, 8, 8, 64) {
      affine.for %c1 = 0 to 64 {
        %a = affine.load %input_shared[%stage, %n1, %oh1, %ow1, %c1]
        %b = affine.load %filter_shared[%stage, 0, 0, %c1, %k1]
        ...

The band's M is its pixel dimensions row-major (`plan_mma`'s order, the
write-back's), so the tile whose pixel dimensions are the band's, in the band's
order and extents, is that M x C matrix row-major once its pixel dimensions are
merged into one. `box_reason` says whether a compute band reads so; `flatten_tiles`
merges them (`memref<2x64x64xf16, 3>`, each copy into the tile and access to it
indexed by the pixel's row `(n * 8 + h) * 8 + w`), and the filter tile's unit tap
dimensions likewise (`memref<2x64x64xf16, 3>`). The tiles are then a product's:
`affinec.warpgroup_mma` reads them by descriptor, the planner lays them out for
`wgmma` and `affinec-tma-copies` may load them by TMA boxes of the input
(`wgmma_tma_copies`).
"""

from __future__ import annotations

import math

from xdsl.dialects import memref
from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, nvgpu
from affinec.dialects.affinec_wgmma import WGMMA_ROWS, WGMMA_STEP
from affinec.ir.ranges import value_range
from affinec.transforms.affine.analysis import is_defined_inside
from affinec.transforms.gpu.bands import reallocated_shared
from affinec.transforms.gpu.mma_plan import ComputeBand, MmaPlan, Operand


def box_reason(plan: MmaPlan, c: ComputeBand) -> str | None:
    """Why the compute band `c` does not read A as a box of the block's pixels and
    B as one K x N tile (None when it does): then the block's A is one 2-D tile of
    `plan.block_m` rows, read by descriptor."""
    if c.taps:
        return "the band's reduction holds a filter's taps (more than one tap a step)"
    band = c.band
    ivs = band.op.induction_variables
    pixels = [d for d in range(len(ivs)) if d != plan.n_dim]
    for d in pixels:
        dim = band.dims[d]
        if dim.lower != 0 or dim.step != 1:
            return "the band's pixel dimensions do not run from 0 by 1"
    a = c.a
    if not a.k_contiguous or not a.channel_alone:
        return "A's tile does not hold the channels innermost, indexed alone"
    load = a.load
    results = list(load.map.data.results)
    shape = _shape(a.buffer)
    run = len(pixels) + 1
    if len(results) < run or a.channel_dim != len(results) - 1:
        return "A's tile has fewer dimensions than the band's pixels and channels"
    k = c.channel.induction_variable
    if results[-1] != _dim_of(load, k):
        return "A's channels are indexed otherwise than by the channel loop"
    for e, extent, d in zip(results[-run:-1], shape[-run:-1], pixels, strict=True):
        if e != _dim_of(load, ivs[d]) or extent != band.extents[d]:
            return (
                "A's tile is no box of the block's pixels: its pixel dimensions are "
                "not the band's, in the band's order and extents"
            )
    if _inside(load, results[:-run], band.op):
        return "A's tile is indexed along a leading dimension by the band"
    return _b_reason(plan, c)


def _b_reason(plan: MmaPlan, c: ComputeBand) -> str | None:
    b = c.b
    if b.k_contiguous:
        return None  # an N x K tile: checked as a product's
    load = b.load
    results = list(load.map.data.results)
    shape = _shape(b.buffer)
    n_iv = c.band.op.induction_variables[plan.n_dim]
    if results[-2:] != [
        _dim_of(load, c.channel.induction_variable),
        _dim_of(load, n_iv),
    ]:
        return "B's tile is not indexed by the channels and the columns, last"
    lead = _merged_run(results[:-2], shape[:-2])
    if _inside(load, results[: len(results) - 2 - lead], c.band.op):
        return "B's tile is indexed along a leading dimension by the band"
    return None


def _merged_run(results: list[AffineExpr], shape: list[int]) -> int:
    """How many of the last of `results` (dimensions before a tile's rows) are
    unit dimensions indexed by 0 (a tap of a filter tiled one tap at a time)."""
    count = 0
    for e, extent in zip(reversed(results), reversed(shape), strict=True):
        if extent != 1 or e != AffineExpr.constant(0):
            break
        count += 1
    return count


def _shape(v: SSAValue) -> list[int]:
    t = v.type
    assert isinstance(t, MemRefType)
    return list(t.get_shape())


def _dim_of(load: affine.LoadOp, iv: SSAValue) -> AffineExpr | None:
    if iv not in load.indices:
        return None
    return AffineExpr.dimension(list(load.indices).index(iv))


def _inside(load: affine.LoadOp, results: list[AffineExpr], band: Operation) -> bool:
    for e in results:
        for x in e.dfs():
            if isinstance(x, AffineDimExpr) and is_defined_inside(
                load.indices[x.position], band
            ):
                return True
    return False


def check_boxes(plan: MmaPlan, c: ComputeBand) -> None:
    """A `PassError` at the compute band where `box_reason` finds one."""
    reason = box_reason(plan, c)
    if reason is not None:
        raise PassError(c.band.op, f"wgmma reads A by descriptor: {reason}")
    r = value_range(c.channel.induction_variable)
    extent = plan.k_padded if r is None else r[1] + 1
    if extent % WGMMA_STEP or (r is not None and r[0] != 0):
        raise PassError(
            c.channel,
            f"the reduction step is K = {extent} from {r}: wgmma reads a multiple of "
            f"{WGMMA_STEP} channels from 0",
        )
    a, b = _shape(c.a.buffer), _shape(c.b.buffer)
    k_of_b, n_of_b = (b[-1], b[-2]) if c.b.k_contiguous else (b[-2], b[-1])
    if a[-1] != extent or k_of_b != extent or n_of_b != plan.block_n:
        raise PassError(
            c.band.op,
            f"the tiles hold {a[-1]} and {k_of_b} channels and {n_of_b} columns; the "
            f"block reads {extent} channels and {plan.block_n} columns",
        )


# -- rewriting ------------------------------------------------------------------------


def flatten_tiles(plan: MmaPlan) -> None:
    """Merge A's pixel dimensions and B's unit tap dimensions of every compute band
    into one (see the module), every access to the tiles rewritten; the plan's
    operands updated to the new tiles."""
    done: dict[SSAValue, SSAValue] = {}
    for c in plan.compute:
        pixels = len(c.band.op.induction_variables) - 1
        # the last warpgroup's rows past the block's pixels: never copied into,
        # never stored
        rows = -(-plan.block_m // WGMMA_ROWS) * WGMMA_ROWS
        _flatten(c.a, pixels, done, rows)
        if not c.b.k_contiguous:
            results = list(c.b.load.map.data.results)
            shape = _shape(c.b.buffer)
            _flatten(c.b, 1 + _merged_run(results[:-2], shape[:-2]), done)


def _flatten(
    operand: Operand,
    merged: int,
    done: dict[SSAValue, SSAValue],
    rows: int | None = None,
) -> None:
    """`operand`'s tile with the `merged` dimensions before its last made one (of
    `rows` rows where given, at least their elements)."""
    tile = operand.buffer
    if tile in done:
        operand.buffer = done[tile]
        operand.channel_dim = len(_shape(done[tile])) - 1
        return
    shape = _shape(tile)
    first = len(shape) - 1 - merged
    extents = shape[first:-1]
    rows = max(rows or 0, math.prod(extents))
    if merged <= 1 and rows == math.prod(extents):
        done[tile] = tile
        return
    alloc = tile.owner
    if not isinstance(alloc, memref.AllocOp):
        raise PassError(operand.load, "a tile wgmma reads must be a memref.alloc")
    users = [u.operation for u in tile.uses]
    for user in users:
        if not isinstance(user, (nvgpu.DeviceAsyncCopyOp, *_ACCESSES)):
            raise PassError(
                user,
                "uses a tile wgmma reads as a box of pixels: affinec-wgmma merges "
                "the pixels of asynchronous copies and affine accesses only",
            )
    new = reallocated_shared(alloc, [*shape[:first], rows, shape[-1]]).memref
    for user in users:
        if isinstance(user, nvgpu.DeviceAsyncCopyOp):
            _merge_copy(user, first, extents)
        else:
            _merge_access(user, first, extents)
    tile.replace_all_uses_with(new)
    alloc.parent_block().erase_op(alloc)  # pyright: ignore
    done[tile] = new
    operand.buffer = new
    operand.channel_dim = len(shape) - merged


_ACCESSES = (affine.LoadOp, affine.StoreOp)


def _linear(exprs: list[AffineExpr], extents: list[int]) -> AffineExpr:
    """The row-major position of `exprs` in a box of `extents`."""
    out: AffineExpr = AffineConstantExpr(0)
    for e, extent in zip(exprs, extents, strict=True):
        out = out * extent + e
    return out


def _merge_access(op: Operation, first: int, extents: list[int]) -> None:
    assert isinstance(op, _ACCESSES)
    m = op.map.data
    results = list(m.results)
    merged = _linear(results[first:-1], extents)
    new = (*results[:first], merged, results[-1])
    op.map = type(op.map)(AffineMap(m.num_dims, m.num_symbols, new))


def _merge_copy(op: nvgpu.DeviceAsyncCopyOp, first: int, extents: list[int]) -> None:
    indices = list(op.dstIndices)
    inner = indices[first:-1]
    dims = [AffineExpr.dimension(k) for k in range(len(inner))]
    row = affine.ApplyOp(inner, AffineMap(len(inner), 0, (_linear(dims, extents),)))
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(row, op)
    new = nvgpu.DeviceAsyncCopyOp(
        op.src,
        list(op.srcIndices),
        op.dst,
        [*indices[:first], row.result, indices[-1]],
        op.elements,
        op.srcElements,
        op.bypassL1 is not None,
    )
    new.attributes |= op.attributes
    new.location = op.location
    block.insert_op_before(new, op)
    op.results[0].replace_all_uses_with(new.results[0])
    block.erase_op(op)


__all__ = ["box_reason", "check_boxes", "flatten_tiles"]
