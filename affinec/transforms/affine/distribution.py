"""Loop distribution and interchange of an `affine.parallel` with the loops inside it:
`distribute_parallel`, `sink_parallel`."""

from __future__ import annotations

from affinec.dialects import affine
from affinec.transforms.affine.analysis import (
    body_ops,
)
from affinec.transforms.affine.rewriting import (
    fresh_block,
    move_ops,
    parallel_like,
    replace_ivs_within,
)

# -- distribution and interchange ---------------------------------------------------------


def distribute_parallel(op: affine.ParallelOp) -> list[affine.ParallelOp]:
    """One `affine.parallel` per top-level statement of the body, in order (loop
    distribution); the statements must not pass SSA values to each other."""
    statements = body_ops(op.body.block)
    if len(statements) <= 1:
        return [op]
    parent = op.parent_block()
    assert parent is not None
    loops = []
    for statement in statements:
        block = fresh_block(op.induction_variables)
        loop = parallel_like(op, block)
        parent.insert_op_before(loop, op)
        move_ops([statement], block)
        block.add_op(affine.YieldOp())
        replace_ivs_within(op.induction_variables, block.args, loop)
        loops.append(loop)
    op.detach()
    op.erase()
    return loops


def sink_parallel(op: affine.ParallelOp, depth: int) -> affine.ParallelOp:
    """Interchange an `affine.parallel` whose body is a perfect nest of `affine.for`
    loops with the outer `depth` of them; return the moved parallel.

        affine.parallel (%i) { affine.for %c0 { affine.for %c1 { B } } }
    with depth 1 becomes
        affine.for %c0 { affine.parallel (%i) { affine.for %c1 { B } } }

    The loops' bounds must not use the parallel's variables.
    """
    (outermost,) = body_ops(op.body.block)
    assert isinstance(outermost, affine.ForOp)
    innermost = outermost
    for _ in range(depth - 1):
        (innermost,) = body_ops(innermost.body.block)  # pyright: ignore[reportAssignmentType]
    block = fresh_block(op.induction_variables)
    moved = parallel_like(op, block)
    move_ops(body_ops(innermost.body.block), block)
    block.add_op(affine.YieldOp())
    for old, new in zip(op.induction_variables, block.args, strict=True):
        old.replace_all_uses_with(new)
    target = innermost.body.block
    target.insert_op_before(moved, target.last_op)  # pyright: ignore[reportArgumentType]
    outermost.detach()
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(outermost, op)
    op.detach()
    op.erase()
    return moved
