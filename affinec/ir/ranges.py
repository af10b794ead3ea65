"""Static ranges of `index` values, from the ops that define them.

The lowering asks two questions of an index value: how large can it get (to size the
threads' share of a block-level loop, to drop guards that can never fail) and can it be
negative (so affine `floordiv` and `mod` may become plain unsigned division). Both are
answered by `value_range`, which follows the value's definition through constants,
loop induction variables, affine maps, integer arithmetic and GPU ids. Interval
arithmetic is exact for one occurrence of each variable; `difference_range` keeps the
correlation between the two sides of a bound (`min(16, 100 - 16 * i) - 0`).
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, BlockArgument, OpResult, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.dialects import affine, gpu
from affinec.ir.affine_exprs import Interval, expr_range, grouped


def value_range(
    value: SSAValue, known: dict[SSAValue, Interval] | None = None
) -> Interval | None:
    """The closed interval `value` lies in, or None when nothing bounds it.

    `known` gives ranges the caller already knows (and caches results).
    """
    cache = known if known is not None else {}
    return _range(value, cache, 0)


def map_ranges(
    m: AffineMap,
    operands: Sequence[SSAValue],
    known: dict[SSAValue, Interval] | None = None,
) -> list[Interval | None]:
    """The range of each result of `m` applied to `operands`."""
    cache = known if known is not None else {}
    ranges = [_range(v, cache, 0) for v in operands]
    dims, syms = ranges[: m.num_dims], ranges[m.num_dims :]
    return [expr_range(e, dims, syms) for e in m.results]


def difference_range(
    upper: AffineExpr,
    upper_operands: Sequence[SSAValue],
    lower: AffineExpr,
    lower_operands: Sequence[SSAValue],
    known: dict[SSAValue, Interval] | None = None,
) -> Interval | None:
    """The range of `upper - lower`, both given as expressions over dims only.

    Operands the two sides share become one dimension, and the difference is
    simplified before interval arithmetic, so `(16 * i + 16) - 16 * i` is exactly 16.
    """
    operands: list[SSAValue] = []
    for v in (*upper_operands, *lower_operands):
        if v not in operands:
            operands.append(v)
    up = upper.replace_dims_and_symbols(
        [AffineExpr.dimension(operands.index(v)) for v in upper_operands], []
    )
    lo = lower.replace_dims_and_symbols(
        [AffineExpr.dimension(operands.index(v)) for v in lower_operands], []
    )
    diff = up - lo
    if diff.is_pure_affine():
        diff = diff.simplify(len(operands), 0)
    cache = known if known is not None else {}
    return expr_range(diff, [_range(v, cache, 0) for v in operands])


def as_dims(m: AffineMap) -> AffineMap:
    """`m` with its symbols turned into dims after its own (operand order unchanged)."""
    known = _AS_DIMS.get(id(m))
    if known is not None and known[0] is m:
        return known[1]
    if len(_AS_DIMS) > 20_000:
        _AS_DIMS.clear()
    result = _as_dims(m)
    _AS_DIMS[id(m)] = (m, result)
    return result


_AS_DIMS: dict[int, tuple[AffineMap, AffineMap]] = {}
"""`as_dims` of the maps it has seen, by identity (each kept with its answer, so
that no other map takes its identity meanwhile): the analyses ask again of the
same op's map, pass after pass."""


def _as_dims(m: AffineMap) -> AffineMap:
    n = m.num_dims
    return AffineMap(
        n + m.num_symbols,
        0,
        tuple(
            e.replace_dims_and_symbols(
                [AffineExpr.dimension(k) for k in range(n)],
                [AffineExpr.dimension(n + k) for k in range(m.num_symbols)],
            )
            for e in m.results
        ),
    )


_MAX_DEPTH = 64


def _range(
    value: SSAValue, cache: dict[SSAValue, Interval], depth: int
) -> Interval | None:
    if value in cache:
        return cache[value]
    if depth > _MAX_DEPTH:
        return None
    r = _compute(value, cache, depth + 1)
    if r is not None:
        cache[value] = r
    return r


