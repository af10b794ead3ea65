"""Copying what a block band reads into a buffer of the block (shared memory).

For each memref a compute band reads (and nothing in the grid band writes), the
footprint of its accesses within the band (`footprint.py`) becomes a buffer of the
grid level in memory space 3, filled right before the band by a block-mapped copy
band over the footprint, every element read with `affinec.padded_load` (so the
padding of a convolution arrives as zeros, and the part of a partial tile's box that
falls outside the tensor reads zero instead of faulting); the band then reads the
buffer at `index - origin`:

    affine.for %c0 = 0 to 2 {
      affine.parallel (%ow1, %k1) = (0, 0) to (8, 16) {
        %a = affinec.padded_load %input[%ow0 * 8 + %ow1 - 1, %c0 * 4 + %c1]
        ...

becomes

    %input_shared = memref.alloc() : memref<8x4xf32, 3 : i64>
    affine.for %c0 = 0 to 2 {
      affine.parallel (%f0, %f1) = (0, 0) to (8, 4) {
        %v = affinec.padded_load %input[%ow0 * 8 - 1 + %f0, %c0 * 4 + %f1]
        affine.store %v, %input_shared[%f0, %f1]
      } {affinec.mapping = "block"}
      affine.parallel (%ow1, %k1) = (0, 0) to (8, 16) {
        %a = affine.load %input_shared[%ow1, %c1]
        ...

Barriers between the copy and the band come later (`affinec-insert-barriers`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, func
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, StringAttr
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import (
    BLOCK,
    GRID,
    IN_BOUNDS,
    MAPPING,
    PaddedLoadOp,
    mapping_of,
)
from affinec.ir.affine_exprs import ge0, linear_form
from affinec.transforms.affine.footprint import Footprint, NoFootprint, footprint


@dataclass
class CopyPlan:
    """The copies one compute band needs, in the grid band `grid`."""

    grid: affine.ParallelOp
    band: affine.ParallelOp
    footprints: list[Footprint]
    orders: list[tuple[int, ...]]
    """For each footprint, the source dimension each dimension of the buffer holds
    (the identity, or the reduction's channel dimension moved innermost)."""

    def buffer_types(self) -> list[MemRefType]:
        return [
            gpu.in_memory_space(
                MemRefType(f.element_type, [f.extents[d] for d in order]),
                gpu.WORKGROUP_ADDRESS_SPACE,
            )
            for f, order in zip(self.footprints, self.orders, strict=True)
        ]


def plan_copies(
    grid: affine.ParallelOp,
    memrefs: Sequence[str],
    capacity: int,
    reduction_innermost: bool = False,
) -> list[CopyPlan]:
    """The copies for the compute bands of `grid` (block bands with a loop inside):
    every function argument they read that the grid band never writes, or only those
    named in `memrefs`. With `reduction_innermost`, each buffer keeps the
    reduction's channel dimension innermost (see `channel_order`). Refuses a
    footprint that is not a box, and buffers over `capacity` bytes per block."""
    written = {op.memref for op in grid.walk() if isinstance(op, affine.StoreOp)} | {
        op.operands[1] for op in grid.walk() if op.name == "memref.store"
    }
    plans: list[CopyPlan] = []
    for band in grid.walk():
        if not (
            isinstance(band, affine.ParallelOp)
            and mapping_of(band) == BLOCK
            and any(isinstance(o, affine.ForOp) for o in band.walk())
        ):
            continue
        reads: dict[SSAValue, list[affine.AffineLoadBase]] = {}
        for op in band.walk():
            if isinstance(op, affine.AffineLoadBase) and _is_argument(op.memref):
                reads.setdefault(op.memref, []).append(op)
        footprints = []
        for memref, accesses in reads.items():
            name = memref.name_hint or ""
            if (memrefs and name not in memrefs) or memref in written:
                continue
            try:
                footprints.append(footprint(memref, accesses, band))
            except NoFootprint as e:
                raise PassError(
                    band, f"cannot copy %{name} into shared memory: {e}"
                ) from None
        if footprints:
            orders = [tuple(range(len(f.extents))) for f in footprints]
            if reduction_innermost:
                orders = channel_order(band, footprints)
            plans.append(CopyPlan(grid, band, footprints, orders))
    _check_capacity(grid, plans, capacity)
    return plans


def channel_order(
    band: affine.ParallelOp, footprints: list[Footprint]
) -> list[tuple[int, ...]]:
    """Orders that put the reduction's *channel* dimension innermost in every buffer
    whose innermost is neither it nor an output dimension: the channel dimension is
    the one each footprint indexes by one reduction loop's variable alone (`c` in a
    convolution's input and filter, `p` in a matrix product; the filter taps `r`,
    `s` index the input together with the output pixels, so they do not qualify). A
    tensor-core MMA reads 16-byte rows along its k, or along N for the filter
    (`ldmatrix` transposed): an NHWC input and an RSCK filter keep their order (their
    rows can then be copied 16 bytes at a time), an NCHW input or a KCRS filter get
    their channels innermost. Without such a loop (the channel loop
    of one iteration was folded away) the buffers keep the source's order."""
    loops = {
        o.induction_variable: o for o in band.walk() if isinstance(o, affine.ForOp)
    }
    candidates: list[SSAValue] | None = None
    dims_of: list[dict[SSAValue, int]] = []
    for f in footprints:
        alone: dict[SSAValue, int] = {}
        for d in range(len(f.extents)):
            ivs = set()
            for op, offsets in f.offsets:
                e = offsets.results[d]
                if isinstance(e, AffineDimExpr) and op.indices[e.position] in loops:
                    ivs.add(op.indices[e.position])
                else:
                    ivs.add(None)
            if len(ivs) == 1 and (iv := ivs.pop()) is not None:
                alone[iv] = d
        dims_of.append(alone)
        found = [iv for iv in loops if iv in alone]
        candidates = (
            found if candidates is None else [v for v in candidates if v in found]
        )
    if not candidates:
        return [tuple(range(len(f.extents))) for f in footprints]
    channel = candidates[-1]  # the innermost such loop
    band_ivs = set(band.induction_variables)
    orders = []
    for f, alone in zip(footprints, dims_of, strict=True):
        d = alone[channel]
        last = len(f.extents) - 1
        if d == last or (
            _band_alone(f, last, band_ivs) and len(_band_ivs_read(f, band_ivs)) == 1
        ):
            # Rows along the channels, or along the output channels of a tile that
            # reads no pixel (a filter, read transposed): keep the tensor's order,
            # whose rows can be copied whole.
            orders.append(tuple(range(len(f.extents))))
        else:
            orders.append((*(k for k in range(len(f.extents)) if k != d), d))
    return orders


def _band_ivs_read(f: Footprint, band_ivs: set[SSAValue]) -> set[SSAValue]:
    """The band variables the footprint's accesses read (the filter reads one: the
    output channel; an input reads the pixels)."""
    return {
        v
        for op, offsets in f.offsets
        for e in offsets.results
        for d in e.used_dims()
        if (v := op.indices[d]) in band_ivs
    }


def _band_alone(f: Footprint, dim: int, band_ivs: set[SSAValue]) -> bool:
    """Whether every access of the footprint indexes `dim` by one band variable."""
    return all(
        isinstance(e := offsets.results[dim], AffineDimExpr)
        and op.indices[e.position] in band_ivs
        for op, offsets in f.offsets
    )


def _is_argument(value: SSAValue) -> bool:
    return isinstance(value, BlockArgument) and isinstance(
        value.owner.parent_op(), func.FuncOp
    )


def _buffers_needed(plans: list[CopyPlan]) -> list[MemRefType]:
    """One buffer per (memref, type): bands run one after the other, so a buffer is
    free again when the next band's copy starts."""
    seen: list[tuple[SSAValue, MemRefType]] = []
    for plan in plans:
        for f, t in zip(plan.footprints, plan.buffer_types(), strict=True):
            if (f.memref, t) not in seen:
                seen.append((f.memref, t))
    return [t for _, t in seen]


def _check_capacity(grid: Operation, plans: list[CopyPlan], capacity: int) -> None:
    need = sum(
        _elements(t) * element_size(t.get_element_type())
        for t in _buffers_needed(plans)
    )
    if need > capacity:
        raise PassError(
            grid,
            f"the block's copies need {need} bytes of shared memory, more than the "
            f"{capacity} bytes available (fast-mem-capacity)",
        )


def _elements(t: MemRefType) -> int:
    n = 1
    for s in t.get_shape():
        n *= s
    return n


def generate_copies(plans: list[CopyPlan], dma: bool = False) -> None:
    """Allocate the buffers, insert the copy bands, redirect the accesses. With
    `dma`, footprints that allow it are copied up to 16 bytes at a time with
    asynchronous copies (`_dma_band`), closed by one group and a wait before the compute band."""
    buffers: dict[tuple[SSAValue, MemRefType], SSAValue] = {}
    for plan in plans:
        assert mapping_of(plan.grid) == GRID
        block = plan.band.parent_block()
        assert block is not None
        asynchronous = False
        for f, t, order in zip(
            plan.footprints, plan.buffer_types(), plan.orders, strict=True
        ):
            key = (f.memref, t)
            if key not in buffers:
                buffers[key] = _allocate(plan.grid, f.memref, t)
            buffer = buffers[key]
            width = dma_width(f, order) if dma else 0
            if width:
                block.insert_op_before(_dma_band(f, buffer, width), plan.band)
                asynchronous = True
            else:
                block.insert_op_before(_copy_band(f, buffer, order), plan.band)
            for op, offsets in f.offsets:
                permuted = AffineMap(
                    offsets.num_dims,
                    offsets.num_symbols,
                    tuple(offsets.results[d] for d in order),
                )
                _redirect(op, buffer, permuted)
        if asynchronous:
            group = nvgpu.DeviceAsyncCreateGroupOp([])
            wait = nvgpu.DeviceAsyncWaitOp(group.asyncToken, 0)
            block.insert_ops_before([group, wait], plan.band)


DMA_BYTES = (16, 8, 4)
"""What one asynchronous copy can move (`cp.async`), widest first."""


def dma_width(f: Footprint, order: tuple[int, ...]) -> int:
    """Elements one asynchronous copy moves for this footprint (16 bytes' worth, else
    8 or 4), or 0 when its rows cannot be copied so: the innermost dimension must
    stay innermost in the buffer, its extent and the tensor's be a multiple of the
    chunk, and its origin a multiple too, whatever the grid and tile variables (so
    every chunk starts aligned and is wholly inside or outside the tensor)."""
    t = f.memref.type
    assert isinstance(t, MemRefType)
    last = len(f.extents) - 1
    if order[-1] != last or f.stride(last) != 1:
        return 0
    form = linear_form(f.origin[last], len(f.outer), 0)
    if form is None:
        return 0
    size = element_size(t.get_element_type())
    for chunk in DMA_BYTES:
        width = chunk // size
        if width < 1 or f.extents[last] % width or t.get_shape()[-1] % width:
            continue
        if any(c % width for c in (*form[0], form[2])):
            continue
        return width
    return 0


def known_inside(f: Footprint) -> frozenset[int]:
    """The dynamic dimensions of the footprint's tensor along which every access
    it covers is known to be inside (an `affine.load`, or a padded load listing the
    dimension `in_bounds`): so is their bounding box, and the copy tests nothing
    there (it could not: a kernel is not told a dynamic size)."""
    t = f.memref.type
    assert isinstance(t, MemRefType)
    inside = {k for k, size in enumerate(t.get_shape()) if size < 0}
    for op, _ in f.offsets:
        if isinstance(op, PaddedLoadOp):
            inside &= op.in_bounds
    return frozenset(inside)


def _dma_band(f: Footprint, buffer: SSAValue, width: int) -> affine.ParallelOp:
    """A block band over the footprint's `width`-element chunks, each copied by one
    `nvgpu.device_async_copy`: a chunk outside the tensor (padding, a partial
    tile's box) copies zero source elements, which fills it with zeros, from a
    source index clamped into the tensor."""
    t = f.memref.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    rank = len(f.extents)
    extents = [*f.extents[:-1], f.extents[-1] // width]
    body = Block(arg_types=[IndexType()] * rank)
    n = len(f.outer)
    dims = [AffineExpr.dimension(n + k) for k in range(rank)]
    dims[-1] = dims[-1] * width
    operands = [*f.outer, *body.args]
    ops: list[Operation] = []
    source, clamped = [], []
    inside = known_inside(f)
    _refuse_unknown_sizes(f, shape, inside)
    for k, (o, size) in enumerate(zip(f.origin, shape, strict=True)):
        at = o + dims[k] * f.stride(k)
        index = affine.ApplyOp(operands, AffineMap(n + rank, 0, (at,)))
        ops.append(index)
        source.append(index.result)
        if k in inside:
            clamped.append(index.result)
            continue
        top = size - (width if k == rank - 1 else 1)
        low = affine.MaxOp(
            [index.result],
            AffineMap(1, 0, (AffineExpr.dimension(0), AffineExpr.constant(0))),
        )
        high = affine.MinOp(
            [low.result],
            AffineMap(1, 0, (AffineExpr.dimension(0), AffineExpr.constant(top))),
        )
        ops += [low, high]
        clamped.append(high.result)
    inside = AffineSet(
        rank,
        0,
        tuple(
            c
            for k, size in enumerate(shape)
            if k not in inside
            for c in (
                ge0(AffineExpr.dimension(k)),
                ge0(AffineExpr.constant(size - 1) - AffineExpr.dimension(k)),
            )
        ),
    )
    full = arith.ConstantOp(IntegerAttr(width, IndexType()))
    none = arith.ConstantOp(IntegerAttr(0, IndexType()))
    count = affine.IfOp(
        inside,
        source,
        Block([affine.YieldOp(full.result)]),
        Block([affine.YieldOp(none.result)]),
        result_types=[IndexType()],
    )
    ops += [full, none, count]
    chunk = AffineMap(
        rank,
        0,
        tuple(
            AffineExpr.dimension(k) * (width if k == rank - 1 else 1)
            for k in range(rank)
        ),
    )
    destination = [
        affine.ApplyOp(list(body.args), AffineMap(rank, 0, (e,))) for e in chunk.results
    ]
    ops += destination
    copy = nvgpu.DeviceAsyncCopyOp(
        f.memref,
        clamped,
        buffer,
        [d.result for d in destination],
        width,
        count.results[0],
    )
    body.add_ops([*ops, copy, affine.YieldOp()])
    band = affine.ParallelOp.from_extents(extents, body)
    band.attributes[MAPPING] = StringAttr(BLOCK)
    return band


def _refuse_unknown_sizes(f: Footprint, shape, inside: frozenset[int]) -> None:
    for k, size in enumerate(shape):
        if size < 0 and k not in inside:
            op = f.offsets[0][0]
            raise PassError(
                op,
                f"cannot copy the footprint of %{f.memref.name_hint or 'a buffer'}: "
                f"dimension {k} of {f.memref.type} has a dynamic size, and not every "
                "access is known to lie inside it (a padded load without "
                f"{IN_BOUNDS} = [{k}])",
            )


def _allocate(grid: affine.ParallelOp, memref: SSAValue, t: MemRefType) -> SSAValue:
    from xdsl.dialects import memref as memref_dialect

    alloc = memref_dialect.AllocOp([], [], t)
    alloc.memref.name_hint = f"{memref.name_hint or 'buffer'}_shared"
    body = grid.body.block
    first = body.first_op
    assert first is not None
    body.insert_op_before(alloc, first)
    return alloc.memref


def _copy_band(
    f: Footprint, buffer: SSAValue, order: tuple[int, ...]
) -> affine.ParallelOp:
    """A block band over the footprint in the source's order (consecutive
    iterations read consecutive elements of the tensor), storing each element at
    its place in the buffer's `order`."""
    rank = len(f.extents)
    body = Block(arg_types=[IndexType()] * rank)
    n = len(f.outer)
    src_map = AffineMap(
        n + rank,
        0,
        tuple(
            o + AffineExpr.dimension(n + k) * f.stride(k)
            for k, o in enumerate(f.origin)
        ),
    )
    inside = known_inside(f)
    t = f.memref.type
    assert isinstance(t, MemRefType)
    _refuse_unknown_sizes(f, t.get_shape(), inside)
    load = PaddedLoadOp(f.memref, [*f.outer, *body.args], src_map, sorted(inside))
    load.result.name_hint = f.memref.name_hint
    store = affine.StoreOp(load.result, buffer, [body.args[d] for d in order])
    body.add_ops([load, store, affine.YieldOp()])
    band = affine.ParallelOp.from_extents(list(f.extents), body)
    band.attributes[MAPPING] = StringAttr(BLOCK)
    return band


def _redirect(op: affine.AffineLoadBase, buffer: SSAValue, offsets: AffineMap) -> None:
    new = affine.LoadOp(buffer, list(op.indices), offsets)
    new.result.name_hint = op.result.name_hint
    new.location = op.location
    block = op.parent_block()
    assert block is not None
    block.insert_op_before(new, op)
    op.result.replace_all_uses_with(new.result)
    block.erase_op(op)
