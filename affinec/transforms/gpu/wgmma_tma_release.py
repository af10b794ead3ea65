"""The pipeline's stages handed back on mbarriers, not `gpu.barrier`s: the second
half of `affinec-tma-copies`' rewrite.

Once TMA loads the tiles, each thread waits for a stage's data itself
(`try_wait.parity` on the stage's barrier), so the `gpu.barrier` that made the
cp.async copies visible to every thread is not needed; the one before each load
kept a stage from being overwritten while a warpgroup still read it. That one
becomes a second barrier per stage, `released`:

- after each `warpgroup_mma` step (which waits for its MMAs: the tiles are read
  when it returns), one thread of each warpgroup arrives on the step's stage's
  `released` barrier (`count` = the warpgroups);
- before loading step `g` into stage `g mod stages` (g >= stages), the loading
  thread waits on that stage's `released` barrier for the phase of step
  `g - stages`, parity `((g floordiv stages) + 1) mod 2`;
- the `gpu.barrier`s just before a stage's loads and just before the wait for its
  data go.

    affine.parallel (%tx) = (0) to (128) {
      affine.if ((%tx mod 128) == 0) {
        %h = nvgpu.mbarrier.arrive %stage_released[%s]      (after the step)
      }
    }
    affine.parallel (%one) = (0) to (1) {
      affine.if (%g - 2 >= 0) {
        nvgpu.mbarrier.try_wait.parity %stage_released[%s'], %p, %ticks
      }
      nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%s'], ...   (the loads)
    }

`wgmma_tma_phases.check_phases` proves both barriers' phases trip by trip; the
interpreter, on given inputs, that no load lands on a stage a warpgroup still reads.
"""

from __future__ import annotations

from xdsl.dialects import arith
from xdsl.dialects.builtin import IndexType, IntegerAttr, i64
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.ir.affine.affine_set import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineSet,
)

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu, nvvm
from affinec.dialects.affinec_wgmma import WarpgroupMmaStepOp
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.transforms.gpu.thread_bands import new_thread_band, warpgroup_leaders

_PURE = (affine.ApplyOp, arith.ConstantOp)


def release_stages(
    grid: affine.ParallelOp,
    full: SSAValue,
    init: Operation,
    stages: int,
    threads: int,
    step_number,
    in_flight: bool = False,
) -> None:
    """Rewrite `grid` (whose stages complete on the barriers `full`, initialized in
    the band `init`) as the module says. `step_number(stage, at)` gives the step
    whose tiles a stage index holds (a map and its operands). With `in_flight`
    (and 3 stages or more), each step leaves its MMAs in flight (see
    `_in_flight`)."""
    warpgroups = threads // WARPGROUP_SIZE
    released = nvgpu.MBarrierCreateOp(nvgpu.MBarrierGroupType(stages))
    released.barriers.name_hint = "stage_released"
    full_owner = full.owner
    assert isinstance(full_owner, Operation)
    full_owner.parent_block().insert_op_after(released, full_owner)  # pyright: ignore
    _init(init, released.barriers, stages, warpgroups)
    steps = [op for op in grid.walk() if isinstance(op, WarpgroupMmaStepOp)]
    loads = [
        op.parent_op()
        for op in grid.walk()
        if isinstance(op, nvgpu.MBarrierArriveExpectTxOp) and op.barriers is full
    ]
    waits = [
        op.parent_op()
        for op in grid.walk()
        if isinstance(op, nvgpu.MBarrierTryWaitParityOp) and op.barriers is full
    ]
    for band in dict.fromkeys(waits):
        _drop_barrier_before(band)
    for band in dict.fromkeys(loads):
        _drop_barrier_before(band)
    for op in loads:
        assert isinstance(op, Operation)
        _wait_released(op, released.barriers, stages, step_number)
    lag = _in_flight(steps, threads) if in_flight and stages >= 3 else 0
    for step in steps:
        _arrive(step, released.barriers, stages, threads, step_number, lag)
    if lag:
        for loop in dict.fromkeys(_loop_of(s) for s in steps):
            assert loop is not None
            _loads_last(loop)


def _loads_last(loop: affine.ForOp) -> None:
    """The loads of the loop's body (its ops holding an `arrive.expect_tx`) moved
    to its end, after the step and the hand-back of the step before it, which the
    stage they load into held."""
    body = loop.body.block
    end = body.last_op
    assert end is not None
    for op in list(body.ops):
        if op is not end and any(
            isinstance(o, nvgpu.MBarrierArriveExpectTxOp) for o in op.walk()
        ):
            op.detach()
            body.insert_op_before(op, end)


def _in_flight(steps: list[WarpgroupMmaStepOp], threads: int) -> int:
    """Each step of a reduction loop leaves its MMAs in flight (`pending = 1`):
    the next step's wait retires them, so a stage is handed back one step later,
    the loop's loads move after its step (`_loads_last`: the stage they reuse is
    the previous step's), and the loop is followed by a wait for all. 1, or 0
    where a step is in no loop."""
    loops = [_loop_of(s) for s in steps]
    if not steps or any(loop is None for loop in loops):
        return 0
    for step in steps:
        step.properties["pending"] = IntegerAttr(1, i64)
    for loop in dict.fromkeys(loops):
        assert loop is not None
        waiting, body = new_thread_band(threads, loop)
        body.add_ops([nvvm.WgmmaWaitGroupSyncOp(0), affine.YieldOp()])
        loop.parent_block().insert_op_after(waiting, loop)  # pyright: ignore
    return 1


