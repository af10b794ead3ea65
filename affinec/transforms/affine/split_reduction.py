"""Split a contraction's channel reduction into partial sums and the band that adds
them (split-K): more blocks for a layer whose outputs alone make too few.

The naive band is cut in two. The first computes, for each of S splits of the
channel loop, a partial sum into a workspace of f32; the second adds the partial
sums in a fixed order (split 0, then 1, ...) and applies the epilogue once:

    affine.parallel (%i, %j) = (0, 0) to (64, 100) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 1000 { ... %A[%i, %p] ... %B[%p, %j] ... }
      %sum = affine.load %acc[] : memref<f32>
      %relu = arith.maximumf %sum, %zero : f32
      affine.store %relu, %C[%i, %j] : memref<64x100xf32>
    }

with 4 splits becomes

    affine.parallel (%sk, %i, %j) = (0, 0, 0) to (4, 64, 100) {
      %acc = memref.alloca() : memref<f32>
      affine.store %zero, %acc[] : memref<f32>
      affine.for %p = 0 to 250 { ... %A[%i, %sk * 250 + %p] ... }
      %sum = affine.load %acc[] : memref<f32>
      affine.store %sum, %partials[%sk, %i, %j] : memref<4x64x100xf32>
    } {affinec.splits = 4 : i64}
    affine.parallel (%i, %j) = (0, 0) to (64, 100) {
      %p0 = affine.load %partials[0, %i, %j] : memref<4x64x100xf32>
      %p1 = affine.load %partials[1, %i, %j] : memref<4x64x100xf32>
      %s1 = arith.addf %p0, %p1 : f32
      ...
      %relu = arith.maximumf %s3, %zero : f32
      affine.store %relu, %C[%i, %j] : memref<64x100xf32>
    }

A channel count that S does not divide is padded with zeros first (`pad_loop`: the
added products are 0 × 0), so every split has the same extent. The result is
deterministic — the same bits on every run, with no atomics — and with one split
it is the unsplit one, bit for bit (the combining band reads the one partial sum).
With more, the order of summation changes, and so may the rounding.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    IndexType,
    IntegerAttr,
    MemRefType,
    f32,
    i64,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import SPLITS
from affinec.transforms.affine.analysis import (
    constant_trip_extent,
    non_simple_parallel_dims,
)
from affinec.transforms.affine.pad_reduction import channel_loop, pad_loop
from affinec.transforms.affine.rewriting import constant_map, move_ops, substitute


@dataclass(frozen=True)
class NaiveSum:
    """The parts of a naive band: the accumulator, its zeroing, the reduction nest,
    the load of the sum, and the store of the result (the epilogue between)."""

    band: affine.ParallelOp
    acc: memref.AllocaOp
    init: affine.StoreOp
    nest: affine.ForOp
    total: affine.LoadOp
    store: affine.StoreOp

    @property
    def epilogue(self) -> list[Operation]:
        """The ops from the sum's load to the output's store, both excluded."""
        ops = list(self.band.body.block.ops)
        return ops[ops.index(self.total) + 1 : ops.index(self.store)]


def naive_sum(band: affine.ParallelOp) -> NaiveSum:
    """The parts of `band` as the frontend writes it; a located error otherwise."""
    ops = [o for o in band.body.block.ops if not isinstance(o, affine.YieldOp)]
    match ops:
        case [
            memref.AllocaOp() as acc,
            affine.StoreOp() as init,
            affine.ForOp() as nest,
            affine.LoadOp() as total,
            *_,
            affine.StoreOp() as store,
        ] if (
            init.memref is acc.memref
            and total.memref is acc.memref
            and store.memref is not acc.memref
        ):
            return NaiveSum(band, acc, init, nest, total, store)
    raise PassError(
        band,
        "expected the naive form of a contraction: an accumulator zeroed, one nest "
        "of reduction loops adding to it, its sum loaded, the epilogue, one store",
    )


def band_extents(band: affine.ParallelOp) -> list[int]:
    """The constant extents of a simple band; a located error otherwise."""
    if non_simple_parallel_dims(band) or band.upper_bound_operands:
        raise PassError(band, "expected constant bounds from 0, step 1")
    return list(band.upperBoundsMap.data.eval([], []))


def split_reduction(
    band: affine.ParallelOp, channel_depth: int, splits: int, partials: SSAValue
) -> tuple[affine.ParallelOp, affine.ParallelOp]:
    """Split `band`'s reduction loop at `channel_depth` into `splits` (see the module
    docstring); `partials` is the f32 workspace of shape (splits, *band's extents).
    Returns the band of partial sums and the combining band, in place of `band`."""
    parts = naive_sum(band)
    extents = band_extents(band)
    loop = channel_loop(band, channel_depth)
    extent = constant_trip_extent(loop)
    if extent is None or extent < splits:
        raise PassError(
            loop,
            f"splits={splits} needs at least {splits} iterations of the channel loop, "
            f"it has {extent}",
        )
    pad_loop(loop, splits)
    chunk = -(-extent // splits)
    combine = band.clone()
    parent = band.parent_block()
    assert parent is not None
    parent.insert_op_after(combine, band)

    partial = _band_of_partial_sums(parts, extents, splits, partials)
    sk = partial.body.block.args[0]
    substitute(
        loop.induction_variable,
        AffineExpr.dimension(0) * chunk + AffineExpr.dimension(1),
        [sk, loop.induction_variable],
    )
    loop.properties["upperBoundMap"] = AffineMapAttr(constant_map([chunk]))
    _combine_partial_sums(naive_sum(combine), splits, partials)
    return partial, combine


def _band_of_partial_sums(
    parts: NaiveSum, extents: list[int], splits: int, partials: SSAValue
) -> affine.ParallelOp:
    """`parts.band` with a leading split dimension, storing its sum to `partials`."""
    band = parts.band
    n = len(extents)
    block = Block(arg_types=[IndexType()] * (n + 1))
    block.args[0].name_hint = "sk"
    for new, old in zip(block.args[1:], band.induction_variables, strict=True):
        new.name_hint = old.name_hint
        old.replace_all_uses_with(new)
    for op in reversed([*parts.epilogue, parts.store]):
        op.detach()
        op.erase()
    move_ops(list(band.body.block.ops), block)
    terminator = block.last_op
    assert terminator is not None
    block.insert_op_before(
        affine.StoreOp(parts.total.result, partials, list(block.args)), terminator
    )
    new = affine.ParallelOp(
        constant_map([0] * (n + 1)),
        [1] * (n + 1),
        constant_map([splits, *extents]),
        [1] * (n + 1),
        block,
    )
    new.attributes = dict(band.attributes)
    new.attributes[SPLITS] = IntegerAttr(splits, i64)
    new.location = band.location
    parent = band.parent_block()
    assert parent is not None
    parent.insert_op_before(new, band)
    band.detach()
    band.erase()
    return new


def _combine_partial_sums(parts: NaiveSum, splits: int, partials: SSAValue) -> None:
    """Replace the reduction of `parts.band` by the sum of the partial sums, in order."""
    ivs = list(parts.band.induction_variables)
    n = len(ivs)
    ops: list[Operation] = []
    total: SSAValue | None = None
    for k in range(splits):
        index = AffineMap(
            n, 0, (AffineExpr.constant(k), *(AffineExpr.dimension(d) for d in range(n)))
        )
        load = affine.LoadOp(partials, ivs, index)
        load.result.name_hint = f"partial{k}"
        ops.append(load)
        if total is None:
            total = load.result
        else:
            add = arith.AddfOp(total, load.result)
            add.result.name_hint = "partials"
            ops.append(add)
            total = add.result
    assert total is not None
    parts.band.body.block.insert_ops_before(ops, parts.total)
    parts.total.result.replace_all_uses_with(total)
    for op in (parts.total, parts.nest, parts.init, parts.acc):
        op.detach()
        op.erase()


def partials_type(band: affine.ParallelOp, splits: int) -> MemRefType:
    """The workspace `split_reduction` needs for `band`: f32, (splits, *extents)."""
    return MemRefType(f32, [splits, *band_extents(band)])
