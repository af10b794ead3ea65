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

import math
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
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
from xdsl.traits import Pure

from affinec.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import (
    BLOCK,
    MAPPING,
    THREAD,
    TILE,
    UNROLL,
    PaddedLoadOp,
    mapping_of,
)
from affinec.dtypes import element_size
from affinec.transforms.affine.analysis import constant_trip_extent, is_defined_inside
from affinec.transforms.affine.tiling import tile_band
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


@dataclass(frozen=True)
class ThreadPlan:
    """How a grid band's phases go to threads."""

    threads: int
    register_tile: tuple[int, ...] = ()
    """Per dimension of the accumulator phases, the iterations one thread owns
    (empty: every phase is shared out in turns)."""
    thread_extents: tuple[int, ...] = ()
    """Per dimension of the accumulator phases, the threads along it."""
    unroll_steps: int = 0
    """Steps of the innermost reduction loop of a register-tiled band unrolled
    together (0: none)."""
    vector_width: int = 1
    """Iterations a thread owns contiguously along the innermost dimension: its tile
    there is `vector_width`-wide chunks, consecutive threads taking consecutive
    chunks, so its reads of a buffer contiguous along that dimension can be one
    16-byte access per chunk."""


MAX_REGISTER_TILE = 256

MAX_UNROLLED_STEPS = 16
"""The most steps of the innermost reduction loop unrolled (each step is a whole
register tile of multiply-adds)."""
"""Elements of one thread's register tile: its loops are unrolled, so more would be
slow to compile and spill."""


