"""Warp specialization of a block whose stages TMA loads: one more warpgroup, the
producer, issues every load; the block's warpgroups become its consumers
(`specialize`, for `affinec-warp-specialize`).

The input is the block program `affinec-tma-copies` and `affinec-map-threads` leave:
thread bands of T threads (T / 128 warpgroups) one after the other, the loads in
bands whose one elected thread (`affine.if` true for thread 0 alone) announces a
stage's bytes (`arrive.expect_tx`) and loads it, the stage's release awaited first;
every thread waits for each step's stage, its warpgroup multiplies, one thread of
each warpgroup hands the stage back. Every thread of that program runs all of it,
so the loads of the stages ahead are issued between the steps, as far ahead as the
program's order puts them.

The part of the program from the barriers' initialization to the last load or wait
(the reduction: prologue, loop, the fragments' zeroing) becomes one thread band of
T + 128 threads, split on the warpgroup:

    affine.parallel (%tx) = (0) to (T + 128) {
      affine.if (%tx >= T) {                       // the producer warpgroup
        nvvm.setmaxregister decrease 56
        ... the loads, their thread now T, their waits on `released` kept;
            nothing else
      } else {                                     // T / 128 consumers
        nvvm.setmaxregister increase 224
        ... the program without its loads: waits on each stage, MMAs, arrivals
      }
    } {affinec.mapping = "thread"}

The producer's thread runs ahead, its pace set by the consumers' arrivals alone. The
consumers' branch runs on past the reduction to the next `gpu.barrier` (their last
`wgmma` wait inside it, so ptxas sees the MMAs in one warpgroup-uniform branch);
where the accumulators are read past that barrier (the output staged through shared
memory over the stages), that barrier becomes the consumers' own (an mbarrier,
`consumers_done`: one arrival a warpgroup once its MMAs are done, every consumer
waiting) and the branch runs on to the next one, so the accumulators never live
where the producer's threads, with their few registers, join the consumers again.
The other bands (the barriers' initialization, the rest of the epilogue) take the
T + 128 threads too, their bodies for threads below T only, so every `gpu.barrier`
left meets the whole block. The phases are proven by running the producer's thread and the
consumers' concurrently (`warp_specialize_phases.check_specialized_phases`).
"""

from __future__ import annotations

from collections.abc import Iterable

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import AffineSetAttr, IndexType, IntegerAttr, i1
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineSet,
)
from xdsl.rewriter import InsertPoint, Rewriter
from xdsl.traits import is_side_effect_free

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu, nvvm
from affinec.dialects.affinec import THREAD, mapping_of
from affinec.hardware.chips import Chip
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.transforms.gpu.thread_bands import new_thread_band, warpgroup_leaders
from affinec.transforms.gpu.wgmma_tma_copies import holds

MAX_CONSUMER_REGISTERS = 240
"""The most registers a consumer thread asks for (setmaxnreg allows 256; a thread
addresses 255)."""

_LOADS = (nvgpu.TmaAsyncLoadOp, nvgpu.MBarrierArriveExpectTxOp)
_PHASES = (
    nvgpu.MBarrierArriveExpectTxOp,
    nvgpu.MBarrierArriveOp,
    nvgpu.MBarrierTryWaitParityOp,
    nvgpu.TmaAsyncLoadOp,
)


def is_tma_block(grid: affine.ParallelOp) -> bool:
    """Whether `grid`'s block loads its stages by TMA (`affinec-tma-copies`)."""
    return any(isinstance(o, nvgpu.TmaAsyncLoadOp) for o in grid.walk())


