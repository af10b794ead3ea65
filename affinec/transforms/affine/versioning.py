"""Separating full tiles from the partial one (Loopy's slabs, PlaidML's fast and
slow paths): `peel_last_iteration`, `version_full_tiles`."""

from __future__ import annotations

from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap, AffineSet
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from affinec.dialects import affine
from affinec.ir.affine_exprs import (
    grouped,
    tighten_constraint,
)
from affinec.transforms.affine.analysis import (
    body_ops,
    compose_map,
    constant_value,
    map_slots,
)
from affinec.transforms.affine.rewriting import (
    constant_map,
    rewrite_maps,
    set_map_slots,
    simplify_bounds,
)

# -- separating full tiles ----------------------------------------------------------------


def peel_last_iteration(loop: affine.ForOp) -> list[Operation]:
    """Run the last iteration of a simple loop with constant bounds after it, as its
    own copy of the body with the induction variable a constant; return the copy.

        affine.for %c0 = 0 to 3 { B(%c0) }
    becomes
        affine.for %c0 = 0 to 2 { B(%c0) }
        B(2)

    Bounds in both are simplified for the new ranges, so a `min` that only the last
    tile needed disappears from the loop. The loop needs at least two iterations, no
    iter_args, and its variable used only in affine maps.
    """
    (last,) = [
        constant_value(loop.upperBoundMap.data, k)
        for k in range(len(loop.upperBoundMap.data.results))
    ]
    assert last is not None and last >= 2 and not loop.inits
    iv = loop.induction_variable
    mapper: dict[SSAValue, SSAValue] = {}
    copies = [op.clone(mapper) for op in body_ops(loop.body.block)]
    parent = loop.parent_block()
    assert parent is not None
    parent.insert_ops_after(copies, loop)
    set_map_slots(loop, [(constant_map([0]), []), (constant_map([last - 1]), [])])
    users = {op: None for copy in copies for op in copy.walk() if iv in op.operands}
    for op in users:
        rewrite_maps(op, {iv: (AffineExpr.constant(last - 1), [])})
    for root in [loop, *copies]:
        for op in root.walk():
            simplify_bounds(op)
    return copies


def version_full_tiles(inner: affine.ParallelOp) -> affine.IfOp | None:
    """Separate the full tiles of a tiled band from the partial ones: the band, whose
    `min` upper bounds guard the partial tiles, moves into the else branch of an
    `affine.if` whose then branch has a copy with constant bounds (PlaidML's fast
    path, run by every tile but the last along each dimension).

        affine.parallel (%i1) = (0) to (min(16, -%i0 * 16 + 100)) { B }
    becomes
        affine.if affine_set<(d0) : (-d0 + 5 >= 0)>(%i0) {
          affine.parallel (%i1) = (0) to (16) { B }
        } else {
          affine.parallel (%i1) = (0) to (min(16, -%i0 * 16 + 100)) { B }
        }

    Returns the `affine.if`, or None when no dimension has a partial tile.
    """
    upper = map_slots(inner)[1]
    um = upper.map
    conditions: list[AffineExpr] = []
    full: list[AffineExpr] = []
    full_groups: list[int] = []
    for group in grouped(um.results, inner.upper_groups):
        # Results are simplified, so a constant bound is a constant expression.
        sizes = [e.value for e in group if isinstance(e, AffineConstantExpr)]
        if len(group) == 1 or not sizes:
            full += group
            full_groups.append(len(group))
            continue
        size = min(sizes)
        conditions += [e - size for e in group if not isinstance(e, AffineConstantExpr)]
        full.append(AffineExpr.constant(size))
        full_groups.append(1)
    if not conditions:
        return None
    cond_map, cond_ops = compose_map(
        AffineMap(um.num_dims, um.num_symbols, tuple(conditions)), upper.operands
    )
    condition = AffineSet(
        cond_map.num_dims,
        cond_map.num_symbols,
        tuple(
            AffineConstraintExpr(
                AffineConstraintKind.ge,
                tighten_constraint(
                    e, AffineConstraintKind.ge, cond_map.num_dims, cond_map.num_symbols
                ),
                AffineExpr.constant(0),
            )
            for e in cond_map.results
        ),
    )
    fast = inner.clone()
    fast_map, fast_ops = compose_map(
        AffineMap(um.num_dims, um.num_symbols, tuple(full)), upper.operands
    )
    lower = map_slots(fast)[0]
    set_map_slots(fast, [(lower.map, lower.operands), (fast_map, fast_ops)])
    fast.properties["upperBoundsGroups"] = affine._groups_attr(full_groups)  # pyright: ignore[reportPrivateUsage]
    guard = affine.IfOp(
        condition, cond_ops, Block([fast, affine.YieldOp()]), Block([affine.YieldOp()])
    )
    guard.location = inner.location
    parent = inner.parent_block()
    assert parent is not None
    parent.insert_op_before(guard, inner)
    inner.detach()
    else_block = guard.else_region.block
    else_block.insert_op_before(inner, else_block.first_op)  # pyright: ignore[reportArgumentType]
    return guard
