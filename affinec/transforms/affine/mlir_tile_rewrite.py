"""The rewrite of MLIR's `affine-loop-tile` once the sizes are known: the tiled nest
(`tile_band_like_mlir`, MLIR's `tilePerfectlyNested`) and, with `separate`, full
tiles versioned apart from partial ones (`separate_full_tiles`). `mlir_tiling.py`
says what the loops' bounds become.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects.builtin import IndexType
from xdsl.ir import Block, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap, AffineSet
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from affinec.dialects import affine
from affinec.ir.affine_exprs import linear_form, simplify_expr
from affinec.transforms.affine.analysis import compose_map, map_slots
from affinec.transforms.affine.mlir_tile_bands import (
    constant_trip_count,
    largest_divisor_of_trip_count,
    perfect_nest,
)
from affinec.transforms.affine.rewriting import as_substitution, set_map_slots


def _identity() -> AffineMap:
    return AffineMap(1, 0, (AffineExpr.dimension(0),))


def _shift(amount: int) -> AffineMap:
    return AffineMap(1, 0, (AffineExpr.dimension(0) + amount,))


def _for_like(
    lower: AffineMap,
    lower_ops: Sequence[SSAValue],
    upper: AffineMap,
    upper_ops: Sequence[SSAValue],
    step: int,
) -> affine.ForOp:
    return affine.ForOp(
        lower,
        upper,
        Block(arg_types=[IndexType()]),
        lower_operands=lower_ops,
        upper_operands=upper_ops,
        step=step,
    )


def _intra_upper(
    loop: affine.ForOp, tile: affine.ForOp, size: int
) -> tuple[AffineMap, list[SSAValue]]:
    """The upper bound of the intra-tile loop of `loop` (see the module docstring)."""
    step = loop.step.value.data
    iv = tile.induction_variable
    count = constant_trip_count(loop)
    if count is not None and count < size:
        return _shift(count * step), [iv]
    if largest_divisor_of_trip_count(loop) % size == 0:
        return _shift(size * step), [iv]
    upper = map_slots(loop)[1]
    um = upper.map
    new_dim = AffineExpr.dimension(um.num_dims)
    results = (new_dim + size * step, *um.results)
    operands = [*upper.operands[: um.num_dims], iv, *upper.operands[um.num_dims :]]
    return AffineMap(um.num_dims + 1, um.num_symbols, results), operands


def tile_band_like_mlir(
    band: Sequence[affine.ForOp], sizes: Sequence[int]
) -> tuple[list[affine.ForOp], list[affine.ForOp]]:
    """Tile the band as MLIR's `tilePerfectlyNested`; return (tile, intra loops)."""
    tiles: list[affine.ForOp] = []
    for loop, size in zip(band, sizes, strict=True):
        lower, upper = map_slots(loop)
        tiles.append(
            _for_like(
                lower.map,
                lower.operands,
                upper.map,
                upper.operands,
                size * loop.step.value.data,
            )
        )
    intra: list[affine.ForOp] = []
    for loop, tile, size in zip(band, tiles, sizes, strict=True):
        upper, upper_ops = _intra_upper(loop, tile, size)
        intra.append(
            _for_like(
                _identity(),
                [tile.induction_variable],
                upper,
                upper_ops,
                loop.step.value.data,
            )
        )
    nest = [*tiles, *intra]
    for outer, inner in zip(nest, nest[1:], strict=False):
        outer.body.block.add_ops([inner, affine.YieldOp()])
    for loop in nest:
        loop.location = band[0].location
    for old, new in zip(band, intra, strict=True):
        old.induction_variable.replace_all_uses_with(new.induction_variable)
    body = band[-1].body.block
    for op in list(body.ops):
        op.detach()
        intra[-1].body.block.add_op(op)
    parent = band[0].parent_block()
    assert parent is not None
    parent.insert_op_before(tiles[0], band[0])
    band[0].detach()
    band[0].erase()
    return tiles, intra


