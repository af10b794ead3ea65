"""Shared buffers stored by phase: a dimension's even indices, then its odd ones.

A strided window's input tile holds every input column, and the warps read every
other one: with `ldmatrix`'s 16-byte-aligned rows, twice any row pitch is a
multiple of 32 bytes, so the eight rows of a phase fall on four 16-byte bank groups
— a 2-way conflict that no padding of the rows removes. Stored by phase, a tap's
columns are consecutive again:

    input_shared[r, c, k]            c = 2 * p + s    (p: the lane's output column)

becomes, for an extent of C columns and H = ceil(C / 2),

    input_shared[r, (c mod 2) * H + c floordiv 2, k]

the copies writing where the reads look (each index rewritten through one
`affine.apply`, the buffer's dimension grown to 2 H). Nothing else changes, so the
result is bit for bit the same; the interpreter runs the rewritten IR as any other.

`best_phase_split` chooses, per buffer, the dimension and stride whose phase order
costs its accesses fewer wavefronts than the best padding of the buffer as it is
(`bank_conflicts.padded_cost`); `split_phases` rewrites the buffer and every access.
"""

from __future__ import annotations

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.dialects import affine, nvgpu
from affinec.transforms.gpu.bands import reallocated_shared
from affinec.transforms.gpu.bank_conflicts import Evaluated, evaluate, padded_cost

PHASES = (2,)
"""The strides a dimension may be stored by phase for (ResNet-50's and
MobileNetV2's strided windows are all stride 2)."""


def phase_extent(extent: int, phases: int) -> int:
    """The grown extent of a dimension stored in `phases` phases."""
    return phases * -(-extent // phases)


def _phased(evaluated: Evaluated, dim: int, phases: int, extent: int) -> Evaluated:
    half = -(-extent // phases)
    moved = []
    for op, lanes, width, weight in evaluated:
        lanes = [
            [*i[:dim], (i[dim] % phases) * half + i[dim] // phases, *i[dim + 1 :]]
            for i in lanes
        ]
        moved.append((op, lanes, width, weight))
    return moved


def best_phase_split(
    buffer: SSAValue, accesses: list[tuple[Operation, list, int]]
) -> tuple[int, int] | None:
    """The (dimension, phases) whose phase order costs `buffer`'s `accesses` the
    fewest wavefronts, each layout with its best padding; None where no phase order
    beats the buffer as it is. The innermost dimension (a row's contiguous elements,
    read in vectors) is never split."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    if not accesses or not all(_rewritable(op, buffer) for op, _, _ in accesses):
        return None
    if len({id(op) for op, _, _ in accesses}) < len(
        {id(u.operation) for u in buffer.uses}
    ):
        return None  # a use outside the thread bands, which the model does not see
    shape = list(t.get_shape())
    widest = max(w for _, _, w in accesses)
    evaluated = evaluate(accesses)
    if len(evaluated) < len(accesses):  # an address the model cannot follow
        return None
    _, best_cost = padded_cost(buffer, evaluated, widest=widest)
    best = None
    for dim in range(len(shape) - 1):
        for phases in PHASES:
            if shape[dim] < 2 * phases:
                continue
            grown = [*shape[:dim], phase_extent(shape[dim], phases), *shape[dim + 1 :]]
            moved = _phased(evaluated, dim, phases, shape[dim])
            _, cost = padded_cost(buffer, moved, grown, widest=widest)
            if cost < best_cost:
                best, best_cost = (dim, phases), cost
    return best


def _rewritable(op: Operation, buffer: SSAValue) -> bool:
    """An access `split_phases` can rewrite: the buffer as `ldmatrix`'s source, an
    asynchronous copy's destination, or an affine access's memref."""
    if isinstance(op, nvgpu.LdMatrixOp):
        return op.srcMemref is buffer
    if isinstance(op, nvgpu.DeviceAsyncCopyOp):
        return op.dst is buffer and op.src is not buffer
    return isinstance(
        op, affine.LoadOp | affine.StoreOp | affine.VectorLoadOp | affine.VectorStoreOp
    )


def split_phases(alloc: Operation, dim: int, phases: int) -> None:
    """Store `alloc`'s buffer with dimension `dim` in `phases` phases (see the
    module): a new buffer of the grown shape, every access's index along `dim`
    rewritten."""
    old = alloc.results[0]
    t = old.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    half = -(-shape[dim] // phases)
    shape[dim] = phases * half
    new = reallocated_shared(alloc, shape)
    d = AffineExpr.dimension(0)
    order = (d % phases) * half + d // phases
    for use in list(old.uses):
        _rewrite(use.operation, dim, order)
    old.replace_all_uses_with(new.memref)
    alloc.parent_block().erase_op(alloc)  # pyright: ignore


def _rewrite(op: Operation, dim: int, order: AffineExpr) -> None:
    if isinstance(op, nvgpu.LdMatrixOp | nvgpu.DeviceAsyncCopyOp):
        # the buffer comes first in the operands (srcMemref, dst), its indices next
        first = 1
        index = op.operands[first + dim]
        apply = affine.ApplyOp([index], AffineMap(1, 0, (order,)))
        block = op.parent_block()
        assert block is not None
        block.insert_op_before(apply, op)
        operands = list(op.operands)
        operands[first + dim] = apply.result
        op.operands = operands
        return
    assert isinstance(
        op, affine.LoadOp | affine.StoreOp | affine.VectorLoadOp | affine.VectorStoreOp
    )
    m = op.map.data
    results = list(m.results)
    results[dim] = order.replace_dims_and_symbols([results[dim]], [])
    op.map = type(op.map)(AffineMap(m.num_dims, m.num_symbols, tuple(results)))


__all__ = ["PHASES", "best_phase_split", "phase_extent", "split_phases"]