def _compute(
    value: SSAValue, cache: dict[SSAValue, Interval], depth: int
) -> Interval | None:
    if isinstance(value, BlockArgument):
        return _block_argument_range(value, cache, depth)
    assert isinstance(value, OpResult)
    op = value.op

    def sub(v: SSAValue) -> Interval | None:
        return _range(v, cache, depth)

    match op:
        case arith.ConstantOp(value=IntegerAttr() as attr):
            v = attr.value.data
            return (v, v)
        case gpu.ThreadIdOp() | gpu.BlockIdOp():
            bound = op.bound or _known_size(op)
            return None if bound is None else (0, bound - 1)
        case gpu.BlockDimOp() | gpu.GridDimOp():
            bound = op.bound or _known_size(op)
            return None if bound is None else (1, bound)
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            m = op.map.data
            ranges = [sub(v) for v in op.mapOperands]
            results = [
                expr_range(e, ranges[: m.num_dims], ranges[m.num_dims :])
                for e in m.results
            ]
            if any(r is None for r in results):
                return None
            los = [r[0] for r in results]  # pyright: ignore[reportOptionalSubscript]
            his = [r[1] for r in results]  # pyright: ignore[reportOptionalSubscript]
            if isinstance(op, affine.MinOp):
                return (min(los), min(his))
            if isinstance(op, affine.MaxOp):
                return (max(los), max(his))
            return results[0]
        case arith.AddiOp() | arith.SubiOp() | arith.MuliOp():
            a, b = sub(op.lhs), sub(op.rhs)
            if a is None or b is None:
                return None
            if isinstance(op, arith.AddiOp):
                return (a[0] + b[0], a[1] + b[1])
            if isinstance(op, arith.SubiOp):
                return (a[0] - b[1], a[1] - b[0])
            corners = [x * y for x in a for y in b]
            return (min(corners), max(corners))
        case arith.MinSIOp() | arith.MaxSIOp():
            a, b = sub(op.lhs), sub(op.rhs)
            if a is None or b is None:
                return None
            f = min if isinstance(op, arith.MinSIOp) else max
            return (f(a[0], b[0]), f(a[1], b[1]))
        case arith.DivUIOp() | arith.DivSIOp() | arith.FloorDivSIOp():
            a, b = sub(op.lhs), sub(op.rhs)
            if a is None or b is None or b[0] != b[1] or b[0] <= 0 or a[0] < 0:
                return None
            return (a[0] // b[0], a[1] // b[0])
        case arith.RemUIOp() | arith.RemSIOp():
            a, b = sub(op.lhs), sub(op.rhs)
            if a is None or b is None or b[0] != b[1] or b[0] <= 0 or a[0] < 0:
                return None
            return (0, min(a[1], b[0] - 1))
        case arith.IndexCastOp():
            return sub(op.input)
        case affine.IfOp() | scf.IfOp():
            # The union of what either branch yields at this position.
            k = op.results.index(value)
            ranges = []
            for region in op.regions:
                term = region.blocks[0].last_op if region.blocks else None
                if term is None or len(term.operands) <= k:
                    return None
                ranges.append(sub(term.operands[k]))
            if any(r is None for r in ranges):
                return None
            return (min(r[0] for r in ranges), max(r[1] for r in ranges))  # pyright: ignore
    return None


def _block_argument_range(
    arg: BlockArgument, cache: dict[SSAValue, Interval], depth: int
) -> Interval | None:
    block: Block = arg.block
    owner = block.parent_op()
    match owner:
        case affine.ForOp() if arg.index == 0:
            lo = map_ranges(owner.lowerBoundMap.data, owner.lowerBoundOperands, cache)
            hi = map_ranges(owner.upperBoundMap.data, owner.upperBoundOperands, cache)
            return _induction_range(lo, hi)
        case affine.ParallelOp():
            lower, upper = owner.lowerBoundsMap.data, owner.upperBoundsMap.data
            lo = map_ranges(lower, owner.lower_bound_operands, cache)
            hi = map_ranges(upper, owner.upper_bound_operands, cache)
            k = arg.index
            return _induction_range(
                grouped(lo, owner.lower_groups)[k], grouped(hi, owner.upper_groups)[k]
            )
        case scf.ForOp() if arg.index == 0:
            lo, hi = _range(owner.lb, cache, depth), _range(owner.ub, cache, depth)
            if lo is None or hi is None:
                return None
            return (lo[0], max(lo[0], hi[1] - 1))
        case gpu.LaunchOp() if arg.index < 12:
            sizes = (*owner.grid_sizes, *owner.block_sizes)
            size = _range(
                sizes[arg.index % 3 + 3 * ((arg.index // 3) % 2)], cache, depth
            )
            if size is None:
                return None
            return (0, size[1] - 1) if arg.index < 6 else (1, size[1])
    return None


def _induction_range(
    lows: Sequence[Interval | None], highs: Sequence[Interval | None]
) -> Interval | None:
    """The range of a loop variable from the ranges of its bounds' results (the
    largest lower bound, the smallest upper bound). A loop that may not run at all
    still gets a range its variable keeps to whenever it does run."""
    if not lows or not highs or any(r is None for r in (*lows, *highs)):
        return None
    start = max(r[0] for r in lows)  # pyright: ignore[reportOptionalSubscript]
    end = min(r[1] for r in highs) - 1  # pyright: ignore[reportOptionalSubscript]
    return (start, max(start, end))


def _known_size(op: gpu._IndexOfDim) -> int | None:  # pyright: ignore[reportPrivateUsage]
    func = op.parent_op()
    while func is not None and not isinstance(func, gpu.FuncOp):
        func = func.parent_op()
    if func is None:
        return None
    sizes = (
        func.block_size
        if isinstance(op, gpu.ThreadIdOp | gpu.BlockDimOp)
        else func.grid_size
    )
    if sizes is None:
        return None
    return sizes["xyz".index(op.dim)]
