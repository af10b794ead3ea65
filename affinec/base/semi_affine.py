"""Affine expressions built as MLIR builds them, semi-affine ones included.

MLIR accepts a product of two expressions when one of them is *symbolic* (made of
symbols and constants only: `d2 * s0`, `d0 * (s0 + 1)`) and a `floordiv`, `ceildiv` or
`mod` whose divisor is symbolic (`d0 mod s0`); only a product of two expressions with
dimensions (`d0 * d1`) or a dimension as divisor (`d0 floordiv d1`) is an error.
xDSL's `AffineExpr` operators raise `NotImplementedError` for every non-constant
factor or divisor, so its parser ends in a traceback on maps MLIR reads.

`multiply` and `divide` apply MLIR's construction rules (the symbolic factor goes on
the right, `(d0 * 2) * s0` becomes `(d0 * s0) * 2`, constants fold, a zero divisor
is kept as written) and build the nodes xDSL's operators refuse; everything else is
xDSL's own arithmetic. `MLIRAffineParser` is xDSL's affine parser with these rules
and MLIR's messages, located at the operator; affinec's parser uses it for
`affine_map<...>`, `affine_set<...>` and the `%A[%i * symbol(%n)]` forms.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
)
from xdsl.ir.affine.affine_set import AffineConstraintExpr, AffineConstraintKind
from xdsl.parser.affine_parser import AffineParser
from xdsl.utils.exceptions import ParseError
from xdsl.utils.mlir_lexer import MLIRToken, MLIRTokenKind

_DIVISIONS = {
    "floordiv": AffineBinaryOpKind.FloorDiv,
    "ceildiv": AffineBinaryOpKind.CeilDiv,
    "mod": AffineBinaryOpKind.Mod,
}


INDEX_MIN, INDEX_MAX = -(2**63), 2**63 - 1
"""The values of an `index` constant: 64-bit two's complement, as MLIR holds an
affine constant (`int64_t`) and as every level after `lower-affine` computes."""


def fits_index(value: int) -> bool:
    """Whether `value` is an `index` constant MLIR can hold."""
    return INDEX_MIN <= value <= INDEX_MAX


def _folded(value: int) -> AffineExpr | None:
    """The constant `value` if it fits an `index`, else None: a fold that
    overflows is left unfolded (as MLIR leaves a sum or product of two constants
    that overflows), so that no level reads a constant it cannot hold."""
    return AffineExpr.constant(value) if fits_index(value) else None


class NotAffineError(ValueError):
    """An expression MLIR refuses too (`d0 * d1`, `d0 mod d1`)."""


def is_symbolic(e: AffineExpr) -> bool:
    """Made of symbols and constants only (MLIR's `isSymbolicOrConstant`)."""
    return not any(isinstance(sub, AffineDimExpr) for sub in e.dfs())


def _constant(e: AffineExpr) -> int | None:
    return e.value if isinstance(e, AffineConstantExpr) else None


def _factored(e: AffineExpr) -> tuple[int, AffineExpr]:
    """`(c, x)` with `e == x * c`: the constant factor of a product, else 1."""
    c = _constant(e.rhs) if _is(e, AffineBinaryOpKind.Mul) else None  # pyright: ignore
    if c is not None:
        return c, e.lhs  # pyright: ignore[reportAttributeAccessIssue]
    return 1, e


def _is(e: AffineExpr, kind: AffineBinaryOpKind) -> bool:
    return isinstance(e, AffineBinaryOpExpr) and e.kind == kind


def add(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    """`lhs + rhs` by MLIR's rules (its `simplifyAdd`): constants fold and go on the
    right, as does a symbolic term beside one with dimensions; `(e + 2) + 3` is
    `e + 5`, `(e + 2) + x` is `(e + x) + 2`, `e * 2 + e * 3` is `e * 5`, and
    `e - (e floordiv q) * q` is `e mod q`."""
    lc, rc = _constant(lhs), _constant(rhs)
    if lc is not None and rc is not None:
        if (total := _folded(lc + rc)) is not None:
            return total
        return AffineBinaryOpExpr(AffineBinaryOpKind.Add, lhs, rhs)
    if lc is not None or (is_symbolic(lhs) and not is_symbolic(rhs)):
        return add(rhs, lhs)
    if rc == 0:
        return lhs
    if _is(lhs, AffineBinaryOpKind.Add):
        assert isinstance(lhs, AffineBinaryOpExpr)
        if (inner := _constant(lhs.rhs)) is not None:
            if rc is not None:
                if (total := _folded(inner + rc)) is not None:
                    return add(lhs.lhs, total)
            else:
                return add(add(lhs.lhs, rhs), lhs.rhs)
    (cl, first), (cr, second) = _factored(lhs), _factored(rhs)
    if first == second and (factor := _folded(cl + cr)) is not None:
        return multiply(first, factor)
    if (as_mod := _remainder(lhs, rhs)) is not None:
        return as_mod
    return AffineBinaryOpExpr(AffineBinaryOpKind.Add, lhs, rhs)


def _remainder(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr | None:
    """`lhs mod q` when `rhs` is `(lhs floordiv q) * -q` or `((lhs floordiv q) * q)
    * -1`, as MLIR detects it."""
    if not isinstance(rhs, AffineBinaryOpExpr) or rhs.kind != AffineBinaryOpKind.Mul:
        return None
    product, factor = rhs.lhs, rhs.rhs
    if _constant(factor) == -1 and _is(product, AffineBinaryOpKind.Mul):
        assert isinstance(product, AffineBinaryOpExpr)
        quotient, q = product.lhs, product.rhs
        if (
            isinstance(quotient, AffineBinaryOpExpr)
            and quotient.kind == AffineBinaryOpKind.FloorDiv
            and quotient.rhs == q
            and quotient.lhs == lhs
        ):
            return divide(AffineBinaryOpKind.Mod, lhs, q)
    if (
        isinstance(product, AffineBinaryOpExpr)
        and product.kind == AffineBinaryOpKind.FloorDiv
        and product.lhs == lhs
        and product.rhs == multiply(factor, AffineExpr.constant(-1))
    ):
        return divide(AffineBinaryOpKind.Mod, lhs, product.rhs)
    return None


def multiply(lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    """`lhs * rhs` by MLIR's rules (its `simplifyMul`): constants fold, the symbolic
    or constant factor goes on the right, `* 1` and `* 0` vanish, `(e * 2) * 3` is
    `e * 6` and `(e * 2) * s0` is `(e * s0) * 2`; a sum times a constant stays a
    product. `NotAffineError` when neither factor is symbolic."""
    lc, rc = _constant(lhs), _constant(rhs)
    if lc is not None and rc is not None:
        if (product := _folded(lc * rc)) is not None:
            return product
        return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, lhs, rhs)
    if not is_symbolic(lhs) and not is_symbolic(rhs):
        raise NotAffineError(
            "non-affine expression: at least one of the multiply operands has to be "
            "either a constant or symbolic"
        )
    if not is_symbolic(rhs) or lc is not None:
        return multiply(rhs, lhs)
    if rc == 1:
        return lhs
    if rc == 0:
        return rhs
    if isinstance(lhs, AffineBinaryOpExpr) and lhs.kind == AffineBinaryOpKind.Mul:
        factor = _constant(lhs.rhs)
        if factor is not None and rc is not None:
            if (product := _folded(factor * rc)) is not None:
                return multiply(lhs.lhs, product)
        elif factor is not None:
            return multiply(multiply(lhs.lhs, rhs), lhs.rhs)
    return AffineBinaryOpExpr(AffineBinaryOpKind.Mul, lhs, rhs)


def divide(kind: AffineBinaryOpKind, lhs: AffineExpr, rhs: AffineExpr) -> AffineExpr:
    """`lhs floordiv|ceildiv|mod rhs` by MLIR's rules; `NotAffineError` when the
    divisor has a dimension. Constants fold (but a `mod` by a constant below 1), and
    a division by zero stays as written, as in MLIR."""
    if not is_symbolic(rhs):
        token = next(t for t, k in _DIVISIONS.items() if k == kind)
        raise NotAffineError(
            f"non-affine expression: right operand of {token} has to be either a "
            "constant or symbolic"
        )
    rc = _constant(rhs)
    if rc is None or rc == 0 or (kind == AffineBinaryOpKind.Mod and rc < 1):
        return AffineBinaryOpExpr(kind, lhs, rhs)
    if (lc := _constant(lhs)) is not None:
        if kind == AffineBinaryOpKind.FloorDiv:
            value = lc // rc
        elif kind == AffineBinaryOpKind.CeilDiv:
            value = -(-lc // rc)
        else:
            value = lc % rc
        if (quotient := _folded(value)) is not None:
            return quotient
        # only -2**63 floordiv -1 overflows
        return AffineBinaryOpExpr(kind, lhs, rhs)
    if (simpler := _simplified_division(kind, lhs, rc)) is not None:
        return simpler
    if kind == AffineBinaryOpKind.FloorDiv:
        return lhs // rc
    if kind == AffineBinaryOpKind.CeilDiv:
        return lhs.ceil_div(rc)
    return lhs % rc


def _simplified_division(
    kind: AffineBinaryOpKind, lhs: AffineExpr, c: int
) -> AffineExpr | None:
    """MLIR's rules for a division by a nonzero constant `c` (its `simplifyFloorDiv`,
    `simplifyCeilDiv`, `simplifyMod`), or None: a division by 1 vanishes, `(e * 128)
    floordiv 64` is `e * 2`, `(e + f * 128) floordiv 32` is `e floordiv 32 + f * 4`,
    `(e * 128) mod 64` is 0, `(e + f * 128) mod 32` is `e mod 32`, and `(e mod 64)
    mod 32` is `e mod 32`."""
    if kind != AffineBinaryOpKind.FloorDiv and c < 1:
        return None
    if c == 1 and kind != AffineBinaryOpKind.Mod:
        return lhs
    if kind == AffineBinaryOpKind.Mod:
        if largest_known_divisor(lhs) % c == 0:
            return AffineExpr.constant(0)
        if _is(lhs, AffineBinaryOpKind.Add):
            assert isinstance(lhs, AffineBinaryOpExpr)
            if largest_known_divisor(lhs.lhs) % c == 0:
                return divide(kind, lhs.rhs, AffineExpr.constant(c))
            if largest_known_divisor(lhs.rhs) % c == 0:
                return divide(kind, lhs.lhs, AffineExpr.constant(c))
        if _is(lhs, AffineBinaryOpKind.Mod):
            assert isinstance(lhs, AffineBinaryOpExpr)
            inner = _constant(lhs.rhs)
            if inner is not None and inner >= 1 and inner % c == 0:
                return divide(kind, lhs.lhs, AffineExpr.constant(c))
        return None
    if _is(lhs, AffineBinaryOpKind.Mul):
        assert isinstance(lhs, AffineBinaryOpExpr)
        factor = _constant(lhs.rhs)
        if factor is not None and factor % c == 0:
            return multiply(lhs.lhs, AffineExpr.constant(factor // c))
    if kind == AffineBinaryOpKind.FloorDiv and _is(lhs, AffineBinaryOpKind.Add):
        assert isinstance(lhs, AffineBinaryOpExpr)
        if largest_known_divisor(lhs.lhs) % c == 0 or (
            largest_known_divisor(lhs.rhs) % c == 0
        ):
            divisor = AffineExpr.constant(c)
            return add(divide(kind, lhs.lhs, divisor), divide(kind, lhs.rhs, divisor))
    return None


def largest_known_divisor(e: AffineExpr) -> int:
    """The largest integer known to divide every value of `e` (MLIR's
    `getLargestKnownDivisor`): a constant's magnitude, a product's factors'
    product, the gcd of a sum's (or a remainder's) terms, a quotient's where the
    divisor divides it; 1 for a dim or a symbol."""
    if isinstance(e, AffineConstantExpr):
        return abs(e.value)
    if not isinstance(e, AffineBinaryOpExpr):
        return 1
    left, right = largest_known_divisor(e.lhs), largest_known_divisor(e.rhs)
    if e.kind == AffineBinaryOpKind.Mul:
        return left * right
    if e.kind in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mod):
        return math.gcd(left, right)
    c = _constant(e.rhs)
    if c is not None and c != 0 and left % c == 0:
        return left // abs(c)
    return 1


def mlir_form(e: AffineExpr) -> AffineExpr:
    """`e` rebuilt bottom-up by MLIR's rules: the tree MLIR holds for it (and what
    this module's parser reads back from its text). A subexpression MLIR refuses
    (`d0 * d1`) is kept as it is."""
    if not isinstance(e, AffineBinaryOpExpr):
        return e
    lhs, rhs = mlir_form(e.lhs), mlir_form(e.rhs)
    try:
        if e.kind == AffineBinaryOpKind.Add:
            return add(lhs, rhs)
        if e.kind == AffineBinaryOpKind.Mul:
            return multiply(lhs, rhs)
        return divide(e.kind, lhs, rhs)
    except NotAffineError:
        return AffineBinaryOpExpr(e.kind, lhs, rhs)


class MLIRAffineParser(AffineParser):
    """xDSL's affine parser building expressions by MLIR's rules (see the module):
    a negation is a product by -1 (so `-(d0 + 1)` stays a product, as in MLIR),
    `a - b` is `a + b * -1`, and a constraint of a set is kept as MLIR keeps it,
    `lhs - rhs >= 0` or `== 0` (`a <= b` as `b - a >= 0`)."""

    def _parse_affine_constraint(
        self, parse_optional_bare_id: Callable[[], AffineExpr | None]
    ) -> AffineConstraintExpr:
        c = super()._parse_affine_constraint(parse_optional_bare_id)
        lhs, rhs = c.lhs, c.rhs
        kind = c.kind
        if kind == AffineConstraintKind.le:
            lhs, rhs, kind = rhs, lhs, AffineConstraintKind.ge
        if _constant(rhs) == 0:
            return AffineConstraintExpr(kind, lhs, rhs)
        difference = add(lhs, multiply(rhs, AffineExpr.constant(-1)))
        return AffineConstraintExpr(kind, difference, AffineExpr.constant(0))

    def _parse_primary(
        self, parse_optional_bare_id: Callable[[], AffineExpr | None]
    ) -> AffineExpr:
        token = self._current_token
        if token.kind == MLIRTokenKind.INTEGER_LIT and not fits_index(
            token.kind.get_int_value(token.span)
        ):
            # a literal is read before its sign, as MLIR reads it: even
            # `-9223372036854775808` is refused
            raise ParseError(token.span, "constant too large for index")
        if self._current_token.kind == MLIRTokenKind.MINUS:
            self._consume_token()
            operand = self._parse_primary(parse_optional_bare_id)
            return multiply(operand, AffineExpr.constant(-1))
        return super()._parse_primary(parse_optional_bare_id)

    def _create_binop_expr(
        self, lhs: AffineExpr, rhs: AffineExpr, binop: MLIRToken
    ) -> AffineExpr:
        try:
            if binop.text == "+":
                return add(lhs, rhs)
            if binop.text == "-":
                return add(lhs, multiply(rhs, AffineExpr.constant(-1)))
            if binop.text == "*":
                return multiply(lhs, rhs)
            if binop.text in _DIVISIONS:
                return divide(_DIVISIONS[binop.text], lhs, rhs)
        except NotAffineError as e:
            raise ParseError(binop.span, str(e)) from None
        return super()._create_binop_expr(lhs, rhs, binop)