def _full_tile_constraints(
    loop: affine.ForOp,
) -> list[tuple[AffineExpr, list[SSAValue]]]:
    """`ub_k - (%t + size) >= 0` for each upper bound of an intra-tile loop besides
    the tile's own `%t + size`, as (expression over the values, values)."""
    upper = map_slots(loop)[1]
    um = upper.map
    if len(um.results) == 1:
        return []
    full, *others = um.results
    out = []
    for other in others:
        expr, values = as_substitution(
            AffineMap(um.num_dims, um.num_symbols, (other - full,)), upper.operands
        )
        out.append((expr, values))
    return out


def separation_condition(
    intra: Sequence[affine.ForOp],
) -> tuple[AffineSet, list[SSAValue]]:
    """The condition under which every intra-tile loop runs a full tile: over the
    tile variables (dims, in loop order) and the function's values (symbols)."""
    constraints: list[tuple[AffineExpr, list[SSAValue]]] = []
    for loop in intra:
        constraints += _full_tile_constraints(loop)
    dims: list[SSAValue] = []
    syms: list[SSAValue] = []
    tile_ivs = [loop.lowerBoundOperands[0] for loop in intra]
    for _, values in constraints:
        for v in values:
            if v in tile_ivs and v not in dims:
                dims.append(v)
            elif v not in tile_ivs and v not in syms:
                syms.append(v)
    dims.sort(key=tile_ivs.index)
    exprs: list[AffineExpr] = []
    for expr, values in constraints:
        replacements = [
            AffineExpr.dimension(dims.index(v))
            if v in dims
            else AffineExpr.symbol(syms.index(v))
            for v in values
        ]
        e = expr.replace_dims_and_symbols(replacements, [])
        e = _tightened(simplify_expr(e, len(dims), len(syms)), len(dims), len(syms))
        if e not in exprs:
            exprs.append(e)
    if not exprs:
        true = AffineConstraintExpr(
            AffineConstraintKind.eq, AffineExpr.constant(0), AffineExpr.constant(0)
        )
        return AffineSet(0, 0, (true,)), []
    set_ = AffineSet(
        len(dims),
        len(syms),
        tuple(
            AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))
            for e in exprs
        ),
    )
    return set_, [*dims, *syms]


def _tightened(e: AffineExpr, num_dims: int, num_syms: int) -> AffineExpr:
    """`e >= 0` divided through by the gcd of its coefficients (the constant rounded
    down), as MLIR normalizes a constraint."""
    form = linear_form(e, num_dims, num_syms)
    if form is None:
        return e
    g = math.gcd(*form[0], *form[1])
    if g <= 1:
        return e
    flat = [c // g for c in (*form[0], *form[1])] + [form[2] // g]
    return AffineExpr.from_flat_form(flat, num_dims, num_syms, [])


def separate_full_tiles(intra: Sequence[affine.ForOp]) -> None:
    """Version the intra-tile nest on `separation_condition`: the then branch a copy
    whose loops run `%t` to `%t + size * step`, the else branch the nest as it is.
    MLIR does it only when every intra-tile loop has step 1; so does this."""
    if any(loop.step.value.data != 1 for loop in intra):
        return
    condition, operands = separation_condition(intra)
    full = intra[0].clone()
    loops = perfect_nest(full)[: len(intra)]
    for loop in loops:
        upper, upper_ops = map_slots(loop)[1].map, map_slots(loop)[1].operands
        if len(upper.results) > 1:
            first = AffineMap(upper.num_dims, upper.num_symbols, (upper.results[0],))
            m, ops = compose_map(first, upper_ops, fold_producers=False)
            _set_upper(loop, m, ops)
    parent = intra[0].parent_block()
    assert parent is not None
    guard = affine.IfOp(condition, operands, Block([full, affine.YieldOp()]))
    parent.insert_op_before(guard, intra[0])
    intra[0].detach()
    guard.else_region.add_block(Block([intra[0], affine.YieldOp()]))
    guard.location = intra[0].location


def _set_upper(loop: affine.ForOp, m: AffineMap, operands: Sequence[SSAValue]) -> None:
    lower = map_slots(loop)[0]
    set_map_slots(loop, [(lower.map, lower.operands), (m, operands)])
