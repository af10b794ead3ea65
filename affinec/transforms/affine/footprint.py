"""The exact footprint of a memref's accesses within one op (read-only analysis).

Inside a block band, an access such as

    affinec.padded_load %input[%n0 + %n1, %oh0 * 8 + %oh1 + %r0 - 1, ...]

has indices that split into a part over *outer* values (grid and tile variables,
fixed while the band runs) and a part over *inner* values (the band's variables and
the loops inside it, which range over intervals). The footprint of all accesses of
one memref in the band is a box: an origin affine in the outer values and constant
extents, here `(%n0, %oh0 * 8 + %r0 - 1, ...)` and `1 x 8 x ...`. Each access reads
the box at `index - origin`, an expression of its inner values and a constant.

This is the reference design's footprint computation (its ResNet-50 example: a 16x16
output tile of a 7x7 stride-2 convolution reads 1x1x37x37 of the input), for any
stride, padding and dilation: the box comes from interval arithmetic over the inner
part, which is exact for the sums of products of one variable each that the
frontend's accesses are made of.

Where every access steps along a dimension by a multiple of some `g` from a common
residue (a stride-2 convolution whose step fixes the filter row reads rows
`%oh1 * 2` only), the box keeps every `g`-th index along it (`strides`): its extent
counts those, each access reads it at `(index - origin) / g`, and a copy fetches
`origin + g * i`. ResNet-50's first layer, one filter row a step, 4 output rows a
block: 4 input rows instead of 7.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import MemRefType
from xdsl.ir import Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.dialects import affine
from affinec.ir.affine_exprs import Interval, expr_range, linear_form, simplify_expr
from affinec.ir.ranges import as_dims, value_range
from affinec.transforms.affine.analysis import is_defined_inside

AccessOp = affine.AffineLoadBase | affine.StoreOp


@dataclass(frozen=True)
class Footprint:
    """The box the accesses of `memref` within an op read."""

    memref: SSAValue
    outer: tuple[SSAValue, ...]
    """The values the origin is an expression of (as dims, in this order)."""
    origin: tuple[AffineExpr, ...]
    extents: tuple[int, ...]
    offsets: tuple[tuple[AccessOp, AffineMap], ...]
    """Each access, and the map (over its own index operands, as they are) of its
    indices relative to the origin, in steps of `strides`."""
    strides: tuple[int, ...] = ()
    """The step between the box's indices read along each dimension (1: all of
    them); empty means all 1."""

    def stride(self, d: int) -> int:
        return self.strides[d] if self.strides else 1

    @property
    def elements(self) -> int:
        n = 1
        for e in self.extents:
            n *= e
        return n

    @property
    def element_type(self):
        t = self.memref.type
        assert isinstance(t, MemRefType)
        return t.get_element_type()


class NoFootprint(Exception):
    """The accesses do not fit one box with constant extents (the message says why)."""


def footprint(
    memref: SSAValue, accesses: Sequence[AccessOp], inside: Operation
) -> Footprint:
    """The footprint of `accesses` (all of `memref`) within `inside`: values defined in
    `inside` are inner and range over what their bounds allow, the others are
    outer. Raises `NoFootprint` when an index is not an outer expression plus a
    linear one of inner values, or the accesses' origins differ by more than
    constants."""
    outer: list[SSAValue] = []
    parts: list[tuple[AccessOp, list[tuple[AffineExpr, int, Interval, int]]]] = []
    for op in accesses:
        operands = list(op.indices)
        m = as_dims(op.map.data)
        inner = [is_defined_inside(v, inside) for v in operands]
        for v, is_inner in zip(operands, inner, strict=True):
            if not is_inner and v not in outer:
                outer.append(v)
        ranges = [
            value_range(v) if i else None for v, i in zip(operands, inner, strict=True)
        ]
        dims: list[tuple[AffineExpr, int, Interval, int]] = []
        for k, e in enumerate(m.results):
            dims.append(_split(e, operands, inner, ranges, outer, op, k))
        parts.append((op, dims))

    rank = len(parts[0][1])
    origin: list[AffineExpr] = []
    extents: list[int] = []
    strides: list[int] = []
    for k in range(rank):
        bases = {simplify_expr(dims[k][0], len(outer), 0) for _, dims in parts}
        if len(bases) != 1:
            raise NoFootprint(
                f"its accesses start at different places along dimension {k} "
                f"({len(bases)} origins that differ by more than a constant)"
            )
        lo = min(dims[k][1] + dims[k][2][0] for _, dims in parts)
        hi = max(dims[k][1] + dims[k][2][1] for _, dims in parts)
        # the lattice every access reads: their steps, and where each starts
        step = 0
        for _, dims in parts:
            step = math.gcd(step, dims[k][3], dims[k][1] + dims[k][2][0] - lo)
        step = step or 1
        base = bases.pop()
        origin.append(simplify_expr(base + lo, len(outer), 0))
        extents.append((hi - lo) // step + 1)
        strides.append(step)

    offsets = []
    for op, _ in parts:
        m = as_dims(op.map.data)
        operands = list(op.indices)
        own = _outer_dims(outer, operands)
        results = tuple(
            _divided(
                simplify_expr(
                    e - origin[k].replace_dims_and_symbols(own, []), len(operands), 0
                ),
                strides[k],
                len(operands),
            )
            for k, e in enumerate(m.results)
        )
        offsets.append((op, AffineMap(len(operands), 0, results)))
    return Footprint(
        memref,
        tuple(outer),
        tuple(origin),
        tuple(extents),
        tuple(offsets),
        tuple(strides),
    )


def _divided(e: AffineExpr, step: int, n: int) -> AffineExpr:
    """`e / step` for an expression whose every coefficient and constant `step`
    divides (an access's offset on its lattice)."""
    if step == 1:
        return e
    form = linear_form(e, n, 0)
    assert form is not None and not any(c % step for c in (*form[0], form[2]))
    out = AffineExpr.constant(form[2] // step)
    for d, c in enumerate(form[0]):
        if c:
            out = out + AffineExpr.dimension(d) * (c // step)
    return simplify_expr(out, n, 0)


def _outer_dims(outer: list[SSAValue], operands: list[SSAValue]) -> list[AffineExpr]:
    """Outer values as dims of `operands`; one the access does not use is not in its
    origin either (its coefficient cancels), so zero stands for it."""
    return [
        AffineExpr.dimension(operands.index(v))
        if v in operands
        else AffineExpr.constant(0)
        for v in outer
    ]


def _split(
    e: AffineExpr,
    operands: list[SSAValue],
    inner: list[bool],
    ranges: list[Interval | None],
    outer: list[SSAValue],
    op: Operation,
    k: int,
) -> tuple[AffineExpr, int, Interval, int]:
    """Index `e` as (outer part without constant, over `outer` as dims; constant;
    range of the inner part; the gcd of the inner part's coefficients, 0 when it
    has none)."""
    n = len(operands)
    zero_inner = [
        AffineExpr.constant(0) if i else AffineExpr.dimension(j)
        for j, i in enumerate(inner)
    ]
    outer_part = simplify_expr(e.replace_dims_and_symbols(zero_inner, []), n, 0)
    inner_part = simplify_expr(e - outer_part, n, 0)
    form = linear_form(inner_part, n, 0)
    if form is None or any(c and not i for c, i in zip(form[0], inner, strict=True)):
        raise NoFootprint(
            f"index {k} of '{op.name}' is not an expression of outer values plus a "
            "linear one of the band's own"
        )
    step = 0
    for c in form[0]:
        step = math.gcd(step, c)
    r = expr_range(inner_part, ranges)
    if r is None:
        raise NoFootprint(f"index {k} of '{op.name}' ranges over unbounded values")
    # The outer part over `outer` as dims, its constant apart.
    as_outer = outer_part.replace_dims_and_symbols(
        [
            AffineExpr.dimension(outer.index(v)) if not i else AffineExpr.constant(0)
            for v, i in zip(operands, inner, strict=True)
        ],
        [],
    )
    form = linear_form(simplify_expr(as_outer, len(outer), 0), len(outer), 0)
    constant = form[2] if form is not None else 0
    base = simplify_expr(as_outer - constant, len(outer), 0)
    return base, constant, r, step
