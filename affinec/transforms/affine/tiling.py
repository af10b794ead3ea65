"""Tiling bands: the reference design's tiling, simple loops in, simple loops out,
partial tiles bounded by `min` groups (`tile_parallel` for `affine.parallel`,
`tile_band` for a perfect band of `affine.for`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    UnitAttr,
)
from xdsl.ir import Attribute, Operation
from xdsl.ir.affine import AffineExpr, AffineMap, AffineSymExpr

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import TILE
from affinec.ir.affine_exprs import (
    grouped,
    simplify_expr,
)
from affinec.transforms.affine.analysis import (
    compose_map,
    map_slots,
)
from affinec.transforms.affine.rewriting import (
    constant_map,
    fresh_block,
    move_ops,
    simplify_bounds,
    substitute,
)

# -- tiling -------------------------------------------------------------------------------


def tile_parallel(
    op: affine.ParallelOp,
    sizes: Sequence[int],
    outer_attributes: Mapping[str, Attribute],
    inner_attributes: Mapping[str, Attribute],
) -> tuple[affine.ParallelOp, affine.ParallelOp]:
    """Tile a simple `affine.parallel` band into an outer band over tiles and an inner
    band over the points of one tile; return (outer, inner).

        affine.parallel (%i) = (0) to (100) { ... %i ... }
    becomes
        affine.parallel (%i0) = (0) to (7) {
          affine.parallel (%i1) = (0) to (min(16, -%i0 * 16 + 100)) {
            ... %i0 * 16 + %i1 ...
          }
        }

    The outer band's bounds are the old upper bounds `ceildiv` the sizes; the inner
    band's are the size, and, where a partial tile is possible, the remaining extent.
    """
    n = len(sizes)
    upper = map_slots(op)[1]
    um = upper.map
    groups = grouped(um.results, op.upper_groups)
    for k, (group, t) in enumerate(zip(groups, sizes, strict=True)):
        if t > 1 and any(_reads_symbols(e) for e in group):
            raise PassError(
                op,
                f"dimension {k} runs to a bound known only at run time (a dynamic "
                f"batch): it takes a tile size of 1, got {t}",
            )

    outer_results = [
        simplify_expr(e.ceil_div(t), um.num_dims, um.num_symbols)
        for group, t in zip(groups, sizes, strict=True)
        for e in group
    ]
    outer_map, outer_ops = compose_map(
        AffineMap(um.num_dims, um.num_symbols, tuple(outer_results)), upper.operands
    )
    outer = affine.ParallelOp(
        AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in sizes)),
        [1] * n,
        outer_map,
        op.upper_groups,
        fresh_block(op.induction_variables, "0"),
        upper_operands=outer_ops,
    )
    outer.attributes = dict(outer_attributes)
    outer.location = op.location
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(outer, op)

    # The inner bounds are over (outer ivs..., old dims...)[old symbols...].
    shift = [AffineExpr.dimension(n + k) for k in range(um.num_dims)]
    inner_results: list[AffineExpr] = []
    inner_groups: list[int] = []
    for k, (group, t) in enumerate(zip(groups, sizes, strict=True)):
        tile_start = AffineExpr.dimension(k) * t
        # A tile of one point is never partial: the outer band runs only over
        # tiles that hold a point (this keeps a symbolic extent out of the block).
        results = [AffineExpr.constant(t)] + [
            e.replace_dims_and_symbols(shift, []) - tile_start
            for e in (group if t > 1 else [])
        ]
        inner_results += results
        inner_groups.append(len(results))
    outer_ivs = list(outer.induction_variables)
    inner_ops = (
        outer_ivs
        + list(upper.operands[: um.num_dims])
        + list(upper.operands[um.num_dims :])
    )
    inner_map, inner_ops = compose_map(
        AffineMap(n + um.num_dims, um.num_symbols, tuple(inner_results)), inner_ops
    )
    block = fresh_block(op.induction_variables, "1")
    inner = affine.ParallelOp(
        AffineMap(0, 0, tuple(AffineExpr.constant(0) for _ in sizes)),
        [1] * n,
        inner_map,
        inner_groups,
        block,
        upper_operands=inner_ops,
    )
    inner.attributes = dict(inner_attributes)
    inner.location = op.location
    outer.body.block.add_ops([inner, affine.YieldOp()])
    simplify_bounds(inner)

    tiled = AffineExpr.dimension(0)
    for old, o, i, t in zip(
        op.induction_variables, outer_ivs, block.args, sizes, strict=True
    ):
        substitute(old, tiled * t + AffineExpr.dimension(1), [o, i])
    move_ops(list(op.body.block.ops), block)
    op.detach()
    op.erase()
    return outer, inner


def tile_band(
    band: Sequence[affine.ForOp], sizes: Sequence[int | None]
) -> tuple[list[affine.ForOp], list[affine.ForOp]]:
    """Tile a perfect band of simple `affine.for` loops; return (tile loops, point
    loops). A size of None leaves the loop whole: one tile, its point loop keeping
    the old bounds.

        affine.for %c = 0 to 10 { affine.for %r = 0 to 7 { ... } }
    with sizes (4, 7) becomes
        affine.for %c0 = 0 to 3 { affine.for %r0 = 0 to 1 {
          affine.for %c1 = 0 to min affine_map<(d0) -> (4, d0 * -4 + 10)>(%c0) {
            affine.for %r1 = 0 to 7 { ... %c0 * 4 + %c1 ... %r0 * 7 + %r1 ... }
        } } {affinec.tile} } {affinec.tile}

    Tile loops carry the `affinec.tile` attribute. The band's bounds must not use its
    own induction variables.
    """
    parent = band[0].parent_block()
    assert parent is not None
    tiles: list[affine.ForOp] = []
    where = parent
    anchor: Operation | None = band[0]
    for loop, t in zip(band, sizes, strict=True):
        upper = map_slots(loop)[1]
        um = upper.map
        if t is None:
            m, ops = constant_map([1]), []
        else:
            results = [
                simplify_expr(e.ceil_div(t), um.num_dims, um.num_symbols)
                for e in um.results
            ]
            m, ops = compose_map(
                AffineMap(um.num_dims, um.num_symbols, tuple(results)), upper.operands
            )
        tile = affine.ForOp(
            0, m, fresh_block([loop.induction_variable], "0"), upper_operands=ops
        )
        tile.attributes[TILE] = UnitAttr()
        tile.location = loop.location
        if anchor is not None:
            where.insert_op_before(tile, anchor)
            anchor = None
        else:
            where.add_op(tile)
        tiles.append(tile)
        where = tile.body.block

    points: list[affine.ForOp] = []
    for loop, tile, t in zip(band, tiles, sizes, strict=True):
        upper = map_slots(loop)[1]
        um = upper.map
        if t is None:
            m, ops = um, list(upper.operands)
        else:
            shift = [AffineExpr.dimension(1 + k) for k in range(um.num_dims)]
            start = AffineExpr.dimension(0) * t
            results = [AffineExpr.constant(t)] + [
                e.replace_dims_and_symbols(shift, []) - start for e in um.results
            ]
            m, ops = compose_map(
                AffineMap(1 + um.num_dims, um.num_symbols, tuple(results)),
                [tile.induction_variable, *upper.operands],
            )
        point = affine.ForOp(
            0, m, fresh_block([loop.induction_variable], "1"), upper_operands=ops
        )
        point.attributes = dict(loop.attributes)
        point.location = loop.location
        where.add_op(point)
        points.append(point)
        where = point.body.block
    for loop in [*tiles, *points[:-1]]:
        loop.body.block.add_op(affine.YieldOp())
    for point in points:
        simplify_bounds(point)

    for loop, tile, point, t in zip(band, tiles, points, sizes, strict=True):
        if t is None:
            substitute(
                loop.induction_variable,
                AffineExpr.dimension(0),
                [point.induction_variable],
            )
        else:
            substitute(
                loop.induction_variable,
                AffineExpr.dimension(0) * t + AffineExpr.dimension(1),
                [tile.induction_variable, point.induction_variable],
            )
    move_ops(list(band[-1].body.block.ops), points[-1].body.block)
    band[0].detach()
    band[0].erase()
    return tiles, points


def drop_leading_unit_dimension(op: affine.ParallelOp) -> affine.ParallelOp:
    """`op` without its first dimension, which must run from 0 to 1: its variable is
    0 wherever it was used. A split band's block band (tiled by 1 along the split)
    so takes the shape of the unsplit one, its dimensions the output's.

        affine.parallel (%sk1, %i1) = (0, 0) to (1, 16) { ... %sk0 + %sk1 ... }
    becomes
        affine.parallel (%i1) = (0) to (16) { ... %sk0 ... }
    """
    lower, upper = map_slots(op)
    first_lower, first_upper = (
        grouped(lower.map.results, op.lower_groups)[0],
        grouped(upper.map.results, op.upper_groups)[0],
    )
    assert first_lower == [AffineExpr.constant(0)], first_lower
    assert first_upper == [AffineExpr.constant(1)], first_upper
    lm, um = lower.map, upper.map
    new = affine.ParallelOp(
        AffineMap(lm.num_dims, lm.num_symbols, lm.results[1:]),
        op.lower_groups[1:],
        AffineMap(um.num_dims, um.num_symbols, um.results[1:]),
        op.upper_groups[1:],
        fresh_block(op.induction_variables[1:]),
        lower_operands=lower.operands,
        upper_operands=upper.operands,
        steps=op.step_values[1:],
    )
    new.attributes = dict(op.attributes)
    new.location = op.location
    substitute(op.induction_variables[0], AffineExpr.constant(0), [])
    for old, iv in zip(op.induction_variables[1:], new.body.block.args, strict=True):
        old.replace_all_uses_with(iv)
    move_ops(list(op.body.block.ops), new.body.block)
    parent = op.parent_block()
    assert parent is not None
    parent.insert_op_before(new, op)
    op.detach()
    op.erase()
    return new


def _reads_symbols(e: AffineExpr) -> bool:
    return any(isinstance(x, AffineSymExpr) for x in e.dfs())