def plan_threads(
    analysis: GridAnalysis,
    threads_per_block: int,
    register_tile: tuple[int, ...],
    vector_width: int = 0,
    unroll_steps: int = 0,
) -> ThreadPlan:
    """The threads of each block and how the phases share them; refuses a band
    already mapped and a register tile that does not fit the accumulator phases."""
    mapped = [p for p in analysis.phases if mapping_of(p.op) != BLOCK]
    if mapped:
        return _plan_beside_thread_bands(
            analysis, mapped, threads_per_block, register_tile
        )
    if not register_tile:
        # One thread per output of the block if it fits (the copies share out in
        # turns); else one per iteration of the largest phase.
        sized = accumulator_phases(analysis) or analysis.phases
        largest = max((p.total for p in sized), default=1)
        threads = threads_per_block or max(1, min(DEFAULT_THREADS_PER_BLOCK, largest))
        return ThreadPlan(threads)
    grid = analysis.grid.op
    phases = accumulator_phases(analysis)
    if not phases:
        raise PassError(
            grid,
            "register-tile is given but no phase of this grid band keeps a private "
            "buffer (an accumulator) to tile",
        )
    extents = phases[0].extents
    if len(register_tile) != len(extents):
        raise PassError(
            phases[0].op,
            f"register-tile has {len(register_tile)} sizes for a band of "
            f"{len(extents)} dimensions",
        )
    if any(r < 1 for r in register_tile):
        raise PassError(
            grid, f"register-tile sizes must be positive, got {register_tile}"
        )
    if math.prod(register_tile) > MAX_REGISTER_TILE:
        raise PassError(
            grid,
            f"a register tile of {math.prod(register_tile)} elements (at most "
            f"{MAX_REGISTER_TILE})",
        )
    thread_extents = tuple(
        -(-e // r) for e, r in zip(extents, register_tile, strict=True)
    )
    threads = math.prod(thread_extents)
    if threads_per_block and threads_per_block != threads:
        raise PassError(
            phases[0].op,
            f"register-tile {','.join(map(str, register_tile))} over a band of "
            f"{'x'.join(map(str, extents))} needs {threads} threads, but "
            f"threads-per-block is {threads_per_block}",
        )
    if threads > MAX_THREADS_PER_BLOCK:
        raise PassError(
            phases[0].op,
            f"register-tile {','.join(map(str, register_tile))} leaves {threads} "
            f"threads, more than {MAX_THREADS_PER_BLOCK}",
        )
    if vector_width == 0:
        vector_width = _natural_vector_width(phases, register_tile[-1])
    elif vector_width < 1 or register_tile[-1] % vector_width:
        raise PassError(
            phases[0].op,
            f"vector-width {vector_width} does not divide the register tile's "
            f"innermost size {register_tile[-1]}",
        )
    if not 0 <= unroll_steps <= MAX_UNROLLED_STEPS:
        raise PassError(
            phases[0].op,
            f"unroll-steps must be between 0 and {MAX_UNROLLED_STEPS}, got "
            f"{unroll_steps}",
        )
    return ThreadPlan(
        threads, register_tile, thread_extents, unroll_steps, vector_width
    )


VECTOR_BYTES = 16


def _natural_vector_width(phases: list[Band], innermost: int) -> int:
    """16 bytes of the narrowest element the phases read from shared memory, if the
    tile's innermost size is a multiple of it; else 1 (strided)."""
    sizes = [
        element_size(o.memref.type.get_element_type())  # pyright: ignore
        for p in phases
        for o in p.op.walk()
        if isinstance(o, affine.LoadOp)
        and gpu.memory_space(o.memref.type) == gpu.WORKGROUP_ADDRESS_SPACE
    ]
    if not sizes:
        return 1
    width = VECTOR_BYTES // min(sizes)
    return width if innermost % width == 0 else 1


def _plan_beside_thread_bands(
    analysis: GridAnalysis,
    mapped: list[Band],
    threads_per_block: int,
    register_tile: tuple[int, ...],
) -> ThreadPlan:
    """Some phases are thread bands already (a warp-level MMA): their size is the
    block's, and the block bands left are shared out in turns over it."""
    sizes = {p.total for p in mapped}
    if len(sizes) > 1:
        raise PassError(
            analysis.grid.op,
            f"its thread bands have different sizes ({sorted(sizes)})",
        )
    threads = sizes.pop()
    if threads_per_block and threads_per_block != threads:
        raise PassError(
            mapped[0].op,
            f"the thread bands have {threads} threads, but threads-per-block is "
            f"{threads_per_block}",
        )
    if register_tile:
        raise PassError(
            mapped[0].op,
            "register-tile applies to block bands with an accumulator; this grid "
            "band's accumulator is already mapped to threads",
        )
    if not any(mapping_of(p.op) == BLOCK for p in analysis.phases):
        raise PassError(mapped[0].op, "this band is already mapped to threads")
    return ThreadPlan(threads)


def accumulator_phases(analysis: GridAnalysis) -> list[Band]:
    """The phases that touch a private buffer (all of one iteration space)."""
    return [
        p
        for p in analysis.phases
        if any(
            isinstance(o, affine.LoadOp | affine.StoreOp) and is_private(o.memref)
            for o in p.op.walk()
        )
    ]


def turns(phase: Band, threads: int) -> int:
    return -(-phase.total // threads)


def map_to_threads(analysis: GridAnalysis, plan: ThreadPlan) -> None:
    """Distribute every phase of the grid to the plan's threads (in place)."""
    tiled = (
        {p.op for p in accumulator_phases(analysis)} if plan.register_tile else set()
    )
    private = _shrink_private_buffers(analysis, plan)
    for phase in analysis.phases:
        if phase.op in tiled:
            _distribute_tiled(phase, plan, private)
        else:
            _distribute(phase, plan.threads, private)
    for old in private:
        # Its accesses all went to the per-thread buffer; deallocs are left.
        for use in list(old.uses):
            _erase(use.operation)
        _erase(old.owner)  # pyright: ignore[reportArgumentType]


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
    body, thread_id = _thread_band(op, threads)
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


def _thread_band(op: affine.ParallelOp, threads: int) -> tuple[Block, SSAValue]:
    """A thread band of `threads` iterations right before `op`, with `op`'s other
    attributes; its (empty) body and its variable."""
    body = Block(arg_types=[IndexType()])
    thread_id = body.args[0]
    thread_id.name_hint = "tx"
    band = affine.ParallelOp.from_extents([threads], body)
    band.attributes = {k: v for k, v in op.attributes.items() if k != MAPPING} | {
        MAPPING: StringAttr(THREAD)
    }
    band.location = op.location
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(band, op)
    return body, thread_id


def _distribute_tiled(
    phase: Band, plan: ThreadPlan, private: dict[SSAValue, SSAValue]
) -> None:
    """Replace an accumulator band by a thread band in which each thread owns a
    register tile: along dimension `d`, thread `t_d` runs iterations
    `q * T_d + t_d` for `q` below the tile's size (consecutive threads, consecutive
    iterations). The loops of the band's perfect nest (the reduction) move outside
    the tile's loops, so each value loaded in the innermost body serves the whole
    tile; the order of summation of every output is unchanged."""
    op = phase.op
    body, thread_id = _thread_band(op, plan.threads)
    ops: list[Operation] = []
    ts = _delinearize(thread_id, plan.thread_extents, ops)
    body.add_ops(ops)

    # The perfect nest inside the band (loops whose bounds do not use its ivs).
    site = body
    block = op.body.block
    nest: list[affine.ForOp] = []
    while True:
        inner = [o for o in block.ops if not isinstance(o, affine.YieldOp)]
        if not (
            len(inner) == 1
            and isinstance(inner[0], affine.ForOp)
            and not inner[0].inits
            and not any(is_defined_inside(v, op) for v in inner[0].operands)
        ):
            break
        loop = inner[0]
        loop.detach()
        site.add_op(loop)
        if site is body:
            body.add_op(affine.YieldOp())
        else:
            site.add_op(affine.YieldOp())
        yield_op = loop.body.block.last_op
        assert isinstance(yield_op, affine.YieldOp)
        site, block = loop.body.block, loop.body.block
        block.detach_op(yield_op)
        nest.append(loop)
    if nest and plan.unroll_steps and (moved := _unroll_steps(nest[-1], plan)):
        site = block = moved
    innermost = [o for o in block.ops if not isinstance(o, affine.YieldOp)]
    for o in innermost:
        o.detach()
    if block is op.body.block:
        site = body

    # The register tile's loops, unrolled, around the innermost body.
    qs: list[SSAValue | None] = []
    for d, r in enumerate(plan.register_tile):
        if r == 1:
            qs.append(None)
            continue
        loop_body = Block(arg_types=[IndexType()])
        loop_body.args[0].name_hint = f"q{d}"
        loop = affine.ForOp(0, r, loop_body)
        loop.attributes[UNROLL] = UnitAttr()
        site.add_ops([loop, affine.YieldOp()])
        site = loop_body
        qs.append(loop_body.args[0])

    ops = []
    ivs: list[SSAValue] = []
    operands: list[SSAValue] = []
    constraints: list[AffineConstraintExpr] = []
    last = len(phase.dims) - 1
    for d, (dim, t, q) in enumerate(zip(phase.dims, ts, qs, strict=True)):
        threads_d = plan.thread_extents[d]
        v = plan.vector_width if d == last else 1
        idx_operands = [x for x in (t, q) if x is not None]
        idx = AffineExpr.constant(0)
        for k, x in enumerate(idx_operands):
            e = AffineExpr.dimension(k)
            if x is t:
                idx = idx + e * v
            elif v == 1:
                idx = idx + e * threads_d
            else:  # chunk q // v of the thread's, element q % v of the chunk
                idx = idx + (e // v) * (threads_d * v) + e % v
        if threads_d * plan.register_tile[d] > dim.extent:
            constraints.append(
                _ge0(
                    AffineExpr.constant(dim.extent - 1)
                    - idx.replace_dims_and_symbols(
                        [
                            AffineExpr.dimension(_index_of(operands, v))
                            for v in idx_operands
                        ],
                        [],
                    )
                )
            )
        if dim.lower is None:
            fold = affine.MaxOp if len(dim.lower_map.results) > 1 else affine.ApplyOp
            lower = fold(list(op.lower_bound_operands), dim.lower_map)
            ops.append(lower)
            idx_operands.append(lower.result)
            expr = idx * dim.step + AffineExpr.dimension(len(idx_operands) - 1)
        else:
            expr = idx * dim.step + dim.lower
        if not idx_operands:
            c = arith.ConstantOp(IntegerAttr(dim.lower or 0, IndexType()))
            ops.append(c)
            ivs.append(c.result)
            continue
        apply = affine.ApplyOp(
            idx_operands,
            AffineMap(len(idx_operands), 0, (expr.simplify(len(idx_operands), 0),)),
        )
        ops.append(apply)
        ivs.append(apply.result)
    bound_operands = list(op.upper_bound_operands)
    partial = [] if _only_touches_the_block(innermost) else phase.dims
    for iv, d in zip(ivs, partial, strict=False):
        for bound in d.guards:
            index = [
                AffineExpr.dimension(_index_of(operands, v))
                for v in (iv, *bound_operands)
            ]
            b = bound.replace_dims_and_symbols(index[1:], [])
            constraints.append(_ge0(b - index[0] - 1))
    for old, new, o in zip(
        op.induction_variables, ivs, op.induction_variables, strict=True
    ):
        if old.name_hint and isinstance(new.owner, affine.ApplyOp):
            new.name_hint = o.name_hint
        old.replace_all_uses_with(new)
    condition, operands = _compact_set(constraints, operands)
    if condition.constraints:
        guarded = Block()
        guarded.add_ops(innermost)
        guarded.add_op(affine.YieldOp())
        ops.append(affine.IfOp(condition, operands, guarded, Block([affine.YieldOp()])))
    else:
        ops.extend(innermost)
    ops.append(affine.YieldOp())
    site.add_ops(ops)
    _erase(op)

    for o in innermost:
        for inner in o.walk():
            if (
                isinstance(inner, affine.LoadOp | affine.StoreOp | PaddedLoadOp)
                and inner.memref in private
            ):
                _retarget_tile(inner, private[inner.memref], qs)


def _unroll_steps(loop: affine.ForOp, plan: ThreadPlan) -> Block | None:
    """Unroll the innermost reduction loop of a register-tiled band by the plan's
    `unroll_steps`: strip-mined into an outer loop and an unrolled inner loop of
    that many steps (a loop no longer is unrolled whole). Unrolled, the loads of
    consecutive steps sit side by side and LLVM merges those of contiguous elements
    into one vector access, at the price of keeping more values alive. The order of
    summation is unchanged. Returns the block the body now sits in, if it moved."""
    steps = plan.unroll_steps
    trips = constant_trip_extent(loop)
    if trips is None or trips <= 1:
        return None
    if trips <= steps or trips % steps:
        loop.attributes[UNROLL] = UnitAttr()
        return None
    (_, points) = tile_band([loop], [steps])
    (point,) = points
    outer = point.parent_op()
    assert isinstance(outer, affine.ForOp)
    del outer.attributes[TILE]  # a loop of steps inside a thread, not a tile loop
    point.attributes[UNROLL] = UnitAttr()
    return point.body.block


def _only_touches_the_block(ops: list[Operation]) -> bool:
    """Whether `ops` read only the block's buffers (shared or private) or through
    padded loads, and write only private buffers. Then an iteration past a partial
    tile's end needs no guard: it reads memory that exists (a shared buffer spans
    the whole tile) and writes only the thread's own accumulator, whose extra
    elements nothing stores back."""
    for o in ops:
        for inner in o.walk():
            if isinstance(inner, affine.StoreOp | memref.StoreOp):
                if not is_private(inner.memref):
                    return False
            elif isinstance(inner, affine.LoadOp | memref.LoadOp):
                space = gpu.memory_space(inner.memref.type)
                if space not in (
                    gpu.WORKGROUP_ADDRESS_SPACE,
                    gpu.PRIVATE_ADDRESS_SPACE,
                ):
                    return False
            elif not isinstance(
                inner, PaddedLoadOp | affine.ForOp | affine.IfOp | affine.YieldOp
            ) and not inner.has_trait(Pure):
                return False
    return True


def _index_of(operands: list[SSAValue], v: SSAValue) -> int:
    if v not in operands:
        operands.append(v)
    return operands.index(v)


def _delinearize(
    linear: SSAValue, extents: tuple[int, ...], out: list[Operation]
) -> list[SSAValue | None]:
    """`linear` split over `extents` (the last fastest); None where an extent is 1."""
    found: list[SSAValue | None] = []
    for k, e in enumerate(extents):
        if e == 1:
            found.append(None)
            continue
        stride = math.prod(extents[k + 1 :])
        expr = AffineExpr.dimension(0)
        expr = expr if stride == 1 else expr // stride
        if math.prod(extents[:k]) > 1:
            expr = expr % e
        apply = affine.ApplyOp([linear], AffineMap(1, 0, (expr,)))
        apply.result.name_hint = f"t{k}"
        out.append(apply)
        found.append(apply.result)
    return found


def _retarget_tile(
    op: affine.LoadOp | affine.StoreOp | PaddedLoadOp,
    buffer: SSAValue,
    qs: list[SSAValue | None],
) -> None:
    """Point an access of a private buffer at the thread's register-tile element."""
    indices = [q for q in qs if q is not None]
    results = []
    for q in qs:
        results.append(
            AffineExpr.constant(0)
            if q is None
            else AffineExpr.dimension(indices.index(q))
        )
    m = AffineMap(len(indices), 0, tuple(results))
    if isinstance(op, affine.StoreOp):
        new: Operation = affine.StoreOp(op.value, buffer, indices, m)
    else:
        new = affine.LoadOp(buffer, indices, m)
        new.results[0].name_hint = op.results[0].name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    if op.results:
        op.results[0].replace_all_uses_with(new.results[0])
    _erase(op)


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
