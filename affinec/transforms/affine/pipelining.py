"""Software pipelining of a grid band's copies: the next tiles' copies in flight while
the block computes on this one.

After `affine-data-copy-generate{generate-dma}` the reduction's tile loops hold, per
tile, the copies into the shared buffers, one group of asynchronous copies and a
wait, then the compute band:

    affine.for %r0 = 0 to 3 { affine.for %c0 = 0 to 2 {
      <copies of tile (%r0, %c0)>
      %g = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g {numGroups = 0 : i32}
      <compute on the tile>
    } }

With `S` stages the buffers get a leading dimension of `S`, the tile loops become one
loop over the tiles `%t` (their variables delinearized from it), and the copies run
`S - 1` tiles ahead, each tile's copies a group of their own:

    <copies of tiles 0 .. S-2 into stages 0 .. S-2, a group each>
    affine.for %t = 0 to 6 {
      affine.if (%t + S - 1 < 6) { <copies of tile %t + S - 1 into its stage> }
      %g = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g {numGroups = S - 1 : i32}   // tile %t has landed
      <compute on stage %t mod S>
    }

No more stages than tiles: a nest of `T` tiles gets `min(S, T)` stages (at least 2), so
that the prologue always issues `S - 1` groups and the wait's count holds. (With more
stages than tiles the prologue would issue fewer groups than the wait leaves in
flight, and the compute would read a tile still being copied.)

The wait leaves the newer tiles' copies in flight while the compute band runs; the
barriers `affinec-insert-barriers` places around the copies and the compute band keep
a stage from being overwritten while it is read (the interpreter reports it if not).
The order of summation is unchanged.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import TILE
from affinec.ir.ranges import as_dims
from affinec.transforms.affine.analysis import constant_trip_extent


@dataclass
class PipelinePlan:
    """One nest of tile loops to pipeline, and what is inside its innermost loop."""

    loops: list[affine.ForOp]
    trips: list[int]
    copies: list[affine.ParallelOp]
    group: nvgpu.DeviceAsyncCreateGroupOp
    wait: nvgpu.DeviceAsyncWaitOp
    compute: list[Operation]
    buffers: list[SSAValue]

    @property
    def tiles(self) -> int:
        return math.prod(self.trips)

    def stages_for(self, stages: int) -> int:
        """The stages the nest takes of `stages`: at most one per tile, at least two.
        Then the prologue's `S - 1` tiles exist, and each iteration's wait for all
        but the newest `S - 1` groups lands exactly its own tile."""
        return max(2, min(stages, self.tiles))


def plan_pipelines(grid: affine.ParallelOp, stages: int) -> list[PipelinePlan]:
    """The tile-loop nests of `grid` whose tiles' copies can be pipelined; refuses
    one that has copies but not the shape pipelining needs."""
    plans = []
    for op in grid.body.block.ops:
        if not (isinstance(op, affine.ForOp) and TILE in op.attributes):
            continue
        loops = [op]
        while True:
            inner = [
                o for o in loops[-1].body.block.ops if not isinstance(o, affine.YieldOp)
            ]
            if (
                len(inner) == 1
                and isinstance(inner[0], affine.ForOp)
                and TILE in inner[0].attributes
            ):
                loops.append(inner[0])
            else:
                break
        body = [
            o for o in loops[-1].body.block.ops if not isinstance(o, affine.YieldOp)
        ]
        waits = [o for o in body if isinstance(o, nvgpu.DeviceAsyncWaitOp)]
        if not waits:
            continue  # no asynchronous copies: nothing to pipeline
        plans.append(_plan(loops, body, stages))
    return plans


def _plan(
    loops: list[affine.ForOp], body: list[Operation], stages: int
) -> PipelinePlan:
    trips = []
    for loop in loops:
        n = constant_trip_extent(loop)
        if n is None:
            raise PassError(
                loop, "pipelining needs tile loops with constant trip counts"
            )
        trips.append(n)
    k = next(
        i for i, o in enumerate(body) if isinstance(o, nvgpu.DeviceAsyncCreateGroupOp)
    )
    copies, group, wait, compute = body[:k], body[k], body[k + 1], body[k + 2 :]
    if not isinstance(wait, nvgpu.DeviceAsyncWaitOp) or wait.groups != 0:
        raise PassError(wait, "expected the copies' group, then a wait for all of it")
    if not copies or not all(isinstance(c, affine.ParallelOp) for c in copies):
        raise PassError(group, "expected only copy bands before the group")
    buffers: list[SSAValue] = []
    for c in copies:
        assert isinstance(c, affine.ParallelOp)
        written = [
            o
            for o in c.walk()
            if isinstance(o, nvgpu.DeviceAsyncCopyOp | affine.StoreOp)
        ]
        for w in written:
            dst = w.dst if isinstance(w, nvgpu.DeviceAsyncCopyOp) else w.memref
            if gpu.memory_space(dst.type) != gpu.WORKGROUP_ADDRESS_SPACE:
                raise PassError(w, "a copy band must write a shared buffer")
            if dst not in buffers:
                buffers.append(dst)
    for buffer in buffers:
        for use in buffer.uses:
            user = use.operation
            if not any(c.is_ancestor(user) for c in copies) and not any(
                o.is_ancestor(user) for o in compute
            ):
                raise PassError(
                    user, "a pipelined buffer used outside its tile's copy and compute"
                )
    if stages < 2 or stages > nvgpu.DeviceAsyncWaitOp.MAX_GROUPS + 1:
        raise PassError(loops[0], f"stages must be between 2 and 8, got {stages}")
    return PipelinePlan(loops, trips, copies, group, wait, compute, buffers)  # pyright: ignore


def pipeline(plan: PipelinePlan, stages: int) -> None:
    """Rewrite the nest as the module docstring shows (in place), with
    `plan.stages_for(stages)` stages."""
    stages = plan.stages_for(stages)
    outer = plan.loops[0]
    host = outer.parent_block()
    assert host is not None
    staged = {b: _stage_buffer(b, stages) for b in plan.buffers}

    # The prologue: tiles 0 .. S-2, a group each.
    for tile in range(stages - 1):
        values = _tile_values(plan, host, outer, AffineExpr.constant(tile), [])
        stage = _constant(host, outer, tile % stages)
        for c in plan.copies:
            host.insert_op_before(_staged_copy(c, values, staged, stage), outer)
        host.insert_op_before(nvgpu.DeviceAsyncCreateGroupOp([]), outer)

    # The loop over tiles.
    body = Block(arg_types=[IndexType()])
    t = body.args[0]
    t.name_hint = "t"
    loop = affine.ForOp(0, plan.tiles, body)
    host.insert_op_before(loop, outer)
    ahead = stages - 1
    if_body = Block()
    values = _tile_values(plan, if_body, None, AffineExpr.dimension(0) + ahead, [t])
    stage = _apply(if_body, None, (AffineExpr.dimension(0) + ahead) % stages, [t])
    for c in plan.copies:
        if_body.add_op(_staged_copy(c, values, staged, stage))
    if_body.add_op(affine.YieldOp())
    guard = AffineSet(
        1,
        0,
        (
            AffineConstraintExpr(
                AffineConstraintKind.ge,
                AffineExpr.constant(plan.tiles - 1 - ahead) - AffineExpr.dimension(0),
                AffineExpr.constant(0),
            ),
        ),
    )
    body.add_op(affine.IfOp(guard, [t], if_body, Block([affine.YieldOp()])))
    group = nvgpu.DeviceAsyncCreateGroupOp([])
    body.add_ops([group, nvgpu.DeviceAsyncWaitOp(group.asyncToken, ahead)])
    now = _tile_values(plan, body, None, AffineExpr.dimension(0), [t])
    now_stage = _apply(body, None, AffineExpr.dimension(0) % stages, [t])
    for old, new in now.items():
        old.replace_all_uses_with(new)
    for op in plan.compute:
        op.detach()
        body.add_op(op)
        for inner in op.walk():
            if isinstance(inner, affine.LoadOp) and inner.memref in staged:
                _restage_load(inner, staged[inner.memref], now_stage)
    body.add_op(affine.YieldOp())
    host.erase_op(outer, safe_erase=False)
    for old in staged:
        alloc = old.owner
        assert isinstance(alloc, Operation)
        alloc.parent_block().erase_op(alloc, safe_erase=False)  # pyright: ignore


def _stage_buffer(buffer: SSAValue, stages: int) -> SSAValue:
    """A new allocation of `buffer`'s shape with a leading dimension of `stages`."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    alloc = buffer.owner
    assert isinstance(alloc, memref.AllocOp)
    new = memref.AllocOp(
        [],
        [],
        gpu.in_memory_space(
            MemRefType(t.get_element_type(), [stages, *t.get_shape()]),
            gpu.memory_space(t),
        ),
    )
    new.memref.name_hint = buffer.name_hint
    alloc.parent_block().insert_op_before(new, alloc)  # pyright: ignore
    return new.memref


