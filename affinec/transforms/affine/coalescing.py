"""Coalescing a compute band's two innermost reduction loops into one, over shared
tiles collapsed to hold their iterations contiguously (`affinec-coalesce-reduction`).

A tensor core's k is 16 contiguous elements of a shared tile's row. A convolution
with few channels has no such k along its channels alone (ResNet-50's first layer:
4), but in an NHWC tile a filter row's columns and channels lie side by side: the
input pixels `ow * 2 + s` for `s` in 0..6, 4 channels each, are 28 contiguous
elements. Collapsing the tile's last two dimensions (columns x channels) and
coalescing the loops `s` and `c` into one loop `sc` over `s * 4 + c` makes that
row the reduction's innermost loop, read with unit stride in both tiles:

    %input_shared = memref.alloc() : memref<1x13x61x4xf16, 3>
    %filter_shared = memref.alloc() : memref<7x7x4x64xf16, 3>
    affine.for %r1 = 0 to 7 {
      affine.for %s1 = 0 to 7 {
        affine.for %c1 = 0 to 4 {
          %a = affine.load %input_shared[%n1, %oh1 * 2 + %r1, %ow1 * 2 + %s1, %c1]
          %b = affine.load %filter_shared[%r1, %s1, %c1, %k1]

becomes

    %input_shared = memref.alloc() : memref<1x13x244xf16, 3>
    %filter_shared = memref.alloc() : memref<7x28x64xf16, 3>
    affine.for %r1 = 0 to 7 {
      affine.for %sc = 0 to 28 {
        %a = affine.load %input_shared[%n1, %oh1 * 2 + %r1, %ow1 * 8 + %sc]
        %b = affine.load %filter_shared[%r1, %sc, %k1]

Every access to a collapsed tile (the copies into it too) indexes `[.., x, y, ..]`
as `[.., x * C + y, ..]`; the coalesced loop runs the same iterations in the same order, so
the result is bit for bit the same. A band is coalesced only where every tile it
reads is indexed so (the inner loop alone along a last dimension it spans whole, the
outer loop with unit coefficient along the one before, neither elsewhere), which is
what makes `sc` a k for `affinec-mma-sync`; other bands are left as they are.

What `affinec-mma-sync` then does with it, and its one difference from the loops:
k = 28 is padded to 32 with zero filter rows, and a pixel's 4 padded elements of k
are the next input column's channels (the tile's rows are contiguous; that is what
avoids an im2col copy). They are multiplied by zero, so finite inputs give the
exact products of the loops; an infinite or NaN input also turns the output pixel
whose window ends just before it into NaN (inf × 0), where the loops would not.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import IndexType, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap
from xdsl.rewriter import Rewriter

from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, mapping_of
from affinec.ir.affine_exprs import linear_form, simplify_expr


@dataclass
class Coalescing:
    """One compute band's two innermost loops to coalesce, and the tiles it reads
    with the dimension of each that the inner loop indexes (collapsed with the one
    before it)."""

    outer: affine.ForOp
    inner: affine.ForOp
    tiles: dict[SSAValue, int]


def plan_coalescings(grid: affine.ParallelOp) -> list[Coalescing]:
    """The block bands of `grid` whose two innermost loops can be coalesced."""
    bands = [
        op
        for op in grid.walk()
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == BLOCK
    ]
    return [plan for band in bands if (plan := _plan_band(band)) is not None]


def _plan_band(band: affine.ParallelOp) -> Coalescing | None:
    loops = _perfect_nest(band.body.block)
    if len(loops) < 2:
        return None
    outer, inner = loops[-2], loops[-1]
    if _trip_count(outer) is None or (columns := _trip_count(inner)) is None:
        return None
    ivs = {outer.induction_variable, inner.induction_variable}
    tiles: dict[SSAValue, int] = {}
    for op in inner.body.block.walk():
        if not any(v in ivs for v in op.operands):
            continue
        if not (isinstance(op, affine.LoadOp) and _is_shared(op.memref)):
            return None
        dim = _contiguous_dim(op, outer, inner, columns)
        if dim is None or tiles.setdefault(op.memref, dim) != dim:
            return None
    if not tiles or not all(_collapsible(t) for t in tiles):
        return None
    return Coalescing(outer, inner, tiles)


def _perfect_nest(block: Block) -> list[affine.ForOp]:
    loops = []
    while True:
        ops = [o for o in block.ops if not isinstance(o, affine.YieldOp)]
        if len(ops) != 1 or not isinstance(ops[0], affine.ForOp) or ops[0].inits:
            return loops
        loops.append(ops[0])
        block = ops[0].body.block


def _trip_count(loop: affine.ForOp) -> int | None:
    """The trip count of `for %i = 0 to N` (constant bounds, unit step)."""
    lower, upper = loop.lowerBoundMap.data, loop.upperBoundMap.data
    if loop.step.value.data != 1 or len(lower.results) != 1 or len(upper.results) != 1:
        return None
    lo, hi = lower.results[0], upper.results[0]
    if not (isinstance(lo, AffineConstantExpr) and isinstance(hi, AffineConstantExpr)):
        return None
    return hi.value if lo.value == 0 and hi.value > 0 else None


def _is_shared(buffer: SSAValue) -> bool:
    return (
        isinstance(buffer.type, MemRefType)
        and gpu.memory_space(buffer.type) == gpu.WORKGROUP_ADDRESS_SPACE
        and isinstance(buffer.owner, memref.AllocOp)
    )


def _contiguous_dim(
    load: affine.LoadOp, outer: affine.ForOp, inner: affine.ForOp, columns: int
) -> int | None:
    """The dimension `j` of the tile `load` reads as `[.., x + outer, inner, ..]`
    (`x` at `j - 1`, the inner loop alone at `j`, spanning it whole: `columns` long),
    neither loop anywhere else; None if it does not read so."""
    t = load.memref.type
    assert isinstance(t, MemRefType)
    shape = t.get_shape()
    m = load.map.data
    forms = [linear_form(e, m.num_dims, m.num_symbols) for e in m.results]
    if m.num_symbols or any(f is None for f in forms):
        return None

    def coefficient(k: int, iv: SSAValue) -> int:
        form = forms[k]
        assert form is not None
        return sum(c for c, v in zip(form[0], load.indices, strict=True) if v is iv)

    o, i = outer.induction_variable, inner.induction_variable
    for j in range(1, len(forms)):
        y = forms[j]
        assert y is not None
        if not (coefficient(j, i) == 1 and sum(map(abs, y[0])) == 1 and y[2] == 0):
            continue
        others = [k for k in range(len(forms)) if k not in (j - 1, j)]
        if (
            shape[j] == columns
            and coefficient(j - 1, o) == 1
            and coefficient(j - 1, i) == 0
            and all(coefficient(k, o) == 0 == coefficient(k, i) for k in others)
        ):
            return j
    return None


def _collapsible(tile: SSAValue) -> bool:
    """Every use of the tile is one `collapse_tile` rewrites (or a dealloc)."""
    return all(
        isinstance(u.operation, affine.LoadOp | affine.StoreOp | memref.DeallocOp)
        or (isinstance(u.operation, nvgpu.DeviceAsyncCopyOp) and u.index == 0)
        for u in tile.uses
    )


# -- the rewrite ------------------------------------------------------------------------


def coalesce(plan: Coalescing) -> None:
    """Collapse the plan's tiles, then coalesce its loops (in place)."""
    for tile, dim in plan.tiles.items():
        collapse_tile(tile, dim)
    _coalesce_loops(plan.outer, plan.inner)


