"""A thread-mapped grid band as a `gpu.launch`: mechanical, deciding nothing.

Every decision is already in the IR: the grid band's extents are the grid, the thread
bands' size is the block, memory spaces say which buffers are shared (3) and which
are each thread's own (5), and barriers are where `affinec-insert-barriers` put them.
The conversion only re-spells them:

- the grid's induction variables come from `blockIdx.x` (the band linearized);
- the body moves into the launch, which every thread of the block runs;
- a thread band's induction variable is `threadIdx.x` (delinearized for a band of
  several dimensions), its body inlined where it stood;
- shared buffers become workgroup attributions of the launch, private ones
  `memref.alloca` (one per thread), as do other buffers allocated in the body.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    i64,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import (
    OVERLAY,
    SHARED_OFFSET,
    SHARED_OFFSETS,
    THREAD,
    mapping_of,
)
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.shared_memory_layout import layout_bytes
from affinec.transforms.gpu.bands import (
    Band,
    GridAnalysis,
    band_ivs,
    is_shared,
    require_placed,
)
from affinec.transforms.gpu.placement import check_shared_capacity
from affinec.transforms.gpu.thread_bands import erase_op

PASS = "affinec-convert-parallel-to-gpu"


def block_size(analysis: GridAnalysis) -> int:
    """The block size the thread bands agree on; refuses a grid not ready to convert."""
    require_placed(analysis, PASS)
    most = chip_of(analysis.grid.op).max_threads_per_block
    sizes: set[int] = set()
    for phase in analysis.phases:
        if mapping_of(phase.op) != THREAD:
            raise PassError(
                phase.op,
                f"a block-mapped band: run affinec-map-threads before {PASS}",
            )
        if any(d.extent == 0 for d in phase.dims):
            raise PassError(
                phase.op,
                f"a thread band of no iteration: a block has 1 to {most} threads",
            )
        if any(d.lower != 0 or d.step != 1 or d.guards for d in phase.dims):
            raise PassError(
                phase.op, "a thread band must run from 0 with step 1 to a constant"
            )
        sizes.add(phase.total)
    if len(sizes) > 1:
        raise PassError(
            analysis.grid.op,
            f"its thread bands have different sizes ({sorted(sizes)}): every band of "
            "a block must have one iteration per thread",
        )
    threads = sizes.pop() if sizes else 1
    if not 0 < threads <= most:
        raise PassError(
            analysis.grid.op,
            f"{threads} threads per block (between 1 and {most})",
        )
    shared = [a for a in analysis.allocs if is_shared(a.results[0])]
    offsets = _shared_offsets(analysis.grid.op, shared)
    # planned: what the planner's layout takes (an overlay on a dead buffer's bytes)
    taken = layout_bytes([a.results[0].type for a in shared], offsets)  # pyright: ignore[reportArgumentType]
    check_shared_capacity(analysis.grid.op, taken)
    return threads


def _shared_offsets(grid: Operation, shared: list[Operation]) -> list[int]:
    """The planned offsets of the block's shared buffers (`SHARED_OFFSET`): all of
    them, or none (static shared memory, or not planned)."""
    offsets = [a.attributes.get(SHARED_OFFSET) for a in shared]
    if all(o is None for o in offsets):
        return []
    if any(not isinstance(o, IntegerAttr) for o in offsets):
        raise PassError(
            grid,
            f"some of the block's shared buffers have a {SHARED_OFFSET} and some do "
            "not: plan them all (affinec-plan-shared-memory) or none",
        )
    return [o.value.data for o in offsets]  # pyright: ignore[reportOptionalMemberAccess]


def build_launch(analysis: GridAnalysis, threads: int) -> gpu.LaunchOp:
    """Rewrite the grid band into a `gpu.launch` of `threads` threads (in place)."""
    grid = analysis.grid
    grid_op = grid.op
    host = grid_op.parent_block()
    assert host is not None
    sizes: list[Operation] = []
    one = _constant(1, sizes)
    grid_size = (
        _runtime_grid_size(grid, sizes)
        if grid.runtime_sized
        else _constant(grid.total, sizes)
    )
    block_size_value = _constant(threads, sizes)
    host.insert_ops_before(sizes, grid_op)

    shared = [a for a in analysis.allocs if is_shared(a.results[0])]
    body = Block(
        arg_types=[*gpu.LaunchOp.body_arg_types(), *(a.results[0].type for a in shared)]
    )
    launch = gpu.LaunchOp(
        [grid_size, one, one],
        [block_size_value, one, one],
        Region(body),
        workgroup_count=len(shared),
    )
    overlays = [k for k, a in enumerate(shared) if OVERLAY in a.attributes]
    if overlays:
        launch.attributes[OVERLAY] = DenseArrayBase.from_list(i64, overlays)
    if offsets := _shared_offsets(grid_op, shared):
        launch.attributes[SHARED_OFFSETS] = DenseArrayBase.from_list(i64, offsets)
    host.insert_op_before(launch, grid_op)
    block_id, thread_id = body.args[0], body.args[3]
    block_id.name_hint, thread_id.name_hint = "bx", "tx"

    prologue: list[Operation] = []
    ivs = band_ivs(grid, block_id, None, grid.total, prologue)
    body.add_ops(prologue)
    for old, new in zip(grid_op.induction_variables, ivs, strict=True):
        old.replace_all_uses_with(new)
    for op in list(grid_op.body.block.ops):
        if isinstance(op, affine.YieldOp):
            erase_op(op)
            continue
        op.detach()
        body.add_op(op)

    for alloc, arg in zip(shared, body.args[12:], strict=True):
        arg.name_hint = alloc.results[0].name_hint
        _drop_deallocs(alloc.results[0])
        alloc.results[0].replace_all_uses_with(arg)
        erase_op(alloc)
    for phase in analysis.phases:
        _inline_thread_band(phase.op, thread_id)
    for op in list(body.walk()):
        if isinstance(op, memref.AllocOp | memref.AllocaOp):
            _to_alloca(op)
    body.add_op(gpu.TerminatorOp())
    erase_op(grid_op)
    return launch


def _inline_thread_band(band: affine.ParallelOp, thread_id: SSAValue) -> None:
    """Replace a thread band by its body, its induction variables from `thread_id`."""
    block = band.parent_block()
    assert block is not None
    ivs = list(band.induction_variables)
    if len(ivs) == 1:
        ivs[0].replace_all_uses_with(thread_id)
    else:
        upper = band.upperBoundsMap.data
        extents = [r.eval([], []) for r in upper.results]
        for k, iv in enumerate(ivs):
            stride = math.prod(extents[k + 1 :])
            e = AffineExpr.dimension(0)
            e = e if stride == 1 else e // stride
            if k > 0:
                e = e % extents[k]
            apply = affine.ApplyOp([thread_id], AffineMap(1, 0, (e,)))
            apply.result.name_hint = iv.name_hint
            block.insert_op_before(apply, band)
            iv.replace_all_uses_with(apply.result)
    for op in list(band.body.block.ops):
        if isinstance(op, affine.YieldOp):
            continue
        op.detach()
        block.insert_op_before(op, band)
    erase_op(band)


def _runtime_grid_size(grid: Band, out: list[Operation]) -> SSAValue:
    """The number of blocks of a grid whose outermost trip count is known at run
    time: `ceildiv(bound, step) * (the other dimensions' blocks)`, on the host."""
    outer = grid.dims[0]
    assert outer.runtime_upper is not None
    others = math.prod(d.extent for d in grid.dims[1:])
    trips = outer.runtime_upper
    if outer.step > 1:
        trips = trips.ceil_div(outer.step)
    blocks = trips * others if others > 1 else trips
    operands = list(grid.op.upper_bound_operands)
    apply = affine.ApplyOp(operands, AffineMap(len(operands), 0, (blocks,)))
    apply.result.name_hint = "blocks"
    out.append(apply)
    return apply.result


def _constant(value: int, out: list[Operation]) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, IndexType()))
    out.append(c)
    return c.result


def _to_alloca(op: memref.AllocOp | memref.AllocaOp) -> None:
    """A thread's own buffer: an alloca without a memory space."""
    t = op.memref.type
    assert isinstance(t, MemRefType)
    if isinstance(op, memref.AllocaOp) and gpu.memory_space(t) == 0:
        return
    alloca = memref.AllocaOp.get(t.get_element_type(), shape=t.get_shape())
    alloca.memref.name_hint = op.memref.name_hint
    op.parent_block().insert_op_before(alloca, op)  # pyright: ignore
    _drop_deallocs(op.memref)
    op.memref.replace_all_uses_with(alloca.memref)
    erase_op(op)


def _drop_deallocs(buffer: SSAValue) -> None:
    for use in list(buffer.uses):
        if isinstance(use.operation, memref.DeallocOp):
            erase_op(use.operation)
