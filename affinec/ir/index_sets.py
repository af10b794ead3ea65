"""The exact values an access's indices take over a small iteration space.

Intervals (`affinec.ir.ranges`) bound an index but forget the guards around it and
the correlations between variables: a zero-fill of a tile's padding rows
(`%r + 17` under `affine.if (%tx + 64 * %j <= 134)`) and the copy of its other rows
both look like "rows 0 to 32". Where the variables an access depends on span few
enough points, `index_sets` enumerates them instead: every combination of the free
block arguments (thread ids, loop variables) within their ranges, the enclosing
guards applied, each index computed with numpy. The result is, per dimension, the
set of values the access reaches. `index_points` keeps the points themselves: which
element each combination reaches, beside the values of the variables (the thread
that runs it), so that a caller can tell which thread touches which element.

    index_sets(load, [%i, %j], guards, known={%t: 3})  ->  [{0, 1}, {17, ..., 31}]

Values it cannot follow (anything but constants, block arguments and affine or
integer arithmetic, or constants past 2^31) make it answer None, and the caller
falls back to intervals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import BlockArgument, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from affinec.dialects import affine, gpu
from affinec.ir.affine_exprs import Interval
from affinec.ir.ranges import value_range

MAX_POINTS = 1 << 12
"""Combinations of free variables enumerated at most."""

Guard = tuple[affine.IfOp, bool]
"""An enclosing `affine.if` and whether the access is in its then-branch."""


def free_roots(
    values: Sequence[SSAValue], guards: Sequence[Guard]
) -> list[SSAValue] | None:
    """The block arguments and GPU ids `values` and the guards' operands are computed
    from, or
    None if some value on the way is not affine or integer arithmetic."""
    roots: list[SSAValue] = []
    seen: set[SSAValue] = set()
    stack = [*values, *(v for g, _ in guards for v in g.args)]
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        op = v.owner
        if isinstance(v, BlockArgument) or isinstance(op, _IDS):
            roots.append(v)
            continue
        if isinstance(op, arith.ConstantOp):
            if not isinstance(op.value, IntegerAttr):
                return None
        elif isinstance(op, _ARITHMETIC):
            stack.extend(op.operands)
        else:
            return None
    return roots


def index_sets(
    indices: Sequence[SSAValue],
    m: AffineMap | None,
    guards: Sequence[Guard],
    roots: Sequence[SSAValue],
    known: dict[SSAValue, int],
    ranges: dict[SSAValue, Interval],
) -> list[frozenset[int]] | None:
    """Per result of `m` over `indices` (the indices themselves without a map), the
    values they take where every guard holds as its branch needs; `roots` as
    `free_roots` found them, the `known` ones fixed, the others over their `ranges`
    (a cache `value_range` fills). None when a root has no range or there are more
    than `MAX_POINTS` combinations."""
    axes = []
    for r in roots:
        if r in known:
            continue
        span = value_range(r, ranges)
        if span is None or span[1] < span[0]:  # unbounded, or code that never runs
            return None
        axes.append(([r], span))
    points = index_points(indices, m, guards, axes, known, MAX_POINTS)
    if points is None:
        return None
    results, _ = points
    return [frozenset(np.unique(r).tolist()) for r in results]


Axis = tuple[Sequence[SSAValue], Interval]
"""A variable enumerated over an interval, and the values that take it (several
names of one variable, as the thread id read by two ops; none for a variable the
indices do not name, as the thread that runs them)."""


def index_points(
    indices: Sequence[SSAValue],
    m: AffineMap | None,
    guards: Sequence[Guard],
    axes: Sequence[Axis],
    known: dict[SSAValue, int],
    limit: int,
) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Every point of `axes` (each variable over its interval, the `known` values
    fixed) where the guards hold: per result of `m` over `indices` (the indices
    themselves without a map) its value there, and per axis the variable's value
    there, as 1-D arrays of one entry per point. Every root the indices and guards
    depend on must be known or on an axis. None past `limit` points, or where
    64-bit arithmetic would not keep the numbers exact."""
    extents = [span for _, span in axes]
    if any(hi < lo for lo, hi in extents):  # code that never runs
        return [np.zeros(0, np.int64) for _ in (m.results if m else indices)], [
            np.zeros(0, np.int64) for _ in axes
        ]
    if math.prod(hi - lo + 1 for lo, hi in extents) > limit:
        return None
    if any(max(abs(lo), abs(hi)) > LARGEST for lo, hi in extents):
        return None
    env: dict[SSAValue, np.ndarray | int] = dict(known)
    shape = [hi - lo + 1 for lo, hi in extents]
    grids = []
    for axis, ((values, _), (lo, _)) in enumerate(zip(axes, extents, strict=True)):
        along = [1] * len(axes)
        along[axis] = shape[axis]
        grid = np.arange(lo, lo + shape[axis], dtype=np.int64).reshape(along)
        grids.append(grid)
        for v in values:
            env[v] = grid
    mask = np.ones(shape, dtype=bool)
    try:
        for guard, branch in guards:
            holds = _holds(guard, env)
            mask &= holds if branch else ~holds
        values = [_value(v, env) for v in indices]
        results = values if m is None else [_expr(e, m, values) for e in m.results]
    except (_TooLarge, OverflowError):
        return None  # numbers past what 64-bit arithmetic keeps exact
    return (
        [np.broadcast_to(r, shape)[mask] for r in results],
        [np.broadcast_to(g, shape)[mask] for g in grids],
    )