def _loop_of(op: Operation) -> affine.ForOp | None:
    loop = op.parent_op()
    while loop is not None and not isinstance(loop, affine.ForOp):
        loop = loop.parent_op()
    return loop


def _init(init: Operation, released: SSAValue, stages: int, count: int) -> None:
    """`released`'s barriers initialized where `full`'s are, `count` arrivals a
    phase."""
    inits = [o for o in init.walk() if isinstance(o, nvgpu.MBarrierInitOp)]
    last = inits[-1]
    block = last.parent_block()
    assert block is not None
    number = arith.ConstantOp(IntegerAttr(count, IndexType()))
    block.insert_op_after(number, last)
    at: Operation = number
    for s in range(stages):
        index = arith.ConstantOp(IntegerAttr(s, IndexType()))
        new = nvgpu.MBarrierInitOp(released, index.result, number.result)
        block.insert_op_after(index, at)
        block.insert_op_after(new, index)
        at = new


def _drop_barrier_before(op: Operation | None) -> None:
    """The `gpu.barrier` just before `op` (pure index ops between), if any, and if
    `op` is the first of its block past it, the one before its block's parent
    (the barrier at the head of the pipelined loop's `affine.if`)."""
    while op is not None:
        prev = op.prev_op
        while isinstance(prev, _PURE):
            prev = prev.prev_op
        if isinstance(prev, gpu.BarrierOp):
            prev.parent_block().erase_op(prev)  # pyright: ignore
            return
        if prev is not None:
            return
        op = op.parent_op()
        if not isinstance(op, affine.IfOp):
            return


def _wait_released(
    band: Operation, released: SSAValue, stages: int, step_number
) -> None:
    """Before the loads of `band`, its thread waits until the stage they overwrite
    has been handed back (from the stage's second use on)."""
    body = band.regions[0].block
    expect = next(
        o for o in body.walk() if isinstance(o, nvgpu.MBarrierArriveExpectTxOp)
    )
    stage = expect.mbarId
    g_map, g_operands = step_number(stage, expect)
    (g,) = g_map.results
    if not g_operands and g.eval([], []) < stages:
        return  # a first use of its stage (the pipeline's prologue)
    guard = AffineSet(
        g_map.num_dims,
        g_map.num_symbols,
        (
            AffineConstraintExpr(
                AffineConstraintKind.ge, g - stages, AffineExpr.constant(0)
            ),
        ),
    )
    then = Block()
    parity = affine.ApplyOp(
        g_operands,
        AffineMap(g_map.num_dims, g_map.num_symbols, (((g // stages) + 1) % 2,)),
    )
    one = arith.ConstantOp(IntegerAttr(1, IndexType()))
    odd = arith.CmpiOp(parity.result, one.result, "eq")
    ticks = arith.ConstantOp(IntegerAttr(10_000_000, IndexType()))
    wait = nvgpu.MBarrierTryWaitParityOp(released, stage, odd.result, ticks.result)
    then.add_ops([parity, one, odd, ticks, wait, affine.YieldOp()])
    guarded = affine.IfOp(guard, g_operands, then)
    guarded.location = band.location
    expect.parent_block().insert_op_before(guarded, expect)  # pyright: ignore


def _arrive(
    step: WarpgroupMmaStepOp,
    released: SSAValue,
    stages: int,
    threads: int,
    step_number,
    lag: int,
) -> None:
    """After `step`'s band, one thread of each warpgroup hands back the stage of
    the step `lag` steps before (whose MMAs are done)."""
    band = step.parent_op()
    assert isinstance(band, affine.ParallelOp)
    stage = _outer(list(step.a_indices)[0], band) if stages > 1 else None
    new, body = new_thread_band(threads, step)
    band.parent_block().insert_op_after(new, band)  # pyright: ignore
    leader = warpgroup_leaders()
    then = Block()
    inner = then
    if lag:
        g_map, g_operands = step_number(stage, step)
        (g,) = g_map.results
        earlier = Block()
        guard = AffineSet(
            g_map.num_dims,
            g_map.num_symbols,
            (
                AffineConstraintExpr(
                    AffineConstraintKind.ge, g - lag, AffineExpr.constant(0)
                ),
            ),
        )
        then.add_op(affine.IfOp(guard, g_operands, earlier))
        then.add_op(affine.YieldOp())
        inner = earlier
        previous = affine.ApplyOp(
            g_operands,
            AffineMap(g_map.num_dims, g_map.num_symbols, ((g - lag) % stages,)),
        )
        inner.add_op(previous)
        stage = previous.result
    if stage is None:
        zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
        inner.add_op(zero)
        stage = zero.result
    inner.add_ops([nvgpu.MBarrierArriveOp(released, stage), affine.YieldOp()])
    body.add_ops([affine.IfOp(leader, [body.args[0]], then), affine.YieldOp()])


def _outer(v: SSAValue, band: Operation) -> SSAValue:
    """`v`, through identity applies, as a value from outside `band`."""
    while isinstance(v.owner, affine.ApplyOp) and band.is_ancestor(v.owner):
        op = v.owner
        if op.map.data != AffineMap.identity(1) or len(op.mapOperands) != 1:
            break
        v = op.mapOperands[0]
    owner = v.owner
    if isinstance(owner, Operation) and band.is_ancestor(owner):
        raise PassError(band, "the stage a wgmma step reads is computed in its band")
    return v


__all__ = ["release_stages"]
