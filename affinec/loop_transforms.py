"""Loop and band transformations that the affine passes are made of (MLIR's
Affine/Utils and LoopUtils). Each function does one rewrite in place and assumes its
caller checked legality first (the passes check everything before rewriting anything;
`affinec.loop_analysis` has the checks).

Index arithmetic is never materialized: when a rewrite changes what an induction
variable stands for, the new expression is composed into the affine map of every op
that uses it (`substitute`), so the IR keeps one `affine.load %A[%i0 * 16 + %i1]`
where a naive rewrite would add `affine.apply` ops.

- `rewrite_maps`, `substitute`: compose expressions into ops' maps.
- `simplify_bounds`: drop `min`/`max` bound results that never decide the bound.
- `tile_parallel`, `tile_band`: the reference design's tiling: simple loops in, simple
  loops out, partial tiles bounded by `min` groups.
- `peel_last_iteration`, `version_full_tiles`: separate full tiles from the partial one
  (Loopy's slabs, PlaidML's fast and slow paths).
- `plan_split`, `split_blocker`, `split_parallel`: one block loop into init / compute
  / write-back loops, scalar accumulators expanded into a block-shaped buffer.
- `distribute_parallel`, `sink_parallel`: loop distribution and interchange of an
  `affine.parallel` with the loops inside it.
- `promote_single_iteration`, `fold_constant_if`, `normalize_loop`: canonicalizations.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    ArrayAttr,
    DenseArrayBase,
    IndexType,
    IntegerAttr,
    MemRefType,
    UnitAttr,
    i32,
    i64,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstantExpr, AffineExpr, AffineMap, AffineSet
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from affinec.affine_utils import (
    drop_redundant_bounds,
    expr_range,
    grouped,
    simplify_expr,
    tighten_constraint,
)
from affinec.dialects import affine
from affinec.dialects.affinec import TILE, PaddedLoadOp
from affinec.loop_analysis import (
    AccessOp,
    MapSlot,
    Substitution,
    body_ops,
    compose_map,
    constant_value,
    map_slots,
    non_affine_uses,
    operand_ranges,
    sink_blocker,
    value_range,
)

# -- maps ---------------------------------------------------------------------------------

MapAndOperands = tuple[AffineMap, Sequence[SSAValue]]


def set_map_slots(op: Operation, slots: Sequence[MapAndOperands]) -> None:
    """Give `op` new maps and map operands, in the order `map_slots(op)` lists them."""
    match op:
        case (
            affine.LoadOp()
            | affine.StoreOp()
            | PaddedLoadOp()
            | affine.ApplyOp()
            | affine.MinOp()
            | affine.MaxOp()
        ):
            ((m, operands),) = slots
            fixed = list(op.operands)[: map_slots(op)[0].first_operand]
            op.operands = [*fixed, *operands]
            op.properties["map"] = AffineMapAttr(m)
        case affine.ForOp():
            (lower, lower_ops), (upper, upper_ops) = slots
            inits = list(op.inits)
            op.operands = [*lower_ops, *upper_ops, *inits]
            op.properties["lowerBoundMap"] = AffineMapAttr(lower)
            op.properties["upperBoundMap"] = AffineMapAttr(upper)
            op.properties["operandSegmentSizes"] = DenseArrayBase.from_list(
                i32, [len(lower_ops), len(upper_ops), len(inits)]
            )
        case affine.ParallelOp():
            (lower, lower_ops), (upper, upper_ops) = slots
            op.operands = [*lower_ops, *upper_ops]
            op.properties["lowerBoundsMap"] = AffineMapAttr(lower)
            op.properties["upperBoundsMap"] = AffineMapAttr(upper)
        case affine.IfOp():
            ((m, operands),) = slots
            kinds = [c.kind for c in op.condition.data.constraints]
            constraints = tuple(
                AffineConstraintExpr(kind, e, AffineExpr.constant(0))
                for kind, e in zip(kinds, _tightened(m, kinds).results, strict=True)
            )
            op.operands = list(operands)
            op.properties["condition"] = AffineSetAttr(
                AffineSet(m.num_dims, m.num_symbols, constraints)
            )
        case _:
            raise ValueError(f"'{op.name}' has no affine map")


def _tightened(m: AffineMap, kinds: Sequence[AffineConstraintKind]) -> AffineMap:
    """The constraint map of an `affine.if`, each constraint divided through by the gcd
    of its coefficients."""
    results = tuple(
        tighten_constraint(e, kind, m.num_dims, m.num_symbols)
        for kind, e in zip(kinds, m.results, strict=True)
    )
    return AffineMap(m.num_dims, m.num_symbols, results)


def rewrite_maps(
    op: Operation,
    subst: Mapping[SSAValue, Substitution] | None = None,
    *,
    fold_producers: bool = True,
) -> bool:
    """Compose `subst` (and constant and `affine.apply` producers) into every map of
    `op`, simplifying them; whether anything changed."""
    slots = map_slots(op)
    new = [
        compose_map(s.map, s.operands, subst, fold_producers=fold_producers)
        for s in slots
    ]
    if isinstance(op, affine.IfOp):
        kinds = [c.kind for c in op.condition.data.constraints]
        new = [(_tightened(m, kinds), ops) for m, ops in new]
    if all(
        m == s.map and list(ops) == list(s.operands)
        for (m, ops), s in zip(new, slots, strict=True)
    ):
        return False
    set_map_slots(op, new)
    return True


def substitute(value: SSAValue, expr: AffineExpr, values: Sequence[SSAValue]) -> None:
    """Replace `value` by `expr` (whose dims are `values`) in the maps of all its users.

    Every use must be a map operand (`non_affine_uses(value)` is empty).
    """
    assert not non_affine_uses(value), f"{value} has uses outside affine maps"
    users = {use.operation: None for use in value.uses}
    for user in users:
        rewrite_maps(user, {value: (expr, values)})


def simplify_bounds(op: Operation) -> bool:
    """Drop the results of `min` (and `max`) bound groups that never decide the bound
    over the ranges of their operands: `min(16, 112 - %i0 * 16)` with `%i0` in [0, 6]
    is `16`. Works on `affine.for`, `affine.parallel`, `affine.min`, `affine.max`."""
    match op:
        case affine.ForOp():
            lower, upper = map_slots(op)
            new = [_simplified(lower, [len(lower.map.results)], upper=False)]
            new.append(_simplified(upper, [len(upper.map.results)], upper=True))
        case affine.ParallelOp():
            lower, upper = map_slots(op)
            new = [
                _simplified(lower, op.lower_groups, upper=False),
                _simplified(upper, op.upper_groups, upper=True),
            ]
        case affine.MinOp() | affine.MaxOp():
            (slot,) = map_slots(op)
            is_min = isinstance(op, affine.MinOp)
            new = [_simplified(slot, [len(slot.map.results)], upper=is_min)]
        case _:
            return False
    if all(
        groups == old for (_, _, groups), old in zip(new, _groups_of(op), strict=True)
    ):
        return False
    set_map_slots(op, [(m, ops) for m, ops, _ in new])
    if isinstance(op, affine.ParallelOp):
        op.properties["lowerBoundsGroups"] = affine._groups_attr(new[0][2])  # pyright: ignore[reportPrivateUsage]
        op.properties["upperBoundsGroups"] = affine._groups_attr(new[1][2])  # pyright: ignore[reportPrivateUsage]
    return True


def _groups_of(op: Operation) -> list[list[int]]:
    if isinstance(op, affine.ParallelOp):
        return [op.lower_groups, op.upper_groups]
    return [[len(s.map.results)] for s in map_slots(op)]


def _simplified(
    slot: MapSlot, groups: Sequence[int], *, upper: bool
) -> tuple[AffineMap, list[SSAValue], list[int]]:
    m = slot.map
    dims, syms = operand_ranges(m, slot.operands)
    results: list[AffineExpr] = []
    new_groups: list[int] = []
    for group in grouped(m.results, groups):
        kept = drop_redundant_bounds(
            group, m.num_dims, m.num_symbols, dims, syms, upper=upper
        )
        results += kept
        new_groups.append(len(kept))
    if new_groups == list(groups):
        return m, list(slot.operands), list(groups)
    new_map, operands = compose_map(
        AffineMap(m.num_dims, m.num_symbols, tuple(results)), slot.operands
    )
    return new_map, operands, new_groups


def _joint(
    maps: Sequence[MapAndOperands],
) -> tuple[list[list[AffineExpr]], int, int, list[SSAValue]]:
    """The results of several maps over one operand space: all their dims, then all
    their symbols."""
    num_dims = sum(m.num_dims for m, _ in maps)
    num_syms = sum(m.num_symbols for m, _ in maps)
    results: list[list[AffineExpr]] = []
    dim_ops: list[SSAValue] = []
    sym_ops: list[SSAValue] = []
    for m, ops in maps:
        dims = [AffineExpr.dimension(len(dim_ops) + k) for k in range(m.num_dims)]
        syms = [AffineExpr.symbol(len(sym_ops) + k) for k in range(m.num_symbols)]
        results.append([r.replace_dims_and_symbols(dims, syms) for r in m.results])
        dim_ops += ops[: m.num_dims]
        sym_ops += ops[m.num_dims :]
    return results, num_dims, num_syms, dim_ops + sym_ops


def _as_substitution(
    m: AffineMap, operands: Sequence[SSAValue], k: int = 0
) -> Substitution:
    """Result `k` of `m` as an expression whose dims are all of `operands`."""
    dims = [AffineExpr.dimension(j) for j in range(m.num_dims)]
    syms = [AffineExpr.dimension(m.num_dims + j) for j in range(m.num_symbols)]
    return m.results[k].replace_dims_and_symbols(dims, syms), list(operands)


def _constant_map(values: Sequence[int]) -> AffineMap:
    return AffineMap(0, 0, tuple(AffineExpr.constant(v) for v in values))


# -- building blocks ----------------------------------------------------------------------


def _fresh_block(like: Sequence[SSAValue], suffix: str = "") -> Block:
    block = Block(arg_types=[IndexType()] * len(like))
    for new, old in zip(block.args, like, strict=True):
        if old.name_hint:
            new.name_hint = old.name_hint + suffix
    return block


def _move_ops(ops: Sequence[Operation], into: Block) -> None:
    for op in ops:
        op.detach()
        into.add_op(op)


def _parallel_like(
    op: affine.ParallelOp, block: Block, attributes: dict[str, Attribute] | None = None
) -> affine.ParallelOp:
    """A new `affine.parallel` with `op`'s bounds and attributes around `block`."""
    lower, upper = map_slots(op)
    new = affine.ParallelOp(
        lower.map,
        op.lower_groups,
        upper.map,
        op.upper_groups,
        block,
        lower_operands=lower.operands,
        upper_operands=upper.operands,
        steps=op.step_values,
    )
    new.attributes = dict(attributes if attributes is not None else op.attributes)
    new.location = op.location
    return new


