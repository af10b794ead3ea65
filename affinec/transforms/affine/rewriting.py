"""The rewriting primitives every affine transformation is made of (MLIR's
Affine/Utils): composing expressions into ops' maps, simplifying bounds, and building
loops like existing ones.

Index arithmetic is never materialized: when a rewrite changes what an induction
variable stands for, the new expression is composed into the affine map of every op
that uses it (`substitute`), so the IR keeps one `affine.load %A[%i0 * 16 + %i1]`
where a naive rewrite would add `affine.apply` ops.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    AffineMapAttr,
    AffineSetAttr,
    DenseArrayBase,
    IndexType,
    i32,
)
from xdsl.ir import Attribute, Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap, AffineSet
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind

from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.ir.affine_exprs import (
    drop_redundant_bounds,
    grouped,
    tighten_constraint,
)
from affinec.transforms.affine.analysis import (
    MapSlot,
    Substitution,
    compose_map,
    map_slots,
    non_affine_uses,
    operand_ranges,
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
                for kind, e in zip(kinds, tightened(m, kinds).results, strict=True)
            )
            op.operands = list(operands)
            op.properties["condition"] = AffineSetAttr(
                AffineSet(m.num_dims, m.num_symbols, constraints)
            )
        case _:
            raise ValueError(f"'{op.name}' has no affine map")


def tightened(m: AffineMap, kinds: Sequence[AffineConstraintKind]) -> AffineMap:
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
        new = [(tightened(m, kinds), ops) for m, ops in new]
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


def joint_maps(
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


def as_substitution(
    m: AffineMap, operands: Sequence[SSAValue], k: int = 0
) -> Substitution:
    """Result `k` of `m` as an expression whose dims are all of `operands`."""
    dims = [AffineExpr.dimension(j) for j in range(m.num_dims)]
    syms = [AffineExpr.dimension(m.num_dims + j) for j in range(m.num_symbols)]
    return m.results[k].replace_dims_and_symbols(dims, syms), list(operands)


def constant_map(values: Sequence[int]) -> AffineMap:
    return AffineMap(0, 0, tuple(AffineExpr.constant(v) for v in values))


# -- building blocks ----------------------------------------------------------------------


def fresh_block(like: Sequence[SSAValue], suffix: str = "") -> Block:
    block = Block(arg_types=[IndexType()] * len(like))
    for new, old in zip(block.args, like, strict=True):
        if old.name_hint:
            new.name_hint = old.name_hint + suffix
    return block


def move_ops(ops: Sequence[Operation], into: Block) -> None:
    for op in ops:
        op.detach()
        into.add_op(op)


def parallel_like(
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


def replace_ivs_within(
    old: Sequence[SSAValue], new: Sequence[SSAValue], scope: Operation
) -> None:
    for a, b in zip(old, new, strict=True):
        a.replace_uses_with_if(b, lambda use: scope.is_ancestor(use.operation))