_IDS = (gpu.ThreadIdOp, gpu.BlockIdOp, gpu.LaneIdOp)

_ARITHMETIC = (
    affine.ApplyOp,
    affine.MinOp,
    affine.MaxOp,
    arith.AddiOp,
    arith.SubiOp,
    arith.MuliOp,
    arith.IndexCastOp,
)


LARGEST = 1 << 31
"""Constants past this are not followed: products of them and of the enumerated
values could leave 64-bit integers, which numpy would wrap silently."""


class _TooLarge(Exception):
    pass


def _constant(c: int) -> int:
    if abs(c) > LARGEST:
        raise _TooLarge
    return c


def _value(v: SSAValue, env: dict[SSAValue, np.ndarray | int]) -> np.ndarray | int:
    if v in env:
        return env[v]
    op = v.owner
    assert isinstance(op, Operation)
    if isinstance(op, arith.ConstantOp):
        result = _constant(op.value.value.data)  # pyright: ignore
    elif isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp):
        m = op.map.data
        operands = [_value(x, env) for x in op.mapOperands]
        results = [_expr(e, m, operands) for e in m.results]
        if isinstance(op, affine.MinOp):
            result = _reduce(np.minimum, results)
        elif isinstance(op, affine.MaxOp):
            result = _reduce(np.maximum, results)
        else:
            (result,) = results
    elif isinstance(op, arith.IndexCastOp):
        result = _value(op.input, env)
    else:
        a, b = _value(op.operands[0], env), _value(op.operands[1], env)
        if isinstance(op, arith.AddiOp):
            result = a + b
        elif isinstance(op, arith.SubiOp):
            result = a - b
        else:
            result = a * b
    env[v] = result
    return result


def _reduce(f, values: list) -> np.ndarray | int:
    result = values[0]
    for v in values[1:]:
        result = f(result, v)
    return result


def _expr(e: AffineExpr, m: AffineMap, operands: Sequence) -> np.ndarray | int:
    """`e` over `m`'s operands (dims, then symbols)."""
    match e:
        case AffineConstantExpr(value=c):
            return _constant(c)
        case AffineDimExpr(position=p):
            return operands[p]
        case AffineSymExpr(position=p):
            return operands[m.num_dims + p]
        case AffineBinaryOpExpr(kind=kind, lhs=lhs, rhs=rhs):
            a, b = _expr(lhs, m, operands), _expr(rhs, m, operands)
            if kind == AffineBinaryOpKind.Add:
                return a + b
            if kind == AffineBinaryOpKind.Mul:
                return a * b
            if kind == AffineBinaryOpKind.FloorDiv:
                return np.floor_divide(a, b)
            if kind == AffineBinaryOpKind.CeilDiv:
                return -np.floor_divide(-a, b)
            return np.mod(a, b)
    raise ValueError(f"unexpected affine expression {e}")


def _holds(guard: affine.IfOp, env: dict[SSAValue, np.ndarray | int]) -> np.ndarray:
    s = guard.condition.data
    operands = [_value(v, env) for v in guard.args]
    m = AffineMap(s.num_dims, s.num_symbols, ())
    holds = np.array(True)
    for c in s.constraints:
        r = np.asarray(_expr(c.lhs - c.rhs, m, operands))
        holds = holds & (r == 0 if c.kind == AffineConstraintKind.eq else r >= 0)
    return holds