def collapse_tile(tile: SSAValue, dim: int) -> SSAValue:
    """Reallocate `tile` with its dimensions `dim - 1` and `dim` as one, every
    access `[.., x, y, ..]` there rewritten as `[.., x * C + y, ..]` (`C` the extent
    of `dim`); the new buffer."""
    alloc = tile.owner
    assert isinstance(alloc, memref.AllocOp)
    t = tile.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape())
    columns = shape[dim]
    shape[dim - 1 : dim + 1] = [shape[dim - 1] * columns]
    new_alloc = memref.AllocOp(
        [],
        [],
        gpu.in_memory_space(
            MemRefType(t.get_element_type(), shape),
            gpu.WORKGROUP_ADDRESS_SPACE,
        ),
    )
    new_alloc.memref.name_hint = tile.name_hint
    block = alloc.parent_block()
    assert block is not None
    block.insert_op_before(new_alloc, alloc)
    new = new_alloc.memref
    for use in list(tile.uses):
        op = use.operation
        if isinstance(op, affine.LoadOp):
            m = _collapsed(op.map.data, dim, columns)
            _replace(op, affine.LoadOp(new, op.indices, m))
        elif isinstance(op, affine.StoreOp):
            m = _collapsed(op.map.data, dim, columns)
            _replace(op, affine.StoreOp(op.value, new, op.indices, m))
        elif isinstance(op, nvgpu.DeviceAsyncCopyOp):
            indices = list(op.dstIndices)
            d = AffineExpr.dimension
            flat = affine.ApplyOp(
                indices[dim - 1 : dim + 1], AffineMap(2, 0, (d(0) * columns + d(1),))
            )
            op.parent_block().insert_op_before(flat, op)  # pyright: ignore
            indices[dim - 1 : dim + 1] = [flat.result]
            copy = nvgpu.DeviceAsyncCopyOp(
                op.src,
                op.srcIndices,
                new,
                indices,
                op.dstElements.value.data,
                op.srcElements,
                op.bypassL1 is not None,
            )
            _replace(op, copy)
        else:
            assert isinstance(op, memref.DeallocOp)
            _replace(op, memref.DeallocOp.get(new))
    block.erase_op(alloc)
    return new