def _apply(
    block: Block, before: Operation | None, e: AffineExpr, operands: list[SSAValue]
) -> SSAValue:
    op = affine.ApplyOp(operands, AffineMap(len(operands), 0, (e,)))
    if before is None:
        block.add_op(op)
    else:
        block.insert_op_before(op, before)
    return op.result


def _constant(block: Block, before: Operation, value: int) -> SSAValue:
    return _apply(block, before, AffineExpr.constant(value), [])


def _tile_values(
    plan: PipelinePlan,
    block: Block,
    before: Operation | None,
    tile: AffineExpr,
    operands: list[SSAValue],
) -> dict[SSAValue, SSAValue]:
    """The tile loops' variables for linear tile `tile` (an expression of
    `operands`), delinearized, as affine.apply ops."""
    values = {}
    for k, loop in enumerate(plan.loops):
        stride = math.prod(plan.trips[k + 1 :])
        e = tile if stride == 1 else tile // stride
        if k > 0:
            e = e % plan.trips[k]
        v = _apply(block, before, e, operands)
        v.name_hint = loop.induction_variable.name_hint
        values[loop.induction_variable] = v
    return values


def _staged_copy(
    band: affine.ParallelOp,
    values: dict[SSAValue, SSAValue],
    staged: dict[SSAValue, SSAValue],
    stage: SSAValue,
) -> affine.ParallelOp:
    """A copy of the copy band for another tile, writing into stage `stage`."""
    clone = band.clone(dict(values))
    for op in list(clone.walk()):
        if isinstance(op, nvgpu.DeviceAsyncCopyOp) and op.dst in staged:
            new = nvgpu.DeviceAsyncCopyOp(
                op.src,
                list(op.srcIndices),
                staged[op.dst],
                [stage, *op.dstIndices],
                op.elements,
                op.srcElements,
            )
            op.parent_block().insert_op_before(new, op)  # pyright: ignore
            op.asyncToken.replace_all_uses_with(new.asyncToken)
            op.parent_block().erase_op(op)  # pyright: ignore
        elif isinstance(op, affine.StoreOp) and op.memref in staged:
            new_map = _with_stage(op.map.data)
            store = affine.StoreOp(
                op.value, staged[op.memref], [*op.indices, stage], new_map
            )
            op.parent_block().insert_op_before(store, op)  # pyright: ignore
            op.parent_block().erase_op(op)  # pyright: ignore
    return clone


def _with_stage(m: AffineMap) -> AffineMap:
    """`m` over its operands then one more, the stage, as a new leading result."""
    m = as_dims(m)
    n = m.num_dims
    return AffineMap(n + 1, 0, (AffineExpr.dimension(n), *m.results))


def _restage_load(op: affine.LoadOp, buffer: SSAValue, stage: SSAValue) -> None:
    new = affine.LoadOp(buffer, [*op.indices, stage], _with_stage(op.map.data))
    new.result.name_hint = op.result.name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    op.result.replace_all_uses_with(new.result)
    op.parent_block().erase_op(op)  # pyright: ignore
