"""Which thread runs which iteration: block bands become thread bands.

A block band's iterations are shared by the block's `T` threads. Iteration `lin`
(row-major over the band's extents) goes to thread `lin mod T`, which runs it in its
turn `lin floordiv T`: a band larger than the block becomes a loop over turns (`%j`),
and a guard skips iterations past the band's end or past a partial tile's bound. The
result is a *thread band*, `affine.parallel (%tx) = (0) to (T)` mapped to `"thread"`:
one iteration per thread, the thread's id being `%tx`.

    affine.parallel (%t) = (0) to (min(16, 50 - %i * 16)) {
      affine.store %zero, %acc[%t] : memref<16xf32, 5 : i64>
    } {affinec.mapping = "block"}

becomes, with 8 threads:

    affine.parallel (%tx) = (0) to (8) {
      affine.for %j = 0 to 2 {
        %t = affine.apply affine_map<(d0, d1) -> (d0 + d1 * 8)>(%tx, %j)
        affine.if affine_set<(d0, d1) : (-d0 - d1 * 16 + 49 >= 0)>(%t, %i) {
          affine.store %zero, %acc[%j] : memref<2xf32, 5 : i64>
        }
      } {affinec.unroll}
    } {affinec.mapping = "thread"}

A private buffer (memory space 5) shrinks to one element per turn, indexed by `%j`:
each thread allocates its own at grid level (a grid band is run by every thread of
the block), and once every index is a constant (the turn loop unrolled) LLVM keeps it
in registers.

This module hands block bands out in turns (`map_to_threads`); the plan it follows is
`thread_plan.py`'s, accumulator bands with a register tile go through
`register_tiles.py`, and `thread_bands.py` holds the pieces both build with.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, MemRefType, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintExpr, AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, UNROLL, PaddedLoadOp, mapping_of
from affinec.ir.affine_exprs import ge0
from affinec.transforms.gpu.bands import Band, GridAnalysis, band_ivs, is_private
from affinec.transforms.gpu.placement import alloc_before
from affinec.transforms.gpu.register_tiles import distribute_tiled, retarget_access
from affinec.transforms.gpu.thread_bands import (
    add_guarded,
    erase_op,
    partial_tile_guards,
    private_accesses,
    thread_band,
)
from affinec.transforms.gpu.thread_plan import (
    DEFAULT_THREADS_PER_BLOCK,
    MAX_REGISTER_TILE,
    MAX_UNROLLED_STEPS,
    VECTOR_BYTES,
    ThreadPlan,
    accumulator_phases,
    check_threads_per_block,
    plan_threads,
    turns,
)

__all__ = [
    "DEFAULT_THREADS_PER_BLOCK",
    "MAX_REGISTER_TILE",
    "MAX_UNROLLED_STEPS",
    "MAX_UNROLLED_TURNS",
    "VECTOR_BYTES",
    "ThreadPlan",
    "accumulator_phases",
    "check_threads_per_block",
    "map_to_threads",
    "plan_threads",
    "turns",
]

MAX_UNROLLED_TURNS = 16
"""Turn loops longer than this are left rolled (their private buffers go to local
memory): LLVM takes about 0.6 s on 16 unrolled turns of a 7x7 convolution tap loop,
and seconds beyond."""


def map_to_threads(analysis: GridAnalysis, plan: ThreadPlan) -> None:
    """Distribute every phase of the grid to the plan's threads (in place)."""
    tiled = (
        {p.op for p in accumulator_phases(analysis)} if plan.register_tile else set()
    )
    private = _shrink_private_buffers(analysis, plan)
    for phase in analysis.phases:
        if phase.op in tiled:
            distribute_tiled(phase, plan, private)
        else:
            _distribute(phase, plan.threads, private)
    for old in private:
        # Its accesses all went to the per-thread buffer; deallocs are left.
        for use in list(old.uses):
            erase_op(use.operation)
        erase_op(old.owner)  # pyright: ignore[reportArgumentType]