def _replace_ivs_within(
    old: Sequence[SSAValue], new: Sequence[SSAValue], scope: Operation
) -> None:
    for a, b in zip(old, new, strict=True):
        a.replace_uses_with_if(b, lambda use: scope.is_ancestor(use.operation))


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
        _fresh_block(op.induction_variables, "0"),
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
        results = [AffineExpr.constant(t)] + [
            e.replace_dims_and_symbols(shift, []) - tile_start for e in group
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
    block = _fresh_block(op.induction_variables, "1")
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
    _move_ops(list(op.body.block.ops), block)
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
            m, ops = _constant_map([1]), []
        else:
            results = [
                simplify_expr(e.ceil_div(t), um.num_dims, um.num_symbols)
                for e in um.results
            ]
            m, ops = compose_map(
                AffineMap(um.num_dims, um.num_symbols, tuple(results)), upper.operands
            )
        tile = affine.ForOp(
            0, m, _fresh_block([loop.induction_variable], "0"), upper_operands=ops
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
            0, m, _fresh_block([loop.induction_variable], "1"), upper_operands=ops
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
    _move_ops(list(band[-1].body.block.ops), points[-1].body.block)
    band[0].detach()
    band[0].erase()
    return tiles, points


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
    set_map_slots(loop, [(_constant_map([0]), []), (_constant_map([last - 1]), [])])
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


@dataclass(frozen=True)
class SplitPlan:
    """How one block loop splits: its accumulators (allocations to expand), its
    phases (the top-level ops of each new loop, by name; empty phases are left out)
    and its extent along each dimension (the expanded buffer's leading shape)."""

    accumulators: tuple[memref.AllocaOp | memref.AllocOp, ...]
    phases: tuple[tuple[str, tuple[Operation, ...]], ...]
    extents: tuple[int | None, ...]


def plan_split(op: affine.ParallelOp) -> SplitPlan | None:
    """How `split_parallel` would split a block loop, or None when there is nothing
    to split (no reduction loop, or no scalar accumulator allocated before it)."""
    ops = body_ops(op.body.block)
    loops = [k for k, o in enumerate(ops) if isinstance(o, affine.ForOp)]
    if not loops:
        return None
    first, last = loops[0], loops[-1]
    accumulators = tuple(
        o for o in ops[:first] if isinstance(o, memref.AllocaOp | memref.AllocOp)
    )
    if not accumulators:
        return None
    phases = (
        ("initialization", tuple(o for o in ops[:first] if o not in accumulators)),
        ("reduction", tuple(ops[first : last + 1])),
        ("write-back", tuple(ops[last + 1 :])),
    )
    extents = []
    for iv in op.induction_variables:
        r = value_range(iv)
        extents.append(None if r is None or r[0] != 0 else r[1] + 1)
    return SplitPlan(accumulators, tuple(p for p in phases if p[1]), tuple(extents))


def split_blocker(op: affine.ParallelOp, plan: SplitPlan) -> str | None:
    """Why `split_parallel` cannot split `op` as planned, or None."""
    if None in plan.extents:
        return "its extent along some dimension is not bounded by a constant"
    for acc in plan.accumulators:
        t = acc.memref.type
        name = f"%{acc.memref.name_hint}" if acc.memref.name_hint else "an accumulator"
        if (
            not isinstance(t, MemRefType)
            or acc.dynamic_sizes
            or any(d < 0 for d in t.get_shape())
        ):
            return f"{name} does not have a static shape"
        for use in acc.memref.uses:
            user = use.operation
            if not isinstance(user, AccessOp) or (
                isinstance(user, affine.StoreOp) and use.index == 0
            ):
                return (
                    f"{name} is used by '{user.name}', not only affine loads and stores"
                )
    defined_in: dict[SSAValue, str] = {}
    for name, phase in plan.phases:
        for root in phase:
            for inner in root.walk():
                defined_in.update((r, name) for r in inner.results)
                for region in inner.regions:
                    for block in region.blocks:
                        defined_in.update((a, name) for a in block.args)
    for name, phase in plan.phases:
        for root in phase:
            for inner in root.walk():
                for v in inner.operands:
                    if defined_in.get(v, name) != name:
                        what = f"%{v.name_hint}" if v.name_hint else "a value"
                        return (
                            f"{what} is computed in the {defined_in[v]} part and used "
                            f"in the {name} part"
                        )
    return sink_blocker(op)


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
        block = _fresh_block(op.induction_variables)
        loop = _parallel_like(op, block)
        parent.insert_op_before(loop, op)
        _move_ops(phase, block)
        block.add_op(affine.YieldOp())
        _replace_ivs_within(op.induction_variables, block.args, loop)
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
        block = _fresh_block(op.induction_variables)
        loop = _parallel_like(op, block)
        parent.insert_op_before(loop, op)
        _move_ops([statement], block)
        block.add_op(affine.YieldOp())
        _replace_ivs_within(op.induction_variables, block.args, loop)
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
    block = _fresh_block(op.induction_variables)
    moved = _parallel_like(op, block)
    _move_ops(body_ops(innermost.body.block), block)
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


# -- canonicalizations --------------------------------------------------------------------


def _trip_difference(loop: affine.ForOp) -> tuple[int | None, Substitution | None]:
    """`upper - lower` when both bounds are single results whose difference is a
    constant, and the lower bound as a substitution."""
    lower, upper = map_slots(loop)
    if len(lower.map.results) != 1 or len(upper.map.results) != 1:
        return None, None
    ((lo,), (hi,)), num_dims, num_syms, operands = _joint(
        [(lower.map, lower.operands), (upper.map, upper.operands)]
    )
    diff, _ = compose_map(AffineMap(num_dims, num_syms, (hi - lo,)), operands)
    return constant_value(diff), _as_substitution(lower.map, lower.operands)


def promote_single_iteration(loop: affine.ForOp) -> bool:
    """Replace an `affine.for` that runs exactly once by its body (the variable
    becomes the lower bound in its users' maps), and one that never runs by its
    initial values. Whether it did."""
    diff, lower = _trip_difference(loop)
    if diff is None:
        return False
    parent = loop.parent_block()
    assert parent is not None and lower is not None
    if diff <= 0:
        for result, init in zip(loop.results, loop.inits, strict=True):
            result.replace_all_uses_with(init)
        loop.detach()
        loop.erase()
        return True
    if diff > loop.step.value.data or non_affine_uses(loop.induction_variable):
        return False
    expr, values = lower
    substitute(loop.induction_variable, expr, values)
    block = loop.body.block
    for arg, init in zip(loop.iter_args, loop.inits, strict=True):
        arg.replace_all_uses_with(init)
    term = block.last_op
    assert isinstance(term, affine.YieldOp)
    yielded = list(term.arguments)
    for op in body_ops(block):
        op.detach()
        parent.insert_op_before(op, loop)
    for result, value in zip(loop.results, yielded, strict=True):
        result.replace_all_uses_with(value)
    loop.detach()
    loop.erase()
    return True


def fold_constant_if(op: affine.IfOp) -> bool:
    """Replace an `affine.if` whose condition holds (or fails) everywhere its operands'
    ranges reach by the branch that runs. Whether it did."""
    s = op.condition.data
    dims, syms = operand_ranges(AffineMap(s.num_dims, s.num_symbols, ()), list(op.args))
    always, never = True, False
    for c in s.constraints:
        r = expr_range(
            simplify_expr(c.lhs - c.rhs, s.num_dims, s.num_symbols), dims, syms
        )
        if r is None:
            always = False
            continue
        if c.kind == AffineConstraintKind.ge:
            always &= r[0] >= 0
            never |= r[1] < 0
        else:
            always &= r == (0, 0)
            never |= r[0] > 0 or r[1] < 0
    if not always and not never:
        return False
    region = op.then_region if always else op.else_region
    parent = op.parent_block()
    assert parent is not None
    if region.blocks:
        block = region.block
        term = block.last_op
        assert isinstance(term, affine.YieldOp)
        for result, value in zip(op.results, list(term.arguments), strict=True):
            result.replace_all_uses_with(value)
        for inner in body_ops(block):
            inner.detach()
            parent.insert_op_before(inner, op)
    op.detach()
    op.erase()
    return True


def normalize_loop(op: affine.ForOp | affine.ParallelOp) -> bool:
    """Rewrite a loop with a single lower bound result to lower bound 0 and step 1
    (MLIR's `normalizeAffineFor`/`normalizeAffineParallel`): `for %i = %a to %b step
    2` becomes `for %i = 0 to (%b - %a) ceildiv 2`, and `%i` becomes `%i * 2 + %a`
    in its users (an `affine.apply` for users that have no affine map). Whether it
    did; loops with a `max` lower bound are left alone."""
    lower, upper = map_slots(op)
    if isinstance(op, affine.ForOp):
        ivs = [op.induction_variable]
        steps = [op.step.value.data]
        lower_groups, upper_groups = [len(lower.map.results)], [len(upper.map.results)]
    else:
        ivs = list(op.induction_variables)
        steps = op.step_values
        lower_groups, upper_groups = op.lower_groups, op.upper_groups
    if any(g != 1 for g in lower_groups):
        return False
    los = lower.map.results
    if all(
        s == 1
        and constant_value(AffineMap(lower.map.num_dims, lower.map.num_symbols, (lo,)))
        == 0
        for s, lo in zip(steps, los, strict=True)
    ):
        return False
    (lo_exprs, hi_exprs), num_dims, num_syms, operands = _joint(
        [(lower.map, lower.operands), (upper.map, upper.operands)]
    )
    new_upper: list[AffineExpr] = []
    for lo, his, step in zip(
        lo_exprs, grouped(hi_exprs, upper_groups), steps, strict=True
    ):
        new_upper += [(hi - lo).ceil_div(step) for hi in his]
    upper_map, upper_ops = compose_map(
        AffineMap(num_dims, num_syms, tuple(new_upper)), operands
    )
    zero = _constant_map([0] * len(ivs))
    set_map_slots(op, [(zero, []), (upper_map, upper_ops)])
    if isinstance(op, affine.ForOp):
        op.properties["step"] = IntegerAttr(1, IndexType())
    else:
        op.properties["steps"] = ArrayAttr([IntegerAttr(1, i64) for _ in ivs])

    block = op.body.block
    dims_as_operands = [AffineExpr.dimension(k) for k in range(num_dims)]
    syms_as_operands = [AffineExpr.dimension(num_dims + k) for k in range(num_syms)]
    for iv, lo, step in zip(ivs, lo_exprs, steps, strict=True):
        shifted = lo.replace_dims_and_symbols(dims_as_operands, syms_as_operands)
        expr = AffineExpr.dimension(len(operands)) * step + shifted
        values = [*operands, iv]
        stray = non_affine_uses(iv)
        affine_users = {
            use.operation: None for use in iv.uses if use.operation not in stray
        }
        if stray:
            m, ops = compose_map(AffineMap(len(values), 0, (expr,)), values)
            apply = affine.ApplyOp(ops, m)
            apply.result.name_hint = iv.name_hint
            block.insert_op_before(apply, block.first_op)  # pyright: ignore[reportArgumentType]
            for user in stray:
                user.operands = [apply.result if v is iv else v for v in user.operands]
        for user in affine_users:
            rewrite_maps(user, {iv: (expr, values)})
    return True


def erase_dead_index_ops(root: Operation) -> bool:
    """Erase `affine.apply`/`min`/`max` whose results nobody uses. Whether any."""
    changed = False
    for op in list(root.walk(reverse=True)):
        if (
            isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp)
            and not op.result.uses
        ):
            op.detach()
            op.erase()
            changed = True
    return changed
