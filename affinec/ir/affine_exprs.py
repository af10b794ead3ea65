"""Small utilities over affine expressions and maps that several levels share.

- `expr_range`: the interval an expression takes when its dims and symbols range over
  given intervals (interval arithmetic; exact for the sums, products by constants and
  divisions by positive constants affine maps are made of).
- `to_python`: an affine expression as Python source over named integers, with
  affine `floordiv`/`mod`/`ceildiv` semantics (Python's `//` and `%` already floor).
- `simplify_expr`: the canonical sum-of-terms form (`d0 * 16 + d1 * 2 - 3`), in which
  equal expressions print equal.
- `linear_form`: an expression's coefficients, when it is linear.
- `is_nonnegative`, `drop_redundant_bounds`, `tighten_constraint`: facts that hold
  over a box of operand ranges, for bounds and conditions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from xdsl.dialects.builtin import AffineMapAttr, AffineSetAttr
from xdsl.ir import Operation
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)
from xdsl.ir.affine.affine_set import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineSet,
)

T = TypeVar("T")

Interval = tuple[int, int]
"""A closed integer interval `(lo, hi)`."""


def expr_range(
    expr: AffineExpr,
    dims: Sequence[Interval | None],
    syms: Sequence[Interval | None] = (),
) -> Interval | None:
    """The interval of `expr`, or None when some operand it uses has no known range."""
    match expr:
        case AffineConstantExpr(value=v):
            return (v, v)
        case AffineDimExpr(position=p):
            return dims[p]
        case AffineSymExpr(position=p):
            return syms[p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a = expr_range(lhs, dims, syms)
            b = expr_range(rhs, dims, syms)
            if a is None or b is None:
                return None
            return binary_range(kind, a, b)
    raise ValueError(f"unexpected affine expression {expr}")


def binary_range(kind: AffineBinaryOpKind, a: Interval, b: Interval) -> Interval | None:
    """The interval of `lhs <kind> rhs` for `lhs` in `a` and `rhs` in `b` (None for a
    division or remainder by anything but a positive constant)."""
    if kind == AffineBinaryOpKind.Add:
        return (a[0] + b[0], a[1] + b[1])
    if kind == AffineBinaryOpKind.Mul:
        corners = [x * y for x in a for y in b]
        return (min(corners), max(corners))
    if b[0] != b[1] or b[0] <= 0:
        return None
    c = b[0]
    if kind == AffineBinaryOpKind.FloorDiv:
        return (a[0] // c, a[1] // c)
    if kind == AffineBinaryOpKind.CeilDiv:
        return (-(-a[0] // c), -(-a[1] // c))
    if kind == AffineBinaryOpKind.Mod:
        if a[0] // c == a[1] // c:
            return (a[0] % c, a[1] % c)
        return (0, c - 1)
    raise ValueError(f"unexpected affine operation {kind}")


def to_python(
    expr: AffineExpr, dim_names: Sequence[str], sym_names: Sequence[str] = ()
) -> str:
    """Python source computing `expr` over the named integer variables."""
    match expr:
        case AffineConstantExpr(value=v):
            return str(v) if v >= 0 else f"({v})"
        case AffineDimExpr(position=p):
            return dim_names[p]
        case AffineSymExpr(position=p):
            return sym_names[p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a = to_python(lhs, dim_names, sym_names)
            b = to_python(rhs, dim_names, sym_names)
            match kind:
                case AffineBinaryOpKind.Add:
                    return f"({a} + {b})"
                case AffineBinaryOpKind.Mul:
                    return f"({a} * {b})"
                case AffineBinaryOpKind.FloorDiv:
                    return f"({a} // {b})"
                case AffineBinaryOpKind.Mod:
                    return f"({a} % {b})"
                case AffineBinaryOpKind.CeilDiv:
                    return f"(-(-{a} // {b}))"
    raise ValueError(f"unexpected affine expression {expr}")


def constraints_to_python(
    s: AffineSet, dim_names: Sequence[str], sym_names: Sequence[str] = ()
) -> list[str]:
    """Python source of each constraint of `s` over the named integer variables
    (`e >= 0`, `e <= 0`, `e == 0`)."""
    return [
        f"{to_python(c.lhs - c.rhs, dim_names, sym_names)} {c.kind.value} 0"
        for c in s.constraints
    ]


def simplify_expr(expr: AffineExpr, num_dims: int, num_symbols: int) -> AffineExpr:
    """`expr` flattened into the canonical sum of terms, dims and symbols in order.

    Semi-affine expressions, which xDSL cannot flatten, come back as they are.
    """
    try:
        return expr.simplify(num_dims, num_symbols)
    except NotImplementedError:
        return expr


def is_pure_affine(expr: AffineExpr) -> bool:
    """Whether `expr` is affine in the strict sense xDSL can compute with: products
    with a constant, divisions and remainders by a constant (not `d0 * d1`, not
    `d0 floordiv s0`, which are semi-affine)."""
    match expr:
        case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
            return is_pure_affine(lhs) and is_pure_affine(rhs)
        case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
            constant = isinstance(lhs, AffineConstantExpr) or isinstance(
                rhs, AffineConstantExpr
            )
            return constant and is_pure_affine(lhs) and is_pure_affine(rhs)
        case AffineBinaryOpExpr(lhs=lhs, rhs=rhs):
            return isinstance(rhs, AffineConstantExpr) and is_pure_affine(lhs)
    return True


def semi_affine_op(root: Operation) -> Operation | None:
    """The first op under `root` whose maps or integer sets are not pure affine."""
    for op in root.walk():
        for attr in (*op.properties.values(), *op.attributes.values()):
            if isinstance(attr, AffineMapAttr):
                exprs = attr.data.results
            elif isinstance(attr, AffineSetAttr):
                exprs = [e for c in attr.data.constraints for e in (c.lhs, c.rhs)]
            else:
                continue
            if not all(is_pure_affine(e) for e in exprs):
                return op
    return None


LinearForm = tuple[tuple[int, ...], tuple[int, ...], int]
"""Coefficients of the dims, of the symbols, and the constant term."""


def linear_form(expr: AffineExpr, num_dims: int, num_symbols: int) -> LinearForm | None:
    """`expr` as `sum(a_i * d_i) + sum(b_j * s_j) + c`, or None if it is not linear
    (it divides or takes a remainder that does not cancel)."""
    match expr:
        case AffineConstantExpr(value=v):
            return ((0,) * num_dims, (0,) * num_symbols, v)
        case AffineDimExpr(position=p):
            dims = tuple(int(k == p) for k in range(num_dims))
            return (dims, (0,) * num_symbols, 0)
        case AffineSymExpr(position=p):
            syms = tuple(int(k == p) for k in range(num_symbols))
            return ((0,) * num_dims, syms, 0)
        case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
            a = linear_form(lhs, num_dims, num_symbols)
            b = linear_form(rhs, num_dims, num_symbols)
            if a is None or b is None:
                return None
            return (
                tuple(x + y for x, y in zip(a[0], b[0], strict=True)),
                tuple(x + y for x, y in zip(a[1], b[1], strict=True)),
                a[2] + b[2],
            )
        case AffineBinaryOpExpr(
            kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=AffineConstantExpr(value=c)
        ):
            a = linear_form(lhs, num_dims, num_symbols)
            if a is None:
                return None
            return (tuple(x * c for x in a[0]), tuple(x * c for x in a[1]), a[2] * c)
    simplified = simplify_expr(expr, num_dims, num_symbols)
    if simplified != expr and not any(
        isinstance(e, AffineBinaryOpExpr)
        and e.kind not in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul)
        for e in simplified.dfs()
    ):
        return linear_form(simplified, num_dims, num_symbols)
    return None


def is_nonnegative(
    expr: AffineExpr,
    num_dims: int,
    num_symbols: int,
    dims: Sequence[Interval | None],
    syms: Sequence[Interval | None] = (),
) -> bool:
    """Whether `expr >= 0` wherever each operand lies in its interval.

    The expression is flattened first, so that a dim appearing twice (`d0 - d0`) is
    one term and interval arithmetic over the box is exact for linear expressions.
    """
    r = expr_range(simplify_expr(expr, num_dims, num_symbols), dims, syms)
    return r is not None and r[0] >= 0


def drop_redundant_bounds(
    exprs: Sequence[AffineExpr],
    num_dims: int,
    num_symbols: int,
    dims: Sequence[Interval | None],
    syms: Sequence[Interval | None] = (),
    *,
    upper: bool = True,
) -> list[AffineExpr]:
    """The results of a `min` (upper bound, `upper=True`) or `max` group that can
    decide its value: a result never below another result of a min (never above one
    of a max) is dropped. Of results equal over the box, a constant is kept (then the
    first). At least one result is always kept."""

    def never_better(e: AffineExpr, other: AffineExpr) -> bool:
        diff = (e - other) if upper else (other - e)
        return is_nonnegative(diff, num_dims, num_symbols, dims, syms)

    def rank(k: int) -> tuple[bool, int]:
        return (not isinstance(exprs[k], AffineConstantExpr), k)

    kept = []
    for k, e in enumerate(exprs):
        dropped = any(
            never_better(e, other) and (not never_better(other, e) or rank(j) < rank(k))
            for j, other in enumerate(exprs)
            if j != k
        )
        if not dropped:
            kept.append(e)
    return kept


def tighten_constraint(
    expr: AffineExpr, kind: AffineConstraintKind, num_dims: int, num_symbols: int
) -> AffineExpr:
    """`expr >= 0` (or `== 0`) divided through by the gcd of its coefficients, the
    constant rounded down, as integer solutions allow: `-16 * d0 + 84 >= 0` becomes
    `-d0 + 5 >= 0`. Non-linear expressions and equalities come back simplified."""
    form = linear_form(expr, num_dims, num_symbols)
    simplified = simplify_expr(expr, num_dims, num_symbols)
    if form is None or kind != AffineConstraintKind.ge:
        return simplified
    dims, syms, const = form
    g = math.gcd(*dims, *syms)
    if g <= 1:
        return simplified
    tightened = AffineExpr.constant(const // g)
    for k, a in enumerate(dims):
        if a:
            tightened = tightened + AffineExpr.dimension(k) * (a // g)
    for k, a in enumerate(syms):
        if a:
            tightened = tightened + AffineExpr.symbol(k) * (a // g)
    return simplify_expr(tightened, num_dims, num_symbols)


def grouped(items: Sequence[T], groups: Sequence[int]) -> list[list[T]]:
    """`items` cut into consecutive groups of the given sizes (an `affine.parallel`'s
    flat list of bound results, one group per dimension)."""
    out, k = [], 0
    for g in groups:
        out.append(list(items[k : k + g]))
        k += g
    return out


def ge0(e: AffineExpr) -> AffineConstraintExpr:
    """The constraint `e >= 0`."""
    return AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))
