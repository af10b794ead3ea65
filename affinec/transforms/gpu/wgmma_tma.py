"""`affinec-tma-copies`' rewrite: the promoted tiles `wgmma` reads loaded by TMA,
each pipeline stage completing on an mbarrier.

For a grid band whose `affinec.warpgroup_mma` steps read tiles the promotion
copies (`wgmma_tma_copies.tile_copy` proves each copy band is a TMA box):

- each tile is laid out in column slabs `[stage, C/T, R, T]` (`affinec_wgmma`),
  one TMA box of R rows and T columns a slab: T = 64 (32, 16) where the tile's
  rows are a multiple of 128 (64, 32) bytes, the slab swizzled with that span;
  T = 8 (16-byte rows, `wgmma`'s core matrices without swizzle) otherwise, or
  where element accesses touch the tile (a step cut short zeroes its columns past
  the channels: they see no swizzle);
- the host makes one tensor map per array and box (`nvgpu.tma.create.descriptor`,
  R x T, the slab's swizzle; a box of more dimensions, a convolution's pixels at a
  tap, its outer extents x T, with the box's element strides where it takes every
  s-th pixel: a stride-s convolution's, `traversal = [1, s, s, 1]`), which the
  kernel takes as a grid-constant parameter;
- the block makes one mbarrier per stage, initialized by one thread to one
  arrival per tile of a stage (`gpu.barrier` after, so every thread sees it);
- each copy band becomes one thread's `arrive.expect_tx` of the box's bytes on
  the stage's barrier and the box's TMA loads, one a slab (a block band of one
  iteration), a box of more than two dimensions into a `memref.reinterpret_cast`
  of the slab of its own shape (TMA's destination has the box's);
- each `warpgroup_mma` step waits, every thread, for its stage's barrier at the
  parity of the stage's use: `(g floordiv stages) mod 2` for the step `g` whose
  tiles the stage holds (`g mod stages`, as the pipelining wrote it);
- the copy groups and their waits go where no copy is left, and the stages are
  handed back on mbarriers instead of `gpu.barrier`s (`wgmma_tma_release`).

    affine.parallel (%one) = (0) to (1) {
      nvgpu.mbarrier.arrive.expect_tx %bar[%stage], %c4096
      nvgpu.tma.async.load %mapA[%col, %row], %bar[%stage] to %slab0 ...
    } {affinec.mapping = "block"}
    ...
    affine.parallel (%tx) = (0) to (128) {
      nvgpu.mbarrier.try_wait.parity %bar[%s], %parity, %ticks
    } {affinec.mapping = "thread"}
    affine.parallel (%tx) = (0) to (128) {
      affinec.warpgroup_mma %fragments, %A_shared[%s, %row], %B_shared[%s] ...
    } {affinec.mapping = "thread"}

`check_phases` then runs the block's program trip by trip and refuses a wait on
a parity other than its stage's last load's, a load onto a stage not yet waited
for or not handed back, and a load never waited for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    StridedLayoutAttr,
    StringAttr,
    UnrankedMemRefType,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineBinaryOpExpr, AffineBinaryOpKind, AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, GRID, MAPPING, THREAD, mapping_of
from affinec.dialects.affinec_wgmma import (
    CORE,
    WarpgroupMmaRegistersOp,
    WarpgroupMmaStepOp,
)
from affinec.dialects.memref import CastOp
from affinec.ir.ranges import value_range
from affinec.transforms.gpu.bands import reallocated_shared
from affinec.transforms.gpu.mma_fragments import Builder
from affinec.transforms.gpu.thread_bands import new_thread_band
from affinec.transforms.gpu.wgmma_tma_copies import TileCopy, copy_bands, tile_copy
from affinec.transforms.gpu.wgmma_tma_release import release_stages

TICKS = 10_000_000
"""The suspend-time hint of each `try_wait` (the hardware's, in nanoseconds)."""


def tma_grid(grid: affine.ParallelOp) -> list[TileCopy] | None:
    """The tile copies of `grid` TMA takes over (proven), or None when `grid` has
    no `wgmma` step reading copied tiles."""
    for op in grid.walk():
        if isinstance(op, WarpgroupMmaRegistersOp):
            raise PassError(
                op,
                "TMA loads the tiles wgmma reads by descriptor; this step reads A "
                "from registers (a convolution's taps): its tiles keep the "
                "promotion's cp.async copies (leave out tma)",
            )
    tiles = {
        v
        for op in grid.walk()
        if isinstance(op, WarpgroupMmaStepOp)
        for v in (op.a, op.b)
    }
    if not tiles:
        return None
    bands = copy_bands(grid, tiles)
    if not bands:
        return None
    copies = [tile_copy(b) for b in bands]
    return copies


def rewrite_tma(
    grid: affine.ParallelOp,
    copies: list[TileCopy],
    swizzle: bool = True,
    in_flight: bool = False,
) -> None:
    """Rewrite `grid` as the module says (in place); without `swizzle`, every tile
    in unswizzled slabs of 8 columns; with `in_flight`, each step's MMAs left in
    flight until the next step (`wgmma_tma_release`)."""
    steps = [op for op in grid.walk() if isinstance(op, WarpgroupMmaStepOp)]
    tiles = list(dict.fromkeys(c.tile for c in copies))
    stages = _stages(copies, steps)
    threads = _threads(steps[0])
    per_stage = _copies_per_stage(copies, tiles)
    bar, init = _barriers(grid, stages, per_stage)
    widths = {t: _slab_width(t, copies, swizzle) for t in tiles}
    maps: dict[tuple[SSAValue, tuple[int, ...], int, tuple[int, ...]], SSAValue] = {}
    for c in copies:
        key = (c.source, c.box[:-1], widths[c.tile], c.strides)
        if key not in maps:
            maps[key] = _tensor_map(grid, c, widths[c.tile])
    slabs = {t: _slab_tile(t, widths[t]) for t in tiles}
    for c in copies:
        key = (c.source, c.box[:-1], widths[c.tile], c.strides)
        _load(c, slabs[c.tile], bar, maps[key], widths[c.tile])
    for t in tiles:
        for use in list(t.uses):
            if not isinstance(use.operation, WarpgroupMmaStepOp):
                _to_slabs(use.operation)
    for step in steps:
        _wait(step, bar, stages, threads, set(tiles))
    for t in tiles:
        t.replace_all_uses_with(slabs[t])
        alloc = t.owner
        assert isinstance(alloc, Operation)
        alloc.parent_block().erase_op(alloc)  # pyright: ignore
    if not any(isinstance(o, nvgpu.DeviceAsyncCopyOp) for o in grid.walk()):
        _drop_copy_groups(grid)
        release_stages(
            grid,
            bar,
            init,
            stages,
            threads,
            lambda stage, at: _load_step(stage, at, stages),
            in_flight,
        )


def _load_step(
    stage: SSAValue, at: Operation, stages: int
) -> tuple[AffineMap, list[SSAValue]]:
    """The step whose tiles a load into stage index `stage` brings: the trip of the
    loop around it with one stage, the constant of a prologue's stage, or `g` of
    the pipelined loop's `g mod stages`."""
    if stages == 1:
        return _trip(at)
    v = _through_identity(stage)
    owner = v.owner
    if isinstance(owner, affine.ApplyOp) and not owner.mapOperands:
        return owner.map.data, []
    return _step_number(v, stages, at)


def _stages(copies: list[TileCopy], steps: list[WarpgroupMmaStepOp]) -> int:
    """The stages of the tiles: their leading dimension (1 without one)."""
    counts = set()
    for c in copies:
        t = c.tile.type
        assert isinstance(t, MemRefType)
        shape = t.get_shape()
        counts.add(shape[0] if len(shape) == 3 else 1)
    if len(counts) != 1:
        raise PassError(steps[0], "the tiles wgmma reads have different stages")
    return counts.pop()


def _threads(step: WarpgroupMmaStepOp) -> int:
    band = step.parent_op()
    if not (isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD):
        raise PassError(step, "a wgmma step outside a thread band")
    (extent,) = _constant_extents(band)
    return extent


def _constant_extents(band: affine.ParallelOp) -> list[int]:
    m = band.upperBoundsMap.data
    return [e.eval([], []) if not e.used_dims() else -1 for e in m.results]


def _copies_per_stage(copies: list[TileCopy], tiles: list[SSAValue]) -> int:
    """Arrivals a stage's phase takes: one per tile (each copied once a stage)."""
    for t in tiles:
        if sum(1 for c in copies if c.tile is t) == 0:
            raise PassError(t.owner, "a tile wgmma reads that is never copied")  # pyright: ignore
    return len(tiles)


def _barriers(
    grid: affine.ParallelOp, stages: int, arrivals: int
) -> tuple[SSAValue, Operation]:
    """The block's barrier group, initialized by thread 0, then a `gpu.barrier`."""
    body = grid.body.block
    first = next(
        o for o in body.ops if not isinstance(o, memref.AllocOp | memref.AllocaOp)
    )
    create = nvgpu.MBarrierCreateOp(nvgpu.MBarrierGroupType(stages))
    create.barriers.name_hint = "stage_barriers"
    body.insert_op_before(create, first)
    then = _one_thread(first)
    init = then.block.parent_op()
    assert init is not None
    count = then.add(arith.ConstantOp(IntegerAttr(arrivals, IndexType())))
    for s in range(stages):
        index = then.add(arith.ConstantOp(IntegerAttr(s, IndexType())))
        then.add(nvgpu.MBarrierInitOp(create.barriers, index.result, count.result))  # pyright: ignore
    then.close()
    body.insert_op_before(gpu.BarrierOp(), first)
    return create.barriers, init


def _one_thread(before: Operation) -> Builder:
    """A block band of one iteration before `before` (one thread runs it, once
    `affinec-map-threads` has shared the block's bands out), as a builder of its
    body."""
    body = Block(arg_types=[IndexType()])
    body.args[0].name_hint = "one"
    band = affine.ParallelOp.from_extents([1], body)
    band.attributes[MAPPING] = StringAttr(BLOCK)
    band.location = before.location
    before.parent_block().insert_op_before(band, before)  # pyright: ignore
    return Builder(body)


def _slab_width(tile: SSAValue, copies: list[TileCopy], swizzle: bool) -> int:
    """The columns of the tile's slabs: as many as 128 (64, 32) bytes hold where
    its columns are a multiple of them, the slabs swizzled with that span; 8 (16
    bytes, no swizzle) where `swizzle` is off or something but its copies and the
    `wgmma` steps touches the tile (an element access sees no swizzle)."""
    t = tile.type
    assert isinstance(t, MemRefType)
    cols = t.get_shape()[-1]
    copying = {c.copy for c in copies}
    others = [
        u.operation
        for u in tile.uses
        if u.operation not in copying
        and not isinstance(u.operation, WarpgroupMmaStepOp)
    ]
    if swizzle and not others:
        for span in (128, 64, 32):
            if cols * 2 % span == 0:
                return span // 2
    return CORE


def _tensor_map(grid: affine.ParallelOp, c: TileCopy, width: int) -> SSAValue:
    """The host's tensor map of `c`'s array, boxes of a slab (the box's outer
    extents x `width`, swizzled past 8 columns), made before `grid`."""
    outer = list(c.box[:-1])
    t = c.source.type
    assert isinstance(t, MemRefType)
    if c.source.owner is not None and grid.is_ancestor(c.source.owner):  # pyright: ignore
        raise PassError(c.copy, "the matrix TMA loads must be defined outside the grid")
    element = t.get_element_type()
    box = gpu.in_memory_space(
        MemRefType(element, [*outer, width]), gpu.WORKGROUP_ADDRESS_SPACE
    )
    span = width * 2
    kind = nvgpu.TensorMapDescriptorType(
        box,
        swizzle=f"swizzle_{span}b" if width > CORE else "none",
        traversal=c.strides,
    )
    block = grid.parent_block()
    assert block is not None
    cast = CastOp(
        operands=[c.source], result_types=[UnrankedMemRefType.from_type(element)]
    )
    sizes = [arith.ConstantOp(IntegerAttr(n, IndexType())) for n in (*outer, width)]
    create = nvgpu.TmaCreateDescriptorOp(cast.dest, [s.result for s in sizes], kind)
    name = c.source.name_hint or "matrix"
    create.tensorMap.name_hint = f"{name}_map"
    for op in (cast, *sizes, create):
        op.location = grid.location
        block.insert_op_before(op, grid)
    return create.tensorMap


def _slab_tile(tile: SSAValue, width: int) -> SSAValue:
    t = tile.type
    alloc = tile.owner
    assert isinstance(t, MemRefType) and isinstance(alloc, Operation)
    *lead, rows, cols = t.get_shape()
    return reallocated_shared(alloc, [*lead, cols // width, rows, width]).memref


def _load(
    c: TileCopy,
    slabs: SSAValue,
    bar: SSAValue,
    tensor_map: SSAValue,
    width: int,
) -> None:
    """`c`'s band replaced by thread 0's expect_tx and TMA loads, one per slab."""
    then = _one_thread(c.band)
    rows, cols = c.shape
    stage = c.stage
    if stage is None:
        stage = then.add(arith.ConstantOp(IntegerAttr(0, IndexType()))).results[0]
    size = then.add(arith.ConstantOp(IntegerAttr(c.bytes, IndexType())))
    then.add(nvgpu.MBarrierArriveExpectTxOp(bar, stage, size.results[0]))
    *outer, col = (then.add(affine.ApplyOp(xs, m)).results[0] for m, xs in c.origin)
    t = slabs.type
    assert isinstance(t, MemRefType)
    lead = [c.stage] if c.stage is not None else []
    for j in range(cols // width):
        x = then.apply(AffineExpr.dimension(0) + j * width, [col])
        if len(c.box) > 2:
            view = _box_view(then, slabs, lead, j, (*c.box[:-1], width))
        else:
            view = _slab_view(slabs, lead, j, rows, width)
        then.add(view)
        # TMA's coordinates go innermost first
        coordinates = [x, *reversed(outer)]
        then.add(nvgpu.TmaAsyncLoadOp(tensor_map, coordinates, bar, stage, view.result))
    then.close()
    c.band.parent_block().erase_op(c.band)  # pyright: ignore


def _slab_view(
    slabs: SSAValue, lead: Sequence[SSAValue], j: int, rows: int, width: int
) -> memref.SubviewOp:
    """Slab `j` (R x `width`, contiguous) of the tile's stage `lead`."""
    t = slabs.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    dynamic = bool(lead)
    offset = j * rows * width
    layout = StridedLayoutAttr([width, 1], None if dynamic else offset)
    result = MemRefType(t.get_element_type(), [rows, width], layout, t.memory_space)
    offsets: list[SSAValue | int] = [*lead, j, 0, 0]
    sizes = [*[1] * (len(shape) - 2), rows, width]
    return memref.SubviewOp.get(slabs, offsets, sizes, [1] * len(shape), result)


def _box_view(
    b: Builder,
    slabs: SSAValue,
    lead: Sequence[SSAValue],
    j: int,
    box: tuple[int, ...],
) -> memref.ReinterpretCastOp:
    """Slab `j` of the tile's stage `lead` seen as the box TMA lands there (its
    dimensions row-major, the slab's rows their outer ones): a box of more than
    two dimensions (a convolution's pixels at a tap) must land in a view of its
    own shape."""
    t = slabs.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    slab = math.prod(shape[-2:])
    if lead:
        (stage,) = lead
        at = b.apply(AffineExpr.dimension(0) * (slab * shape[1]) + j * slab, [stage])
        offset: SSAValue | int = at
        layout_offset = None
    else:
        offset = layout_offset = j * slab
    strides = [math.prod(box[k + 1 :]) for k in range(len(box))]
    layout = StridedLayoutAttr(strides, layout_offset)
    result = MemRefType(t.get_element_type(), list(box), layout, t.memory_space)
    return memref.ReinterpretCastOp.from_dynamic(
        slabs, [offset], list(box), strides, result
    )


def _wait(
    step: WarpgroupMmaStepOp,
    bar: SSAValue,
    stages: int,
    threads: int,
    tiles: set[SSAValue],
) -> None:
    """Every thread waits for the stage of `step` to land, before the step and
    whatever else touches the tiles since the copies' wait (a step cut short zeroes
    the tile's columns past its channels)."""
    lead_a = list(step.a_indices)[:-1]
    lead_b = list(step.b_indices)
    if stages > 1 and (
        len(lead_a) != 1 or len(lead_b) != 1 or not _same(lead_a[0], lead_b[0])
    ):
        raise PassError(step, "wgmma reads A and B of different stages")
    band = step.parent_op()
    assert isinstance(band, affine.ParallelOp)
    at = _wait_point(band, tiles)
    waiting, body = new_thread_band(threads, step)
    at.parent_block().insert_op_before(waiting, at)  # pyright: ignore
    ops: list[Operation] = []
    if stages > 1:
        stage = _through_identity(lead_a[0])
        g_map, g_operands = _step_number(stage, stages, step)
    else:
        g_map, g_operands = _trip(step)
        zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
        ops.append(zero)
        stage = zero.result
    for v in (stage, *g_operands):
        owner = v.owner
        if isinstance(owner, Operation) and not _before(owner, waiting):
            raise PassError(step, "the stage wgmma reads is computed after its wait")
    (g,) = g_map.results
    parity = affine.ApplyOp(
        g_operands, AffineMap(g_map.num_dims, g_map.num_symbols, ((g // stages) % 2,))
    )
    one = arith.ConstantOp(IntegerAttr(1, IndexType()))
    odd = arith.CmpiOp(parity.result, one.result, "eq")
    ticks = arith.ConstantOp(IntegerAttr(TICKS, IndexType()))
    wait = nvgpu.MBarrierTryWaitParityOp(bar, stage, odd.result, ticks.result)
    ops += [parity, one, odd, ticks, wait, affine.YieldOp()]
    for op in ops:
        op.location = step.location
        body.add_op(op)


def _wait_point(band: Operation, tiles: set[SSAValue]) -> Operation:
    """The first op before `band`, since the copies' wait (or the block's start),
    that touches one of `tiles`; `band` if none does."""
    at = band
    op = band.prev_op
    while op is not None and not isinstance(op, nvgpu.DeviceAsyncWaitOp):
        if any(v in tiles for o in op.walk() for v in o.operands):
            at = op
        op = op.prev_op
    return at


def _before(op: Operation, point: Operation) -> bool:
    """Whether `op` comes before `point` (so its results are there)."""
    block = point.parent_block()
    while op.parent_block() is not block:
        parent = op.parent_op()
        if parent is None:
            return True  # outside the block's region: defined above it
        op = parent
    o = point.prev_op
    while o is not None:
        if o is op:
            return True
        o = o.prev_op
    return False


_ACCESSES = (affine.LoadOp, affine.StoreOp)


def _to_slabs(op: Operation) -> None:
    """An access to a tile (other than the `wgmma` step) rewritten to its column
    slabs: (.., r, c) at (.., c floordiv 8, r, c mod 8)."""
    if not isinstance(op, _ACCESSES):
        raise PassError(
            op,
            "uses a tile TMA loads: affinec-tma-copies rewrites element loads and "
            "stores of such tiles only",
        )
    m = op.map.data
    *lead, r, c = m.results
    inner = (c // CORE, r, c % CORE)
    op.map = type(op.map)(AffineMap(m.num_dims, m.num_symbols, (*lead, *inner)))


def _same(a: SSAValue, b: SSAValue) -> bool:
    """The same value, or identity applies of it."""
    return _through_identity(a) is _through_identity(b)


def _through_identity(v: SSAValue) -> SSAValue:
    while isinstance(v.owner, affine.ApplyOp):
        op = v.owner
        if op.map.data != AffineMap.identity(1) or len(op.mapOperands) != 1:
            break
        v = op.mapOperands[0]
    return v


def _step_number(
    stage: SSAValue, stages: int, at: Operation
) -> tuple[AffineMap, list[SSAValue]]:
    """`g` where the stage index is `g mod stages` (as the pipelining computes it)."""
    v = _through_identity(stage)
    op = v.owner
    if isinstance(op, affine.ApplyOp):
        (e,) = op.map.data.results
        if (
            isinstance(e, AffineBinaryOpExpr)
            and e.kind == AffineBinaryOpKind.Mod
            and e.rhs == AffineExpr.constant(stages)
        ):
            m = op.map.data
            return AffineMap(m.num_dims, m.num_symbols, (e.lhs,)), list(op.mapOperands)
    raise PassError(
        at,
        f"the stage wgmma reads is no step modulo {stages}: the phase of its "
        "barrier is unknown",
    )


def _trip(step: Operation) -> tuple[AffineMap, list[SSAValue]]:
    """One stage: the trip of the loops around `step` (in the grid band, outermost
    first, row-major: a convolution's taps) is the step's number."""
    loops = []
    op = step.parent_op()
    while op is not None and not (
        isinstance(op, affine.ParallelOp) and mapping_of(op) == GRID
    ):
        if isinstance(op, affine.ForOp):
            loops.append(op)
        op = op.parent_op()
    loops.reverse()
    g: AffineExpr = AffineExpr.constant(0)
    for k, loop in enumerate(loops):
        lower = loop.lowerBoundMap.data
        if lower.num_dims or lower.num_symbols:
            raise PassError(loop, "the reduction loop must start at a constant")
        (lo,) = lower.results
        step_value = loop.step.value.data
        if k:  # the trips of an inner loop count the outer one's
            r = value_range(loop.induction_variable)
            if r is None:
                raise PassError(
                    loop,
                    "a loop around the reduction's steps of no constant trip count: "
                    "one stage's phases are unknown",
                )
            g = g * ((r[1] - r[0]) // step_value + 1)
        g = g + (AffineExpr.dimension(k) - lo) // step_value
    return AffineMap(len(loops), 0, (g,)), [lp.body.block.args[0] for lp in loops]


def _drop_copy_groups(grid: affine.ParallelOp) -> None:
    for op in list(grid.walk()):
        if isinstance(op, nvgpu.DeviceAsyncWaitOp):
            op.parent_block().erase_op(op)  # pyright: ignore
    for op in list(grid.walk()):
        if isinstance(op, nvgpu.DeviceAsyncCreateGroupOp) and not op.results[0].uses:
            op.parent_block().erase_op(op)  # pyright: ignore


__all__ = ["rewrite_tma", "tma_grid"]
