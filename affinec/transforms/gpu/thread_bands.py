"""The pieces both ways of handing a block band to threads (in turns, in register
tiles) build with: the thread band that replaces a block band, the integer set of the
guard that skips iterations a thread must not run (and the partial-tile bounds in
it), and erasing a replaced op.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from xdsl.dialects.builtin import IndexType, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineExpr,
    AffineSet,
)

from affinec.dialects import affine
from affinec.dialects.affinec import MAPPING, THREAD, UNROLL, PaddedLoadOp
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.ir.affine_exprs import ge0
from affinec.transforms.gpu.bands import Dim


def new_thread_band(threads: int, like: Operation) -> tuple[affine.ParallelOp, Block]:
    """A thread band of `threads` iterations at `like`'s location, not yet placed,
    and its (empty) body."""
    body = Block(arg_types=[IndexType()])
    body.args[0].name_hint = "tx"
    band = affine.ParallelOp.from_extents([threads], body)
    band.attributes[MAPPING] = StringAttr(THREAD)
    band.location = like.location
    return band, body


def warpgroup_leaders() -> AffineSet:
    """The set of a thread band's variables that lead a warpgroup (the first of
    each `WARPGROUP_SIZE` threads): an `affine.if` over it issues what one thread of
    each warpgroup does for all of it."""
    zero_rem = AffineConstraintExpr(
        AffineConstraintKind.eq,
        AffineExpr.dimension(0) % WARPGROUP_SIZE,
        AffineExpr.constant(0),
    )
    return AffineSet(1, 0, (zero_rem,))


def thread_band(op: affine.ParallelOp, threads: int) -> tuple[Block, SSAValue]:
    """A thread band of `threads` iterations right before `op`, with `op`'s other
    attributes (but the mapping and the unrolling it asks of its turns); its (empty)
    body and its variable."""
    body = Block(arg_types=[IndexType()])
    thread_id = body.args[0]
    thread_id.name_hint = "tx"
    band = affine.ParallelOp.from_extents([threads], body)
    kept = {k: v for k, v in op.attributes.items() if k not in (MAPPING, UNROLL)}
    band.attributes = kept | {MAPPING: StringAttr(THREAD)}
    band.location = op.location
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(band, op)
    return body, thread_id


def compact_set(
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
    kept = [ge0(e.replace_dims_and_symbols(renumber, [])) for e in exprs]
    return AffineSet(len(used), 0, tuple(kept)), [operands[d] for d in used]


def operand_dim(operands: list[SSAValue], v: SSAValue) -> AffineExpr:
    """`v` as a dimension of a set over `operands` (appended when new)."""
    if v not in operands:
        operands.append(v)
    return AffineExpr.dimension(operands.index(v))


def partial_tile_guards(
    ivs: Iterable[tuple[SSAValue, Dim]],
    bound_operands: Sequence[SSAValue],
    operands: list[SSAValue],
) -> list[AffineConstraintExpr]:
    """For each (value, band dimension), `value < bound` for every bound that cuts
    a partial tile short, over `operands` (the values appended as they come)."""
    constraints = []
    for iv, dim in ivs:
        for bound in dim.guards:
            index = [operand_dim(operands, v) for v in (iv, *bound_operands)]
            b = bound.replace_dims_and_symbols(index[1:], [])
            constraints.append(ge0(b - index[0] - 1))
    return constraints


def add_guarded(
    ops: list[Operation],
    constraints: list[AffineConstraintExpr],
    operands: list[SSAValue],
    body: list[Operation],
) -> None:
    """Append `body` to `ops`, inside an `affine.if` of the constraints when any."""
    condition, operands = compact_set(constraints, operands)
    if not condition.constraints:
        ops.extend(body)
        return
    guarded = Block()
    guarded.add_ops(body)
    guarded.add_op(affine.YieldOp())
    ops.append(affine.IfOp(condition, operands, guarded))


def private_accesses(
    ops: Iterable[Operation], private: dict[SSAValue, SSAValue]
) -> list[affine.LoadOp | affine.StoreOp | PaddedLoadOp]:
    """The loads and stores under `ops` of a buffer `private` maps (a block-shaped
    buffer that becomes each thread's own)."""
    return [
        inner
        for o in ops
        for inner in o.walk()
        if isinstance(inner, affine.LoadOp | affine.StoreOp | PaddedLoadOp)
        and inner.memref in private
    ]


def erase_op(op: Operation) -> None:
    if op.parent is not None:
        op.detach()
    op.erase()
