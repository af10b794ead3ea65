"""Canonicalizations: `promote_single_iteration`, `fold_constant_if`,
`normalize_loop`, `erase_dead_index_ops`."""

from __future__ import annotations

from xdsl.dialects.builtin import (
    ArrayAttr,
    IndexType,
    IntegerAttr,
    i64,
)
from xdsl.ir import Operation
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.ir.affine.affine_set import AffineConstraintKind

from affinec.dialects import affine
from affinec.ir.affine_exprs import (
    expr_range,
    grouped,
    simplify_expr,
)
from affinec.transforms.affine.analysis import (
    Substitution,
    body_ops,
    compose_map,
    constant_value,
    map_slots,
    non_affine_uses,
    operand_ranges,
)
from affinec.transforms.affine.rewriting import (
    as_substitution,
    constant_map,
    joint_maps,
    rewrite_maps,
    set_map_slots,
    substitute,
)

# -- canonicalizations --------------------------------------------------------------------


def _trip_difference(loop: affine.ForOp) -> tuple[int | None, Substitution | None]:
    """`upper - lower` when both bounds are single results whose difference is a
    constant, and the lower bound as a substitution."""
    lower, upper = map_slots(loop)
    if len(lower.map.results) != 1 or len(upper.map.results) != 1:
        return None, None
    ((lo,), (hi,)), num_dims, num_syms, operands = joint_maps(
        [(lower.map, lower.operands), (upper.map, upper.operands)]
    )
    diff, _ = compose_map(AffineMap(num_dims, num_syms, (hi - lo,)), operands)
    return constant_value(diff), as_substitution(lower.map, lower.operands)


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
    (lo_exprs, hi_exprs), num_dims, num_syms, operands = joint_maps(
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
    zero = constant_map([0] * len(ivs))
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
