"""Register tiles: an accumulator band handed to threads that each own a tile of it.

Along dimension `d` of the band, thread `t_d` runs iterations `q * T_d + t_d` for `q`
below the tile's size (or, with a vector width `v`, `v`-wide chunks of consecutive
iterations, consecutive threads taking consecutive chunks). The reduction loops of
the band's perfect nest move outside the tile's unrolled loops, so each value loaded
in the innermost body serves the whole tile; the innermost reduction loop may be
unrolled by a few steps (`unroll_steps`). The accumulator, a private buffer, becomes
the thread's register tile.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, UnitAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintExpr, AffineExpr, AffineMap
from xdsl.traits import Pure

from affinec.dialects import affine, gpu
from affinec.dialects.affinec import TILE, UNROLL, PaddedLoadOp
from affinec.ir.affine_exprs import ge0
from affinec.transforms.affine.analysis import constant_trip_extent, is_defined_inside
from affinec.transforms.affine.tiling import tile_band
from affinec.transforms.gpu.bands import Band, is_private
from affinec.transforms.gpu.register_vectors import (
    ChunkAccesses,
    chunk_accesses,
    chunk_constant,
    vector_chunk,
)
from affinec.transforms.gpu.thread_bands import (
    add_guarded,
    erase_op,
    operand_dim,
    partial_tile_guards,
    private_accesses,
    thread_band,
)
from affinec.transforms.gpu.thread_plan import ThreadPlan


def distribute_tiled(
    phase: Band, plan: ThreadPlan, private: dict[SSAValue, SSAValue]
) -> None:
    """Replace an accumulator band by a thread band in which each thread owns a
    register tile: along dimension `d`, thread `t_d` runs iterations
    `q * T_d + t_d` for `q` below the tile's size (consecutive threads, consecutive
    iterations). The loops of the band's perfect nest (the reduction) move outside
    the tile's loops, so each value loaded in the innermost body serves the whole
    tile; the order of summation of every output is unchanged."""
    op = phase.op
    body, thread_id = thread_band(op, plan.threads)
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

    # A chunk along the innermost dimension that its stores can take as one vector
    # is one iteration of the innermost loop, its elements written out.
    chunks = chunk_accesses(phase, plan, innermost)
    last = len(phase.dims) - 1

    # The register tile's loops, unrolled, around the innermost body.
    qs: list[SSAValue | None] = []
    for d, r in enumerate(plan.register_tile):
        if chunks is not None and d == last:
            r //= plan.vector_width
        if r == 1:
            qs.append(None)
            continue
        loop_body = Block(arg_types=[IndexType()])
        loop_body.args[0].name_hint = f"c{d}" if chunks and d == last else f"q{d}"
        loop = affine.ForOp(0, r, loop_body)
        loop.attributes[UNROLL] = UnitAttr()
        site.add_ops([loop, affine.YieldOp()])
        site = loop_body
        qs.append(loop_body.args[0])

    ops: list[Operation] = []
    operands: list[SSAValue] = []
    constraints: list[AffineConstraintExpr] = []

    def place(d: int, element: int | None = None) -> SSAValue:
        """The band's variable `d` at the thread's iteration (`element` of the
        chunk, for a chunk written out)."""
        dim, t, q = phase.dims[d], ts[d], qs[d]
        threads_d = plan.thread_extents[d]
        v = plan.vector_width if d == last else 1
        idx_operands = [x for x in (t, q) if x is not None]
        idx = AffineExpr.constant(0 if element is None else element)
        for k, x in enumerate(idx_operands):
            e = AffineExpr.dimension(k)
            if x is t:
                idx = idx + e * v
            elif element is not None:  # chunk q of the thread's
                idx = idx + e * (threads_d * v)
            elif v == 1:
                idx = idx + e * threads_d
            else:  # chunk q // v of the thread's, element q % v of the chunk
                idx = idx + (e // v) * (threads_d * v) + e % v
        if threads_d * plan.register_tile[d] > dim.extent:
            constraints.append(
                ge0(
                    AffineExpr.constant(dim.extent - 1)
                    - idx.replace_dims_and_symbols(
                        [operand_dim(operands, v) for v in idx_operands],
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
            c = arith.ConstantOp(
                IntegerAttr(expr.simplify(0, 0).value, IndexType())  # pyright: ignore
            )
            ops.append(c)
            return c.result
        apply = affine.ApplyOp(
            idx_operands,
            AffineMap(len(idx_operands), 0, (expr.simplify(len(idx_operands), 0),)),
        )
        ops.append(apply)
        return apply.result

    # (a chunk written out: its first element's)
    ivs = [place(d, 0 if chunks and d == last else None) for d in range(last + 1)]
    partial = [] if _only_touches_the_block(innermost) else phase.dims
    constraints += partial_tile_guards(
        zip(ivs, partial, strict=False), op.upper_bound_operands, operands
    )
    for new, o in zip(ivs, op.induction_variables, strict=True):
        if o.name_hint and isinstance(new.owner, affine.ApplyOp):
            new.name_hint = o.name_hint
    if chunks is None:
        for old, new in zip(op.induction_variables, ivs, strict=True):
            old.replace_all_uses_with(new)
        add_guarded(ops, constraints, operands, innermost)
        copies, tile_indices = [innermost], [qs]
    else:
        copies, found, tile_indices = _chunk_copies(
            op, plan, innermost, chunks, ivs, qs, place, ops
        )
        add_guarded(ops, constraints, operands, vector_chunk(copies, found))
    ops.append(affine.YieldOp())
    site.add_ops(ops)
    erase_op(op)

    for copy, indices in zip(copies, tile_indices, strict=True):
        for access in private_accesses(copy, private):
            _retarget_tile(access, private[access.memref], indices)
    for o in ops if chunks else []:  # later elements' variables the vectors left unused
        if isinstance(o, affine.ApplyOp) and not o.result.uses and o.parent:
            o.detach()
            o.erase()


def _chunk_copies(
    op: affine.ParallelOp,
    plan: ThreadPlan,
    innermost: list[Operation],
    chunks: ChunkAccesses,
    ivs: list[SSAValue],
    qs: list[SSAValue | None],
    place: Callable[[int, int | None], SSAValue],
    ops: list[Operation],
) -> tuple[list[list[Operation]], list[ChunkAccesses], list[list[SSAValue | None]]]:
    """The band's body `innermost` once for each element of a thread's chunk along
    the innermost dimension (`ivs`: the band's variables at the first element; the
    others' innermost variable and register-tile index made in `ops`): the copies,
    the accesses `chunks` found located in each, and each copy's register-tile
    indices. `innermost` is erased."""
    last = len(ivs) - 1
    copies: list[list[Operation]] = []
    found: list[ChunkAccesses] = []
    indices: list[list[SSAValue | None]] = []
    originals = [x for o in innermost for x in o.walk()]
    for k in range(plan.vector_width):
        at = ivs if k == 0 else [*ivs[:last], place(last, k)]
        mapping: dict[SSAValue, SSAValue] = dict(
            zip(op.induction_variables, at, strict=True)
        )
        copy = [o.clone(value_mapper=mapping) for o in innermost]
        clones = [x for o in copy for x in o.walk()]
        where = {id(x): y for x, y in zip(originals, clones, strict=True)}
        store = None if chunks.store is None else where[id(chunks.store)]
        loads = tuple(where[id(x)] for x in chunks.loads)
        assert store is None or isinstance(store, affine.StoreOp)
        assert all(isinstance(x, affine.LoadOp) for x in loads)
        found.append(ChunkAccesses(store, loads))  # pyright: ignore[reportArgumentType]
        copies.append(copy)
        indices.append([*qs[:last], _tile_element(qs[last], plan.vector_width, k, ops)])
    for o in reversed(innermost):
        o.erase(safe_erase=False)
    return copies, found, indices


def _tile_element(
    chunk: SSAValue | None, v: int, k: int, ops: list[Operation]
) -> SSAValue:
    """The register tile's index along the innermost dimension of element `k` of
    chunk `chunk` (None: the only one)."""
    if chunk is None:
        c = chunk_constant(k)
        ops.append(c)
        return c.result
    d = AffineExpr.dimension(0)
    apply = affine.ApplyOp([chunk], AffineMap(1, 0, (d * v + k,)))
    ops.append(apply)
    return apply.result


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
    retarget_access(op, buffer, indices, AffineMap(len(indices), 0, tuple(results)))


def retarget_access(
    op: affine.LoadOp | affine.StoreOp | PaddedLoadOp,
    buffer: SSAValue,
    indices: list[SSAValue],
    m: AffineMap,
) -> None:
    """Replace the access `op` by a load or store of `buffer` at `m(indices)`: a
    private buffer's access pointed at one thread's element."""
    if isinstance(op, affine.StoreOp):
        new: Operation = affine.StoreOp(op.value, buffer, indices, m)
    else:
        new = affine.LoadOp(buffer, indices, m)
        new.results[0].name_hint = op.results[0].name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    if op.results:
        op.results[0].replace_all_uses_with(new.results[0])
    erase_op(op)
