"""Small utilities over affine expressions and maps that several levels share.

- `expr_range`: the interval an expression takes when its dims and symbols range over
  given intervals (interval arithmetic; exact for the sums, products by constants and
  divisions by positive constants affine maps are made of).
- `to_python`: an affine expression as Python source over named integers, with
  affine `floordiv`/`mod`/`ceildiv` semantics (Python's `//` and `%` already floor).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

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
    raise ValueError(f"unexpected affine expression {expr}")


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
