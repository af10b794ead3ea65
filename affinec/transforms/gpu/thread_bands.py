"""The pieces both ways of handing a block band to threads (in turns, in register
tiles) build with: the thread band that replaces a block band, the integer set of the
guard that skips iterations a thread must not run, and erasing a replaced op.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IndexType, StringAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineExpr,
    AffineSet,
)

from affinec.dialects import affine
from affinec.dialects.affinec import MAPPING, THREAD
from affinec.ir.affine_exprs import ge0


def thread_band(op: affine.ParallelOp, threads: int) -> tuple[Block, SSAValue]:
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


def erase_op(op: Operation) -> None:
    if op.parent is not None:
        op.detach()
    op.erase()
