"""Affine maps as index arithmetic for `lower-affine` (`IndexBuilder`).

Affine maps become index arithmetic with affine semantics: `floordiv` rounds toward
minus infinity and `mod` is never negative, as `arith.divsi`/`remsi` alone are not
(`-1 floordiv 4` is -1, `-1 mod 4` is 3). Where the dividend is provably non-negative
(`value_range`: loop bounds, thread ids...) the cheap unsigned division does; else
MLIR's branch-free expansion. Conditions `e >= 0` are compared as `P >= N`, the terms
of `e` with positive and with negative coefficients, which saves the subtraction.

    %k = affine.apply affine_map<(d0) -> (d0 floordiv 4 mod 2)>(%tx)   // %tx >= 0
    ->
    %c4 = arith.constant 4 : index
    %q = arith.divui %tx, %c4 : index
    %c2 = arith.constant 2 : index
    %k = arith.remui %q, %c2 : index
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith
from xdsl.dialects.builtin import (
    IntegerAttr,
    i1,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
    AffineSymExpr,
)

from affinec.ir.affine_exprs import Interval, expr_range
from affinec.ir.comparisons import cmpi
from affinec.ir.constants import index_constant
from affinec.ir.ranges import value_range

IndexConstants = dict[tuple[Block, int], arith.ConstantOp]
"""The index constants a lowering made, by block and value (`IndexBuilder.index`)."""


class IndexBuilder:
    """Builds index arithmetic before an op, knowing operand ranges where it can.

    With `constants` (shared by the builders of one lowering, in the order of a
    walk of the module), an index constant already made in the anchor's block, for
    an earlier op of it, is used again rather than made anew (it dominates the
    op: the ops are lowered in the order of a walk, parents first). `cse`, which
    follows, would replace the new one by that earlier one (the first in the block,
    in a region of one block, as lower-affine's are) and erase it, so the module it
    leaves is the same, without some two hundred constants a kernel built and
    thrown away."""

    def __init__(
        self,
        anchor: Operation,
        known: dict[SSAValue, Interval],
        constants: IndexConstants | None = None,
    ):
        self.anchor = anchor
        self.known = known
        self.ops: list[Operation] = []
        self.constants = constants

    def flush(self) -> None:
        """Insert the ops built so far before the anchor."""
        block = self.anchor.parent_block()
        assert block is not None
        block.insert_ops_before(self.ops, self.anchor)
        self.ops = []

    def add(self, op: Operation) -> SSAValue:
        self.ops.append(op)
        return op.results[0]

    def index(self, value: int) -> SSAValue:
        # A constant the lowering computes (a negated or folded term) can leave the
        # 64 bits of an index; index arithmetic is modulo 2**64, so its two's
        # complement is the same value to every op that uses it.
        wrapped = (value + 2**63) % 2**64 - 2**63
        if self.constants is None:
            return self.add(index_constant(wrapped))
        block = self.anchor.parent
        assert block is not None
        made = self.constants.get((block, wrapped))
        # before the anchor: in its block (an earlier op's), or among this op's
        if made is not None and (
            made.parent is block or (made.parent is None and made in self.ops)
        ):
            return made.result
        made = index_constant(wrapped)
        self.constants[block, wrapped] = made
        return self.add(made)

    def range_of(self, value: SSAValue) -> Interval | None:
        return value_range(value, self.known)

    # -- expressions ------------------------------------------------------------------

    def expr(
        self,
        e: AffineExpr,
        dims: Sequence[SSAValue],
        syms: Sequence[SSAValue],
    ) -> SSAValue:
        match e:
            case AffineConstantExpr(value=v):
                return self.index(v)
            case AffineDimExpr(position=p):
                return dims[p]
            case AffineSymExpr(position=p):
                return syms[p]
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Add, lhs=lhs, rhs=rhs):
                negated = _negated(rhs)
                a = self.expr(lhs, dims, syms)
                if negated is not None:
                    return self.add(arith.SubiOp(a, self.expr(negated, dims, syms)))
                return self.add(arith.AddiOp(a, self.expr(rhs, dims, syms)))
            case AffineBinaryOpExpr(kind=AffineBinaryOpKind.Mul, lhs=lhs, rhs=rhs):
                if isinstance(rhs, AffineConstantExpr) and rhs.value == 1:
                    return self.expr(lhs, dims, syms)
                a, b = self.expr(lhs, dims, syms), self.expr(rhs, dims, syms)
                return self.add(arith.MuliOp(a, b))
            case AffineBinaryOpExpr(
                kind=kind, lhs=lhs, rhs=AffineConstantExpr(value=c)
            ):
                if c <= 0:
                    raise ValueError(f"division by the non-positive constant {c}")
                return self._divide(kind, lhs, c, dims, syms)
            case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
                # Semi-affine: the divisor is a symbol's expression, assumed
                # positive (as MLIR assumes it).
                a, b = self.expr(lhs, dims, syms), self.expr(rhs, dims, syms)
                return self._signed_divide(kind, a, b)
        raise ValueError(f"not an affine expression: {e}")

    def _divide(
        self,
        kind: AffineBinaryOpKind,
        lhs: AffineExpr,
        c: int,
        dims: Sequence[SSAValue],
        syms: Sequence[SSAValue],
    ) -> SSAValue:
        a = self.expr(lhs, dims, syms)
        ranges = [self.range_of(v) for v in (*dims, *syms)]
        r = expr_range(lhs, ranges[: len(dims)], ranges[len(dims) :])
        nonnegative = r is not None and r[0] >= 0
        if c == 1:
            return self.index(0) if kind == AffineBinaryOpKind.Mod else a
        cst = self.index(c)
        if nonnegative:
            if kind == AffineBinaryOpKind.FloorDiv:
                return self.add(arith.DivUIOp(a, cst))
            if kind == AffineBinaryOpKind.Mod:
                return self.add(arith.RemUIOp(a, cst))
            bumped = self.add(arith.AddiOp(a, self.index(c - 1)))
            return self.add(arith.DivUIOp(bumped, cst))
        return self._signed_divide(kind, a, cst)

    def _signed_divide(
        self, kind: AffineBinaryOpKind, a: SSAValue, b: SSAValue
    ) -> SSAValue:
        """`a floordiv|ceildiv|mod b` for any sign of `a` and a positive `b`, by
        MLIR's branch-free expansion."""
        zero = self.index(0)
        if kind == AffineBinaryOpKind.Mod:
            rem = self.add(arith.RemSIOp(a, b))
            negative = self.add(cmpi(rem, zero, "slt"))
            fixed = self.add(arith.AddiOp(rem, b))
            return self.add(arith.SelectOp(negative, fixed, rem))
        if kind == AffineBinaryOpKind.FloorDiv:
            # q = (a < 0 ? -1 - a : a) / b; a < 0 ? -1 - q : q
            minus_one = self.index(-1)
            negative = self.add(cmpi(a, zero, "slt"))
            flipped = self.add(arith.SubiOp(minus_one, a))
            dividend = self.add(arith.SelectOp(negative, flipped, a))
            q = self.add(arith.DivSIOp(dividend, b))
            flipped_q = self.add(arith.SubiOp(minus_one, q))
            return self.add(arith.SelectOp(negative, flipped_q, q))
        # ceildiv: q = (a <= 0 ? -a : a - 1) / b; a <= 0 ? -q : q + 1
        one = self.index(1)
        nonpositive = self.add(cmpi(a, zero, "sle"))
        negated = self.add(arith.SubiOp(zero, a))
        decremented = self.add(arith.SubiOp(a, one))
        dividend = self.add(arith.SelectOp(nonpositive, negated, decremented))
        q = self.add(arith.DivSIOp(dividend, b))
        negated_q = self.add(arith.SubiOp(zero, q))
        incremented = self.add(arith.AddiOp(q, one))
        return self.add(arith.SelectOp(nonpositive, negated_q, incremented))

    def map_results(self, m: AffineMap, operands: Sequence[SSAValue]) -> list[SSAValue]:
        dims, syms = operands[: m.num_dims], operands[m.num_dims :]
        return [self.expr(e, dims, syms) for e in m.results]

    def fold(self, values: list[SSAValue], take_max: bool) -> SSAValue:
        result = values[0]
        for v in values[1:]:
            op = arith.MaxSIOp(result, v) if take_max else arith.MinSIOp(result, v)
            result = self.add(op)
        return result

    def condition(self, s: AffineSet, operands: Sequence[SSAValue]) -> SSAValue:
        """The i1 that holds when every constraint of `s` does."""
        dims, syms = operands[: s.num_dims], operands[s.num_dims :]
        result: SSAValue | None = None
        for c in s.constraints:
            e = c.lhs - c.rhs
            if e.is_pure_affine():
                e = e.simplify(s.num_dims, s.num_symbols)
            positive, negative = _split_terms(e)
            lhs = self.expr(positive, dims, syms)
            rhs = self.expr(negative, dims, syms)
            predicate = "eq" if c.kind == AffineConstraintKind.eq else "sge"
            if c.kind == AffineConstraintKind.le:
                predicate = "sle"
            test = self.add(cmpi(lhs, rhs, predicate))
            result = test if result is None else self.add(arith.AndIOp(result, test))
        if result is None:
            result = self.add(arith.ConstantOp(IntegerAttr(1, i1)))
        return result


def _negated(e: AffineExpr) -> AffineExpr | None:
    """`x` when `e` is `x * -k` (as `x * k`) or a negative constant; else None."""
    if isinstance(e, AffineConstantExpr) and e.value < 0:
        return AffineExpr.constant(-e.value)
    if (
        isinstance(e, AffineBinaryOpExpr)
        and e.kind == AffineBinaryOpKind.Mul
        and isinstance(e.rhs, AffineConstantExpr)
        and e.rhs.value < 0
    ):
        return e.lhs if e.rhs.value == -1 else e.lhs * (-e.rhs.value)
    return None


def _split_terms(e: AffineExpr) -> tuple[AffineExpr, AffineExpr]:
    """`(P, N)` with `e == P - N`, the terms of `e` sorted by the sign of their factor."""
    terms: list[AffineExpr] = []

    def collect(x: AffineExpr) -> None:
        if isinstance(x, AffineBinaryOpExpr) and x.kind == AffineBinaryOpKind.Add:
            collect(x.lhs)
            collect(x.rhs)
        else:
            terms.append(x)

    collect(e)
    positive: AffineExpr = AffineExpr.constant(0)
    negative: AffineExpr = AffineExpr.constant(0)
    for t in terms:
        n = _negated(t)
        if n is None:
            positive = t if _is_zero(positive) else positive + t
        else:
            negative = n if _is_zero(negative) else negative + n
    return positive, negative


def _is_zero(e: AffineExpr) -> bool:
    return isinstance(e, AffineConstantExpr) and e.value == 0


__all__ = ["IndexBuilder", "IndexConstants"]
