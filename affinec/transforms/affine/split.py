"""Splitting one block loop into init / compute / write-back loops, its scalar
accumulators expanded into a block-shaped buffer (`split_parallel`; the plan comes
from `affinec.transforms.affine.split_analysis`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    MemRefType,
)
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.dialects import affine
from affinec.transforms.affine.analysis import (
    AccessOp,
    compose_map,
    map_slots,
)
from affinec.transforms.affine.rewriting import (
    fresh_block,
    move_ops,
    parallel_like,
    replace_ivs_within,
)
from affinec.transforms.affine.split_analysis import SplitPlan

# -- splitting ----------------------------------------------------------------------------


@dataclass
class BufferPool:
    """Block-shaped accumulator buffers, one set per grid iteration.

    Each split block loop zeroes, fills and reads back its buffers before the next
    one starts, so consecutive split loops in one grid body (the fast and slow paths
    of a tile) can share them; two accumulators of the same loop cannot.
    """

    buffers: dict[Operation, list[memref.AllocOp]] = field(default_factory=dict)

    def take(
        self, grid: affine.ParallelOp, t: MemRefType, taken: set[memref.AllocOp]
    ) -> memref.AllocOp:
        pool = self.buffers.setdefault(grid, [])
        for alloc in pool:
            if alloc.memref.type == t and alloc not in taken:
                taken.add(alloc)
                return alloc
        alloc = memref.AllocOp([], [], t)
        alloc.memref.name_hint = "acc"
        body = grid.body.block
        after = pool[-1] if pool else None
        if after is None:
            body.insert_op_before(alloc, body.first_op)  # pyright: ignore[reportArgumentType]
        else:
            body.insert_op_after(alloc, after)
        pool.append(alloc)
        taken.add(alloc)
        return alloc


def split_parallel(
    op: affine.ParallelOp, plan: SplitPlan, grid: affine.ParallelOp, pool: BufferPool
) -> list[affine.ParallelOp]:
    """Distribute a block loop over its phases (zero the accumulators; the reduction
    loops; read back, epilogue, store) and expand each scalar accumulator into a
    buffer with one element per block iteration, allocated at the top of `grid`'s
    body; return the new loops.

        affine.parallel (%i1) = ... {
          %acc = memref.alloca() : memref<f32>
          affine.store %zero, %acc[]
          affine.for %c = ... { ... %acc[] ... }
          %v = affine.load %acc[]
          affine.store %v, %out[%i0 * 16 + %i1]
        }
    becomes
        %acc = memref.alloc() : memref<16xf32>            (in the grid body)
        affine.parallel (%i1) = ... { affine.store %zero, %acc[%i1] }
        affine.parallel (%i1) = ... { affine.for %c = ... { ... %acc[%i1] ... } }
        affine.parallel (%i1) = ... {
          %v = affine.load %acc[%i1]
          affine.store %v, %out[%i0 * 16 + %i1]
        }
    """
    taken: set[memref.AllocOp] = set()
    buffers = {}
    for acc in plan.accumulators:
        t = acc.memref.type
        assert isinstance(t, MemRefType)
        shape = [*plan.extents, *t.get_shape()]  # pyright: ignore[reportUnknownArgumentType]
        buffers[acc] = pool.take(grid, MemRefType(t.get_element_type(), shape), taken)
    parent = op.parent_block()
    assert parent is not None
    new_loops: list[affine.ParallelOp] = []
    for _, phase in plan.phases:
        block = fresh_block(op.induction_variables)
        loop = parallel_like(op, block)
        parent.insert_op_before(loop, op)
        move_ops(phase, block)
        block.add_op(affine.YieldOp())
        replace_ivs_within(op.induction_variables, block.args, loop)
        new_loops.append(loop)
    for acc, buffer in buffers.items():
        for use in list(acc.memref.uses):
            access = use.operation
            assert isinstance(access, AccessOp)
            loop = next(p for p in new_loops if p.is_ancestor(access))
            _expand_access(access, buffer.memref, list(loop.induction_variables))
        acc.detach()
        acc.erase()
    op.detach()
    op.erase()
    return new_loops


def _expand_access(
    access: AccessOp, buffer: SSAValue, leading: Sequence[SSAValue]
) -> None:
    """`acc[idx]` -> `buffer[leading..., idx]`."""
    m = access.map.data
    n = len(leading)
    shift = [AffineExpr.dimension(n + k) for k in range(m.num_dims)]
    results = [AffineExpr.dimension(k) for k in range(n)] + [
        r.replace_dims_and_symbols(shift, []) for r in m.results
    ]
    operands = [*leading, *access.indices]
    new_map, new_ops = compose_map(
        AffineMap(n + m.num_dims, m.num_symbols, tuple(results)), operands
    )
    fixed = list(access.operands)[: map_slots(access)[0].first_operand]
    fixed[-1] = buffer
    access.operands = [*fixed, *new_ops]
    access.properties["map"] = AffineMapAttr(new_map)