def _shrink_private_buffers(
    analysis: GridAnalysis, plan: ThreadPlan
) -> dict[SSAValue, SSAValue]:
    """Give each private buffer one element per turn of its phases (or the register
    tile's shape); return the map from old buffers to new ones (accesses are
    retargeted when their phase is distributed)."""
    shrunk: dict[SSAValue, SSAValue] = {}
    for alloc in analysis.allocs:
        buffer = alloc.results[0]
        if not is_private(buffer):
            continue
        phase = next(
            (p for u in buffer.uses if (p := analysis.phase_of(u.operation))), None
        )
        if phase is None:
            raise PassError(alloc, "a private buffer that no phase uses")
        if mapping_of(phase.op) != BLOCK:
            continue  # a thread band's own buffer, already per thread
        t = buffer.type
        assert isinstance(t, MemRefType)
        shape = list(plan.register_tile) or [turns(phase, plan.threads)]
        per_thread = gpu.in_memory_space(
            MemRefType(t.get_element_type(), shape), gpu.PRIVATE_ADDRESS_SPACE
        )
        shrunk[buffer] = alloc_before(alloc, per_thread).results[0]
    return shrunk


def _distribute(phase: Band, threads: int, private: dict[SSAValue, SSAValue]) -> None:
    """Replace a block band by a thread band running the thread's share of it, in
    turns."""
    op = phase.op
    body, thread_id = thread_band(op, threads)
    if phase.total == 0:  # it never runs
        body.add_op(affine.YieldOp())
        erase_op(op)
        return

    n = turns(phase, threads)
    if n > 1:
        loop_body = Block(arg_types=[IndexType()])
        loop_body.args[0].name_hint = "j"
        loop = affine.ForOp(0, n, loop_body)
        # unrolled where a turn's values live in registers, or the band asks
        if n <= MAX_UNROLLED_TURNS and (
            _uses_any(op, private) or UNROLL in op.attributes
        ):
            loop.attributes[UNROLL] = UnitAttr()
        body.add_ops([loop, affine.YieldOp()])
        site, turn = loop_body, loop_body.args[0]
    else:
        site, turn = body, None

    ops: list[Operation] = []
    ivs = band_ivs(phase, thread_id, turn, threads, ops)
    ids: list[SSAValue] = [thread_id] + ([turn] if turn is not None else [])

    # The guard: the iteration exists, and no partial-tile bound cuts it off.
    operands: list[SSAValue] = list(ids)
    constraints: list[AffineConstraintExpr] = []
    lin = AffineExpr.dimension(0)
    if turn is not None:
        lin = lin + AffineExpr.dimension(1) * threads
    if n * threads > phase.total:
        constraints.append(ge0(AffineExpr.constant(phase.total - 1) - lin))
    constraints += partial_tile_guards(
        zip(ivs, phase.dims, strict=True), op.upper_bound_operands, operands
    )
    for old, new in zip(op.induction_variables, ivs, strict=True):
        old.replace_all_uses_with(new)
    moved = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
    for o in moved:
        o.detach()
    add_guarded(ops, constraints, operands, moved)
    ops.append(affine.YieldOp())
    site.add_ops(ops)
    erase_op(op)

    for access in private_accesses(moved, private):
        _retarget(access, private[access.memref], turn)


def _retarget(
    op: affine.LoadOp | affine.StoreOp | PaddedLoadOp,
    buffer: SSAValue,
    turn: SSAValue | None,
) -> None:
    """Point an access of a private buffer at the thread's element `turn`."""
    if turn is None:
        m, indices = AffineMap(0, 0, (AffineExpr.constant(0),)), []
    else:
        m, indices = AffineMap(1, 0, (AffineExpr.dimension(0),)), [turn]
    retarget_access(op, buffer, indices, m)


def _uses_any(op: Operation, buffers: dict[SSAValue, SSAValue]) -> bool:
    return any(v in buffers for inner in op.walk() for v in inner.operands)