def _collapsed(m: AffineMap, dim: int, columns: int) -> AffineMap:
    results = list(m.results)
    results[dim - 1 : dim + 1] = [results[dim - 1] * columns + results[dim]]
    return AffineMap(m.num_dims, m.num_symbols, tuple(results))


def _replace(old: Operation, new: Operation) -> None:
    new.attributes |= old.attributes
    Rewriter.replace_op(old, new)


def _coalesce_loops(outer: affine.ForOp, inner: affine.ForOp) -> None:
    """`for o < O { for i < I { body } }` as `for oi < O * I { body }`, every
    access's collapsed index `x * I + y` (`x = .. + o`, `y = i`) as `.. * I + oi`."""
    count_o, count_i = _trip_count(outer), _trip_count(inner)
    assert count_o is not None and count_i is not None
    body = Block(arg_types=[IndexType()])
    o, i = outer.induction_variable, inner.induction_variable
    hints = [v.name_hint for v in (o, i) if v.name_hint]
    body.args[0].name_hint = "".join(h.rstrip("0123456789_") for h in hints) or None
    fused = body.args[0]
    for op in list(inner.body.block.ops):
        op.detach()
        body.add_op(op)
    for op in list(body.walk()):
        if isinstance(op, affine.LoadOp) and (o in op.indices or i in op.indices):
            _replace(op, _load_over(op, o, i, fused))
    loop = affine.ForOp(0, count_o * count_i, body)
    loop.attributes |= inner.attributes
    parent = outer.parent_block()
    assert parent is not None
    parent.insert_op_before(loop, outer)
    parent.erase_op(outer)


def _load_over(
    load: affine.LoadOp, o: SSAValue, i: SSAValue, fused: SSAValue
) -> affine.LoadOp:
    """`load` with `o` as 0 and `i` as `fused` (its last index is `.. * I + o * I +
    i`, so that is `.. * I + fused`), the two loops' variables dropped."""
    m = load.map.data
    keep = [k for k, v in enumerate(load.indices) if v is not o and v is not i]
    position = {old: new for new, old in enumerate(keep)}
    d = AffineExpr.dimension
    replacements = [
        d(len(keep)) if v is i else AffineExpr.constant(0) if v is o else d(position[k])
        for k, v in enumerate(load.indices)
    ]
    n = len(keep) + 1
    results = tuple(
        simplify_expr(e.replace_dims_and_symbols(replacements, []), n, 0)
        for e in m.results
    )
    operands = [load.indices[k] for k in keep] + [fused]
    return affine.LoadOp(load.memref, operands, AffineMap(len(operands), 0, results))
