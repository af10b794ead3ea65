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
"""

from __future__ import annotations

from xdsl.dialects.builtin import (
    IndexType,
    MemRefType,
    StringAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineMap,
    AffineSet,
)

from affinec.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import (
    BLOCK,
    MAPPING,
    THREAD,
    UNROLL,
    PaddedLoadOp,
    mapping_of,
)
from affinec.transforms.gpu.bands import Band, GridAnalysis, band_ivs, is_private
from affinec.transforms.gpu.placement import alloc_before

MAX_THREADS_PER_BLOCK = 1024
DEFAULT_THREADS_PER_BLOCK = 256
"""The block size when the phases are larger: 8 warps, a common sweet spot."""

MAX_UNROLLED_TURNS = 16
"""Turn loops longer than this are left rolled (their private buffers go to local
memory): LLVM takes about 0.6 s on 16 unrolled turns of a 7x7 convolution tap loop,
and seconds beyond."""


def check_threads_per_block(op: Operation, threads_per_block: int) -> None:
    if threads_per_block < 0 or threads_per_block > MAX_THREADS_PER_BLOCK:
        raise PassError(
            op,
            f"threads-per-block must be between 1 and {MAX_THREADS_PER_BLOCK} "
            f"(0 picks one), got {threads_per_block}",
        )


def block_size(analysis: GridAnalysis, threads_per_block: int) -> int:
    """The threads of each block: as asked, or the largest phase's size up to 256."""
    for phase in analysis.phases:
        if mapping_of(phase.op) != BLOCK:
            raise PassError(phase.op, "this band is already mapped to threads")
    largest = max((p.total for p in analysis.phases), default=1)
    return threads_per_block or max(1, min(DEFAULT_THREADS_PER_BLOCK, largest))


def turns(phase: Band, threads: int) -> int:
    return -(-phase.total // threads)


def map_to_threads(analysis: GridAnalysis, threads: int) -> None:
    """Distribute every phase of the grid to `threads` threads (in place)."""
    private = _shrink_private_buffers(analysis, threads)
    for phase in analysis.phases:
        _distribute(phase, threads, private)
    for old in private:
        # Its accesses all went to the per-thread buffer; deallocs are left.
        for use in list(old.uses):
            _erase(use.operation)
        _erase(old.owner)  # pyright: ignore[reportArgumentType]


def _shrink_private_buffers(
    analysis: GridAnalysis, threads: int
) -> dict[SSAValue, SSAValue]:
    """Give each private buffer one element per turn of its phases; return the map
    from old buffers to new ones (accesses are retargeted by `_distribute`)."""
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
        t = buffer.type
        assert isinstance(t, MemRefType)
        per_thread = gpu.in_memory_space(
            MemRefType(t.get_element_type(), [turns(phase, threads)]),
            gpu.PRIVATE_ADDRESS_SPACE,
        )
        shrunk[buffer] = alloc_before(alloc, per_thread).results[0]
    return shrunk


def _distribute(phase: Band, threads: int, private: dict[SSAValue, SSAValue]) -> None:
    """Replace a block band by a thread band running the thread's share of it."""
    op = phase.op
    parent = op.parent_block()
    assert parent is not None
    body = Block(arg_types=[IndexType()])
    thread_id = body.args[0]
    thread_id.name_hint = "tx"
    band = affine.ParallelOp.from_extents([threads], body)
    band.attributes = {k: v for k, v in op.attributes.items() if k != MAPPING} | {
        MAPPING: StringAttr(THREAD)
    }
    band.location = op.location
    parent.insert_op_before(band, op)
    if phase.total == 0:  # it never runs
        body.add_op(affine.YieldOp())
        _erase(op)
        return

    n = turns(phase, threads)
    if n > 1:
        loop_body = Block(arg_types=[IndexType()])
        loop_body.args[0].name_hint = "j"
        loop = affine.ForOp(0, n, loop_body)
        if n <= MAX_UNROLLED_TURNS and _uses_any(op, private):
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
        constraints.append(_ge0(AffineExpr.constant(phase.total - 1) - lin))
    bound_operands = list(op.upper_bound_operands)
    for iv, d in zip(ivs, phase.dims, strict=True):
        for bound in d.guards:
            index = []
            for v in (iv, *bound_operands):
                if v not in operands:
                    operands.append(v)
                index.append(AffineExpr.dimension(operands.index(v)))
            b = bound.replace_dims_and_symbols(index[1:], [])
            constraints.append(_ge0(b - index[0] - 1))
    for old, new in zip(op.induction_variables, ivs, strict=True):
        old.replace_all_uses_with(new)
    moved = [o for o in op.body.block.ops if not isinstance(o, affine.YieldOp)]
    for o in moved:
        o.detach()
    condition, operands = _compact_set(constraints, operands)
    if condition.constraints:
        guarded = Block()
        guarded.add_ops(moved)
        guarded.add_op(affine.YieldOp())
        ops.append(affine.IfOp(condition, operands, guarded, Block([affine.YieldOp()])))
    else:
        ops.extend(moved)
    ops.append(affine.YieldOp())
    site.add_ops(ops)
    _erase(op)

    for o in moved:
        for inner in o.walk():
            if (
                isinstance(inner, affine.LoadOp | affine.StoreOp | PaddedLoadOp)
                and inner.memref in private
            ):
                _retarget(inner, private[inner.memref], turn)


def _compact_set(
    constraints: list[AffineConstraintExpr], operands: list[SSAValue]
) -> tuple[AffineSet, list[SSAValue]]:
    """The constraints simplified, over only the operands they use."""
    n = len(operands)
    exprs = [
        c.lhs.simplify(n, 0) if c.lhs.is_pure_affine() else c.lhs for c in constraints
    ]
    used = sorted(set().union(*(e.used_dims() for e in exprs))) if exprs else []
    renumber = [
        AffineExpr.dimension(used.index(d)) if d in used else AffineExpr.constant(0)
        for d in range(n)
    ]
    kept = [_ge0(e.replace_dims_and_symbols(renumber, [])) for e in exprs]
    return AffineSet(len(used), 0, tuple(kept)), [operands[d] for d in used]


def _uses_any(op: Operation, buffers: dict[SSAValue, SSAValue]) -> bool:
    return any(v in buffers for inner in op.walk() for v in inner.operands)


def _ge0(e: AffineExpr) -> AffineConstraintExpr:
    return AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))


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
    if isinstance(op, affine.StoreOp):
        new: Operation = affine.StoreOp(op.value, buffer, indices, m)
    else:
        new = affine.LoadOp(buffer, indices, m)
        new.results[0].name_hint = op.results[0].name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    if op.results:
        op.results[0].replace_all_uses_with(new.results[0])
    _erase(op)


def _erase(op: Operation) -> None:
    if op.parent is not None:
        op.detach()
    op.erase()