def consumer_registers(chip: Chip, consumers: int, producer: int) -> int:
    """The registers each consumer thread can take when the producer's take
    `producer` and one block fills the multiprocessor's register file (a multiple
    of 8, at most `MAX_CONSUMER_REGISTERS`)."""
    per_row = chip.registers_per_multiprocessor // WARPGROUP_SIZE
    return min(MAX_CONSUMER_REGISTERS, (per_row - producer) // consumers // 8 * 8)


def specialize(
    grid: affine.ParallelOp, chip: Chip, producer: int, consumer: int
) -> int:
    """Rewrite `grid`'s block (see the module) with `producer` registers for the
    producer's threads and `consumer` for the consumers' (0: the most the register
    file leaves); the consumers' registers."""
    body = grid.body.block
    bands = [
        o
        for o in body.ops
        if isinstance(o, affine.ParallelOp) and mapping_of(o) == THREAD
    ]
    if not bands:
        raise PassError(grid, "warp specialization runs after affinec-map-threads")
    threads = _threads(bands[0])
    for band in bands:
        if _threads(band) != threads:
            raise PassError(band, "the block's thread bands have different sizes")
    for op in grid.walk():
        if (
            isinstance(op, affine.ParallelOp)
            and mapping_of(op) == THREAD
            and op.parent_block() is not body
            and not _in_top_level_structure(op, body)
        ):
            raise PassError(op, "a thread band inside another band")
    if threads % WARPGROUP_SIZE:
        raise PassError(
            bands[0], f"a block of {threads} threads is not whole warpgroups of 128"
        )
    consumers = threads // WARPGROUP_SIZE
    if consumer == 0:
        consumer = consumer_registers(chip, consumers, producer)
    total = WARPGROUP_SIZE * (producer + consumers * consumer)
    if total > chip.registers_per_multiprocessor:
        raise PassError(
            grid,
            f"{consumers} consumer warpgroups of {consumer} registers a thread and a "
            f"producer of {producer} take {total} registers, more than the "
            f"{chip.registers_per_multiprocessor} of {chip.name}'s multiprocessor",
        )
    for count in (producer, consumer):
        if not (24 <= count <= 256 and count % 8 == 0):
            raise PassError(
                grid,
                f"a warpgroup's registers are a multiple of 8 from 24 to 256, got "
                f"{count}",
            )
    region, converted = _region(grid, body)
    _check_elected(region, threads)
    if converted is not None:
        at = region.index(converted)
        region[at] = _consumers_barrier(grid, converted, threads)

    specialized, tx = new_thread_band(threads + WARPGROUP_SIZE, region[0])
    producer_block, consumer_block = Block(), Block()
    for target in (producer_block, consumer_block):
        mapping: dict[SSAValue, SSAValue] = {}
        for op in region:
            target.add_op(op.clone(value_mapper=mapping))
        _inline_bands(target, tx.args[0])
    _keep_loads(producer_block, threads)
    _drop_loads(consumer_block)
    producer_block.insert_op_before(
        nvvm.SetMaxRegisterOp("decrease", producer), producer_block.first_op
    )
    consumer_block.insert_op_before(
        nvvm.SetMaxRegisterOp("increase", consumer), consumer_block.first_op
    )
    producer_block.add_op(affine.YieldOp())
    consumer_block.add_op(affine.YieldOp())
    tx.add_ops(
        [
            affine.IfOp(
                _at_least(threads), [tx.args[0]], producer_block, consumer_block
            ),
            affine.YieldOp(),
        ]
    )
    body.insert_op_before(specialized, region[0])
    for op in reversed(region):
        op.detach()
        op.erase()
    for band in [
        o for o in body.ops if isinstance(o, affine.ParallelOp) and o in bands
    ]:
        _widen(band, threads)
    return consumer


def _threads(band: affine.ParallelOp) -> int:
    upper = band.upperBoundsMap.data
    lower = band.lowerBoundsMap.data
    if (
        len(band.induction_variables) != 1
        or upper.num_dims + upper.num_symbols
        or lower.results != (AffineExpr.constant(0),)
    ):
        raise PassError(band, "a thread band of one constant extent from 0 expected")
    return upper.results[0].eval([], [])


def _in_top_level_structure(op: Operation, body: Block) -> bool:
    """Whether `op` sits in loops and conditions of the block program, not in
    another band."""
    parent = op.parent_op()
    while parent is not None and parent.parent_block() is not body:
        if isinstance(parent, affine.ParallelOp):
            return False
        parent = parent.parent_op()
    return parent is not None and not isinstance(parent, affine.ParallelOp)


def _region(
    grid: affine.ParallelOp, body: Block
) -> tuple[list[Operation], gpu.BarrierOp | None]:
    """The block program's ops from the barriers' initialization (and the barrier
    after it) to the next `gpu.barrier` after the last one that loads, waits or
    arrives (or the end); where the accumulators are read past that barrier (an
    epilogue staged through shared memory), on to the barrier after that one, and
    that first barrier, which the consumers alone then need, to make theirs."""
    ops = list(body.ops)
    phase = [
        k for k, o in enumerate(ops) if any(isinstance(x, _PHASES) for x in o.walk())
    ]
    inits = [
        k
        for k, o in enumerate(ops)
        if any(isinstance(x, nvgpu.MBarrierInitOp) for x in o.walk())
    ]
    if not phase or not inits:
        raise PassError(grid, "a block whose stages TMA loads expected")
    start = inits[-1] + 1
    if start < len(ops) and isinstance(ops[start], gpu.BarrierOp):
        start += 1
    if any(k < start for k in phase):
        raise PassError(ops[phase[0]], "a load or wait before the barriers' init")
    end = _next_barrier(ops, phase[-1] + 1)
    converted = None
    if end < len(ops) and _reads_private(ops[end + 1 :]):
        after = _next_barrier(ops, end + 1)
        if not _reads_private(ops[after + 1 :]):
            converted = ops[end]
            assert isinstance(converted, gpu.BarrierOp)
            end = after
    region = ops[start:end]
    inside = {x for o in region for x in o.walk()}
    for op in inside:
        if isinstance(op, gpu.BarrierOp) and op is not converted:
            raise PassError(
                op,
                "a gpu.barrier between the loads and the MMAs: the producer and "
                "the consumers would meet at it out of step",
            )
        for result in op.results:
            for use in result.uses:
                if use.operation not in inside:
                    raise PassError(
                        op,
                        "a value of the reduction is used after it: warp "
                        "specialization moves the reduction into the warpgroups' "
                        "branches",
                    )
    return region, converted


def _next_barrier(ops: list[Operation], k: int) -> int:
    """The index of the first `gpu.barrier` from `k` on (or of the body's end)."""
    while k < len(ops) and not isinstance(ops[k], gpu.BarrierOp | affine.YieldOp):
        k += 1
    return k


def _reads_private(ops: Iterable[Operation]) -> bool:
    """Whether `ops` read a buffer private to each thread (the accumulators)."""
    return any(
        isinstance(x, affine.LoadOp | memref.LoadOp | affine.VectorLoadOp)
        and gpu.memory_space(x.operands[0].type) == gpu.PRIVATE_ADDRESS_SPACE
        for o in ops
        for x in o.walk()
    )


def _consumers_barrier(
    grid: affine.ParallelOp, converted: gpu.BarrierOp, threads: int
) -> affine.ParallelOp:
    """`converted` (a `gpu.barrier` of the reduction's epilogue) as a barrier of the
    consumers alone: one mbarrier, initialized with the block's others, on which the
    first thread of each consumer warpgroup arrives (its warpgroup's wgmmas done:
    their reads handed back) and every consumer thread waits."""
    body = grid.body.block
    creates = [o for o in body.ops if isinstance(o, nvgpu.MBarrierCreateOp)]
    create = nvgpu.MBarrierCreateOp(nvgpu.MBarrierGroupType(1))
    create.barriers.name_hint = "consumers_done"
    body.insert_op_after(create, creates[-1])
    group = create.barriers
    init = next(o for o in grid.walk() if isinstance(o, nvgpu.MBarrierInitOp))
    zero = arith.ConstantOp(IntegerAttr(0, IndexType()))
    count = arith.ConstantOp(IntegerAttr(threads // WARPGROUP_SIZE, IndexType()))
    block = init.parent_block()
    assert block is not None
    block.insert_ops_before(
        [zero, count, nvgpu.MBarrierInitOp(group, zero.result, count.result)], init
    )
    band, tx = new_thread_band(threads, converted)
    leader = warpgroup_leaders()
    first = Block()
    index = arith.ConstantOp(IntegerAttr(0, IndexType()))
    first.add_ops(
        [index, nvgpu.MBarrierArriveOp(group, index.result), affine.YieldOp()]
    )
    index = arith.ConstantOp(IntegerAttr(0, IndexType()))
    even = arith.ConstantOp(IntegerAttr(0, i1))
    ticks = arith.ConstantOp(IntegerAttr(10_000_000, IndexType()))
    tx.add_ops(
        [
            affine.IfOp(leader, [tx.args[0]], first),
            index,
            even,
            ticks,
            nvgpu.MBarrierTryWaitParityOp(
                group, index.result, even.result, ticks.result
            ),
            affine.YieldOp(),
        ]
    )
    Rewriter.replace_op(converted, band, [])
    return band


def _is_load_guard(op: Operation, tx: SSAValue | None = None) -> bool:
    """An `affine.if` on the thread id alone whose body loads."""
    return (
        isinstance(op, affine.IfOp)
        and len(op.args) == 1
        and (tx is None or op.args[0] is tx)
        and any(isinstance(x, _LOADS) for x in op.walk())
    )


def _check_elected(region: Iterable[Operation], threads: int) -> None:
    """Every load sits in a guard that elects thread 0 of its band."""
    for top in region:
        for op in top.walk():
            if not isinstance(op, _LOADS):
                continue
            guard = op.parent_op()
            while guard is not None and not (
                isinstance(guard, affine.IfOp)
                and len(guard.args) == 1
                and isinstance(guard.args[0].owner, Block)
                and isinstance(guard.args[0].owner.parent_op(), affine.ParallelOp)
            ):
                guard = guard.parent_op()
            if guard is None:
                raise PassError(op, "a load not guarded to one thread of its band")
            assert isinstance(guard, affine.IfOp)
            tx = guard.args[0]
            elected = [
                t for t in range(threads) if holds(guard, {tx: t}, guard, "unknown")
            ]
            if elected != [0]:
                raise PassError(
                    guard,
                    f"a load guarded to threads {elected[:4]} of its band, not to "
                    "thread 0 alone",
                )


def _inline_bands(block: Block, tx: SSAValue) -> None:
    """The thread bands in `block` (at any depth) replaced by their bodies, for the
    thread `tx`."""
    for band in [
        o
        for o in block.walk()
        if isinstance(o, affine.ParallelOp) and mapping_of(o) == THREAD
    ]:
        inner = band.body.block
        yield_ = inner.last_op
        assert isinstance(yield_, affine.YieldOp)
        yield_.detach()
        yield_.erase()
        Rewriter.inline_block(inner, InsertPoint.before(band), [tx])
        band.detach()
        band.erase()


def _keep_loads(block: Block, threads: int) -> None:
    """Only the loads, elected to the producer's first thread (`threads`)."""
    tx = _thread_of(block)
    for op in list(block.ops):
        _keep_loads_in(op, tx, threads)
    _dead_code(block)


def _keep_loads_in(op: Operation, tx: SSAValue | None, threads: int) -> None:
    if tx is not None and _is_load_guard(op, tx):
        assert isinstance(op, affine.IfOp)
        op.properties["condition"] = AffineSetAttr(_equals(threads))
        return
    if not any(isinstance(x, _LOADS) for x in op.walk()):
        if not _pure(op):
            _erase(op)
        return
    for region in op.regions:
        for block in region.blocks:
            for inner in list(block.ops):
                _keep_loads_in(inner, tx, threads)


def _drop_loads(block: Block) -> None:
    """The program without its loads."""
    tx = _thread_of(block)
    for op in [o for o in block.walk() if _is_load_guard(o, tx)]:
        _erase(op)
    _dead_code(block)


def _thread_of(block: Block) -> SSAValue | None:
    """The thread id the loads' guards test (after the bands were inlined)."""
    for op in block.walk():
        if _is_load_guard(op):
            assert isinstance(op, affine.IfOp)
            return op.args[0]
    return None


def _pure(op: Operation) -> bool:
    return not op.regions and (
        is_side_effect_free(op) or isinstance(op, affine.ApplyOp | affine.LoadOp)
    )


def _erase(op: Operation) -> None:
    for result in op.results:
        for use in list(result.uses):
            _erase(use.operation)
    if op.parent_block() is not None:
        op.detach()
        op.erase()


def _dead_code(block: Block) -> None:
    """Erase what computes only unused values, and loops and conditions left empty,
    until nothing changes."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(block.walk())):
            if op.parent_block() is None or isinstance(op, affine.YieldOp):
                continue
            if (
                _pure(op)
                and not any(r.uses for r in op.results)
                or (
                    isinstance(op, affine.ForOp | affine.IfOp)
                    and not op.results
                    and all(
                        isinstance(x, affine.YieldOp)
                        for r in op.regions
                        for b in r.blocks
                        for x in b.ops
                    )
                )
            ):
                op.detach()
                op.erase()
                changed = True


def _at_least(threads: int) -> AffineSet:
    return AffineSet(
        1,
        0,
        (
            AffineConstraintExpr(
                AffineConstraintKind.ge,
                AffineExpr.dimension(0) - threads,
                AffineExpr.constant(0),
            ),
        ),
    )


def _below(threads: int) -> AffineSet:
    return AffineSet(
        1,
        0,
        (
            AffineConstraintExpr(
                AffineConstraintKind.ge,
                AffineExpr.constant(threads - 1) - AffineExpr.dimension(0),
                AffineExpr.constant(0),
            ),
        ),
    )


def _equals(thread: int) -> AffineSet:
    return AffineSet(
        1,
        0,
        (
            AffineConstraintExpr(
                AffineConstraintKind.eq,
                AffineExpr.dimension(0) - thread,
                AffineExpr.constant(0),
            ),
        ),
    )


def _widen(band: affine.ParallelOp, threads: int) -> None:
    """`band` over the producer's threads too, its body for the first `threads`."""
    new, body = new_thread_band(threads + WARPGROUP_SIZE, band)
    new.attributes = dict(band.attributes)
    then = Block()
    old = band.body.block
    yield_ = old.last_op
    assert isinstance(yield_, affine.YieldOp)
    yield_.detach()
    yield_.erase()
    Rewriter.inline_block(old, InsertPoint.at_end(then), [body.args[0]])
    then.add_op(affine.YieldOp())
    body.add_ops([affine.IfOp(_below(threads), [body.args[0]], then), affine.YieldOp()])
    Rewriter.replace_op(band, new, [])


__all__ = ["consumer_registers", "is_tma_block", "specialize"]
