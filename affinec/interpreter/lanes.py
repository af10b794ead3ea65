"""An `affine.parallel` run over all its iterations at once, as numpy vectors.

The naive IR is one band over the outputs with the reduction inside; run iteration by
iteration, every op costs a Python statement per output point. Here, where the body
allows it, each op runs once for a whole chunk of iterations (its *lanes*): a band
induction variable is an array over the lanes, a load is a gathering index, a store a
scattering one, and a `memref.alloca` of the body (an iteration's private buffer) is
one buffer per lane.

    affine.parallel (%i, %j) = (0, 0) to (64, 100) {     i = LB0 + (lanes // 100) % 64
      %acc = memref.alloca() : memref<f32>                acc = poisoned((L,), f32)
      affine.store %zero, %acc[]                         acc[LANE] = zero
      affine.for %p = 0 to 12 {                           for p in range(0, 12):
        %a = affine.load %A[%i, %p]                         a = A[i, p]
        ...                                                 ...

Running op by op over the lanes (each op's lanes in order) is one interleaving of the
band's iterations, which the band declares independent: the results are the
iteration-by-iteration ones, bit for bit — numpy rounds an array of float32 or float16
exactly as it rounds one scalar.

A value computed from no induction variable of the band (a constant, a loop variable
of an inner `affine.for`, a load at such indices) stays *uniform*, a plain scalar
written by the ordinary emitters. A body this module does not take — an op without a
lane emitter, a loop bound or an `affine.if` condition that differs between lanes, a
loop-carried value, an index that might leave 64-bit integers, a nested band — runs
iteration by iteration as before (`plan_lanes` says which).
"""

from __future__ import annotations

import math as pymath
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import arith, math, memref
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSymExpr,
)

from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.interpreter.affine_maps import (
    folded,
    for_bounds,
    if_condition,
    map_ranges,
    map_results,
)
from affinec.interpreter.codegen import FunctionWriter
from affinec.interpreter.memref_ops import named_indices, proven_inside
from affinec.interpreter.support import (
    access_shape,
    fused_multiply_add_lanes,
    maximumf_lanes,
    memref_shape,
    minimumf_lanes,
    numpy_dtype,
    out_of_bounds,
    poisoned,
    shape_text,
)
from affinec.ir import ranges
from affinec.ir.affine_exprs import Interval, grouped

LANES = 1 << 14
"""The iterations run together: enough to amortize numpy's cost per call, few enough
that a body's private buffers and index arrays stay small."""

PRIVATE_BYTES = 1 << 26
"""What the lanes' private buffers may take together; a body whose one iteration's
buffers take more than `PRIVATE_BYTES // LANES` runs in fewer lanes at a time, and one
whose buffers take more than a few KiB iteration by iteration."""

MAX_PRIVATE_BYTES_PER_LANE = 1 << 12

SAFE_INDEX = 1 << 62
"""Index values the lanes compute in numpy's int64 without overflowing; a map whose
range is not known to stay within it runs iteration by iteration (Python's integers)."""


# -- what the generated code calls ----------------------------------------------------------


def lane_ivs(
    start: int,
    stop: int,
    lowers: Sequence[int],
    steps: Sequence[int],
    counts: Sequence[int],
) -> list[np.ndarray]:
    """The induction variables of lanes `start` to `stop` of a band of `counts`
    iterations along each dimension, in the band's (row-major) order."""
    flat = np.arange(start, stop, dtype=np.int64)
    ivs = []
    stride = 1
    for lower, step, count in reversed(list(zip(lowers, steps, counts, strict=True))):
        ivs.append(lower + step * ((flat // stride) % count))
        stride *= count
    return ivs[::-1]


def _inside(index: tuple, shape: tuple[int, ...], dims: tuple[int, ...]):
    inside = True
    for k in dims:
        inside = inside & (index[k] >= 0) & (index[k] < shape[k])
    return inside


def checked_offsets(
    op: Operation, index: Sequence, shape: tuple[int, ...], lanes: int, checked=True
) -> np.ndarray:
    """The row-major offset of each lane's element `index` (arrays over `lanes`
    lanes, or numbers) in `shape`, the lanes `checked` (a mask, or all) refused
    with the out-of-bounds error of the first whose index leaves it."""
    index = [np.broadcast_to(i, (lanes,)) for i in index]
    inside = np.ones(lanes, bool)
    for i, d in zip(index, shape, strict=True):
        inside &= (i >= 0) & (i < d)
    if (bad := checked & ~inside).any():
        k = int(np.argmax(bad))
        out_of_bounds(op, tuple(int(i[k]) for i in index), shape)
    offsets = np.zeros(lanes, np.int64)
    for i, d in zip(index, shape, strict=True):
        offsets = offsets * d + i
    return offsets


def check_lanes(
    op: Operation, shape: tuple[int, ...], index: tuple, dims: tuple[int, ...]
) -> None:
    """Raise the iteration-by-iteration error for the first lane whose index along
    one of `dims` leaves `shape`."""
    inside = _inside(index, shape, dims)
    if np.all(inside):
        return
    lane = int(np.argmin(inside))
    first = tuple(int(i[lane]) if np.ndim(i) else int(i) for i in index)
    out_of_bounds(op, first, shape)


def padded_gather(array: np.ndarray, index: tuple, dims: tuple[int, ...], zero):
    """`array[index]` where every index along `dims` is inside, `zero` elsewhere."""
    clipped = list(index)
    for k in dims:
        clipped[k] = np.clip(index[k], 0, array.shape[k] - 1)
    return np.where(_inside(index, array.shape, dims), array[tuple(clipped)], zero)


# -- which bands run as lanes ---------------------------------------------------------------


@dataclass
class LanePlan:
    """What a band's body computes per lane: the values that differ between lanes
    (`varying`) and the body's private buffers (one per lane)."""

    varying: set[SSAValue] = field(default_factory=set)
    private: set[SSAValue] = field(default_factory=set)
    known: dict[SSAValue, Interval] = field(default_factory=dict)
    """The ranges of index values found so far (`indices_fit`'s cache)."""

    @property
    def lanes(self) -> int:
        """How many iterations run together: `LANES`, fewer for large buffers."""
        bytes_per_lane = sum(buffer_bytes(b.type) for b in self.private)
        return max(1, min(LANES, PRIVATE_BYTES // max(1, bytes_per_lane)))

    def differ(self, values: Sequence[SSAValue]) -> bool:
        return any(v in self.varying for v in values)

    def varies(self, m: AffineMap, operands: Sequence[SSAValue]) -> bool:
        """Whether a result of `m` applied to `operands` differs between lanes:
        whether an operand it uses does (`(d0) -> (0)` of a lane's index does
        not)."""
        used = set()
        for e in m.results:
            for x in e.dfs():
                if isinstance(x, AffineDimExpr):
                    used.add(x.position)
                elif isinstance(x, AffineSymExpr):
                    used.add(m.num_dims + x.position)
        return any(operands[k] in self.varying for k in used)


_FLOAT_BINARY = {
    arith.AddfOp: "+",
    arith.SubfOp: "-",
    arith.MulfOp: "*",
    arith.DivfOp: "/",
}
_FLOAT_HELPERS = {arith.MaximumfOp: maximumf_lanes, arith.MinimumfOp: minimumf_lanes}
ELEMENTWISE = (
    *_FLOAT_BINARY,
    *_FLOAT_HELPERS,
    arith.NegfOp,
    arith.ExtFOp,
    arith.TruncFOp,
    math.FmaOp,
)
"""Float ops computed lane by lane; negation and conversions by their ordinary
emitters, whose `-x` and `to(x)` take arrays as they take scalars."""


def plan_lanes(band: affine.ParallelOp) -> LanePlan | None:
    """The lanes' plan for `band`, or None where it runs iteration by iteration."""
    if band.results or any(s <= 0 for s in band.step_values):
        return None
    plan = LanePlan(varying=set(band.induction_variables))
    return plan if _block_takes_lanes(band.body.block, plan) else None


def _block_takes_lanes(block: Block, plan: LanePlan) -> bool:
    return all(_op_takes_lanes(op, plan) for op in block.ops)


def _op_takes_lanes(op: Operation, plan: LanePlan) -> bool:
    match op:
        case affine.YieldOp():
            return not op.operands
        case affine.ForOp():
            bounds = (*op.lowerBoundOperands, *op.upperBoundOperands)
            if op.iter_args or plan.differ(bounds):
                return False
            return _block_takes_lanes(op.body.block, plan)
        case affine.IfOp():
            if op.results or plan.differ(op.args):
                return False
            regions = (op.then_region, op.else_region)
            return all(_block_takes_lanes(r.block, plan) for r in regions if r.blocks)
        case memref.AllocaOp():
            if op.dynamic_sizes or op.symbol_operands:
                return False
            plan.private.add(op.memref)
            bytes_per_lane = sum(buffer_bytes(b.type) for b in plan.private)
            return bytes_per_lane <= MAX_PRIVATE_BYTES_PER_LANE
        case affine.LoadOp() | PaddedLoadOp() | affine.StoreOp():
            if not indices_fit(op.map.data, op.indices, plan.known):
                return False
            if op.memref in plan.private or plan.varies(op.map.data, op.indices):
                plan.varying.update(op.results)
            return True
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            if plan.varies(op.map.data, op.mapOperands):
                if not indices_fit(op.map.data, op.mapOperands, plan.known):
                    return False
                plan.varying.add(op.result)
            return True
    if op.regions or any(v in plan.private for v in op.operands):
        return False
    if not plan.differ(op.operands):
        return True  # the same for every lane: computed once, by its ordinary emitter
    if isinstance(op, ELEMENTWISE):
        plan.varying.update(op.results)
        return True
    return False


def buffer_bytes(t) -> int:
    """The bytes of a static memref type (numpy's element size)."""
    shape = memref_shape(t)
    return pymath.prod(shape) * numpy_dtype(t.get_element_type()).itemsize


def indices_fit(
    m: AffineMap,
    operands: Sequence[SSAValue],
    known: dict[SSAValue, Interval] | None = None,
) -> bool:
    """Whether every result of `m` stays within numpy's int64, dividing by positive
    constants only (numpy's `//` and `%` then floor as Python's do); `known`: ranges
    the caller knows, to which those found on the way are added (a plan asks about
    the same values op after op)."""
    if any(_divides_by_non_constant(e) for e in m.results):
        return False
    for r in ranges.map_ranges(m, operands, known):
        if r is None or not -SAFE_INDEX < r[0] <= r[1] < SAFE_INDEX:
            return False
    return True


def _divides_by_non_constant(expr: AffineExpr) -> bool:
    if not isinstance(expr, AffineBinaryOpExpr):
        return False
    if expr.kind not in (AffineBinaryOpKind.Add, AffineBinaryOpKind.Mul) and not (
        isinstance(expr.rhs, AffineConstantExpr) and expr.rhs.value > 0
    ):
        return True
    return _divides_by_non_constant(expr.lhs) or _divides_by_non_constant(expr.rhs)


# -- writing a band as lanes ----------------------------------------------------------------


def emit_band(band: affine.ParallelOp, w: FunctionWriter) -> bool:
    """Write `band` as lanes if its body takes them (see `plan_lanes`); say whether."""
    if not w.program.lanes:
        return False
    plan = plan_lanes(band)
    if plan is None:
        return False
    lowers = grouped(
        map_results(w, band.lowerBoundsMap.data, band.lower_bound_operands),
        band.lower_groups,
    )
    uppers = grouped(
        map_results(w, band.upperBoundsMap.data, band.upper_bound_operands),
        band.upper_groups,
    )
    steps = band.step_values
    lo, counts = w.fresh("lanes_lb"), w.fresh("lanes_count")
    w.line(f"{lo} = ({', '.join(folded(e, 'max') for e in lowers)},)")
    trips = [
        f"max(0, -(-({folded(hi, 'min')} - {lo}[{k}]) // {step}))"
        for k, (hi, step) in enumerate(zip(uppers, steps, strict=True))
    ]
    w.line(f"{counts} = ({', '.join(trips)},)")
    total, start = w.fresh("lanes_total"), w.fresh("lanes_start")
    w.line(f"{total} = {' * '.join(f'{counts}[{k}]' for k in range(len(steps)))}")
    # Charged as the iterations would be, once; the chunks themselves are free.
    w.line(f"{w.program.spend}(0, {total})")
    lanes = LaneWriter(w, plan)
    chunk = plan.lanes
    with w.indented(f"for {start} in range(0, {total}, {chunk}):"):
        stop = f"min({start} + {chunk}, {total})"
        ivs = ", ".join(w.define(iv) for iv in band.induction_variables)
        ivs_of = w.global_(lane_ivs, "lane_ivs")
        w.line(f"{ivs}, = {ivs_of}({start}, {stop}, {lo}, {steps}, {counts})")
        w.line(f"{lanes.count} = {stop} - {start}")
        w.line(f"{lanes.lane} = {w.global_(np.arange, 'arange')}({lanes.count})")
        lanes.block(band.body.block)
    return True


class LaneWriter:
    """Writes a body's ops for lanes: what differs between lanes as arrays, the
    rest by the ordinary emitters."""

    def __init__(self, w: FunctionWriter, plan: LanePlan) -> None:
        self.w = w
        self.plan = plan
        self.count = w.fresh("lane_count")
        self.lane = w.fresh("lane")
        """The lanes' own numbers, 0 to L - 1, indexing their private buffers."""

    def block(self, block: Block) -> None:
        self.block_of(block.ops)

    def block_of(self, ops: Iterable[Operation]) -> None:
        """The ops (of one block) but its `affine.yield`."""
        for op in ops:
            if not isinstance(op, affine.YieldOp):
                with self.w.at(op):
                    self.op(op)

    def op(self, op: Operation) -> None:
        emit = LANE_EMITTERS.get(type(op))
        if emit is not None and (
            isinstance(op, affine.ForOp | affine.IfOp | memref.AllocaOp)
            or any(v in self.plan.private for v in op.operands)
            or self.plan.differ((*op.operands, *op.results))
        ):
            emit(self, op)
        else:
            self.w.emit_op(op)


def _for(lanes: LaneWriter, op: affine.ForOp) -> None:
    w = lanes.w
    with w.for_range(w.define(op.induction_variable), for_bounds(op, w)):
        lanes.block(op.body.block)


def _if(lanes: LaneWriter, op: affine.IfOp) -> None:
    w = lanes.w
    with w.indented(f"if {if_condition(op, w)}:"):
        lanes.block(op.then_region.block)
    if op.else_region.blocks:
        with w.indented("else:"):
            lanes.block(op.else_region.block)


def _alloca(lanes: LaneWriter, op: memref.AllocaOp) -> None:
    w = lanes.w
    t = op.memref.type
    shape = memref_shape(t)  # pyright: ignore[reportArgumentType]
    dtype = w.global_(numpy_dtype(t.get_element_type()), "dtype")  # pyright: ignore
    buffer = w.global_(poisoned, "poisoned")
    w.line(f"{w.define(op.memref)} = {buffer}(({lanes.count},) + {shape}, {dtype})")


def _access(lanes: LaneWriter, op: affine.LoadOp | PaddedLoadOp | affine.StoreOp):
    w, plan = lanes.w, lanes.plan
    t = op.memref.type
    shape = access_shape(t, w[op.memref])  # pyright: ignore[reportArgumentType]
    names = named_indices(w, map_results(w, op.map.data, op.indices))
    known = map_ranges(w, op.map.data, op.indices)
    dims = tuple(
        k
        for k, (r, dim) in enumerate(zip(known, shape, strict=True))
        if not proven_inside(r, dim)
    )
    index = f"({', '.join(names)}{',' * (len(names) == 1)})"
    padded = isinstance(op, PaddedLoadOp)
    # a padded load's `in_bounds` dimensions are checked as an unpadded access's
    strict = tuple(k for k in dims if not padded or k in op.in_bounds)  # pyright: ignore
    dims = tuple(k for k in dims if k not in strict)
    if strict:
        check = w.global_(check_lanes, "check_lanes")
        w.line(f"{check}({w.op_ref(op)}, {shape_text(shape)}, {index}, {strict})")
    array = w[op.memref]
    if op.memref in plan.private:
        # Lane by lane, or a slice of every lane where the rest is the same for all.
        first = lanes.lane if plan.varies(op.map.data, op.indices) else ":"
        full = f"{first}, {', '.join(names)}" if names else first
    else:
        full = index
    if isinstance(op, affine.StoreOp):
        value = w[op.value]
        if plan.differ((op.value,)) and not (
            op.memref in plan.private or plan.varies(op.map.data, op.indices)
        ):
            value = f"{value}[-1]"  # all lanes store to one place: the last one stays
        w.line(f"{array}[{full}] = {value}")
    elif padded and dims:
        zero = w.global_(numpy_dtype(op.result.type).type(0), "zero")
        gather = w.global_(padded_gather, "padded_gather")
        w.line(f"{w.define(op.result)} = {gather}({array}, {index}, {dims}, {zero})")
    else:
        # A copy: the lanes' values must not follow later stores to the buffer.
        w.line(f"{w.define(op.result)} = {array}[{full}].copy()")


def _map_op(lanes: LaneWriter, op: affine.ApplyOp | affine.MinOp | affine.MaxOp):
    w = lanes.w
    exprs = map_results(w, op.map.data, op.mapOperands)
    text = exprs[0]
    if not isinstance(op, affine.ApplyOp):
        fold = np.minimum if isinstance(op, affine.MinOp) else np.maximum
        name = w.global_(fold, fold.__name__)
        for e in exprs[1:]:
            text = f"{name}({text}, {e})"
    w.line(f"{w.define(op.result)} = {text}")


def _float_binary(lanes: LaneWriter, op: Operation) -> None:
    w = lanes.w
    a, b = w.names(op.operands)
    result = w.define(op.results[0])
    if (fn := _FLOAT_HELPERS.get(type(op))) is not None:  # pyright: ignore
        w.line(f"{result} = {w.global_(fn, fn.__name__)}({a}, {b})")
    else:
        w.line(f"{result} = {a} {_FLOAT_BINARY[type(op)]} {b}")  # pyright: ignore


def _fma(lanes: LaneWriter, op: math.FmaOp) -> None:
    w = lanes.w
    a, b, c = w.names(op.operands)
    fn = w.global_(fused_multiply_add_lanes, "fma_lanes")
    w.line(f"{w.define(op.result)} = {fn}({a}, {b}, {c})")


LANE_EMITTERS: dict[type[Operation], Callable[[LaneWriter, Operation], None]] = {
    affine.ForOp: _for,  # pyright: ignore[reportAssignmentType]
    affine.IfOp: _if,  # pyright: ignore[reportAssignmentType]
    memref.AllocaOp: _alloca,  # pyright: ignore[reportAssignmentType]
    affine.LoadOp: _access,  # pyright: ignore[reportAssignmentType]
    PaddedLoadOp: _access,  # pyright: ignore[reportAssignmentType]
    affine.StoreOp: _access,  # pyright: ignore[reportAssignmentType]
    affine.ApplyOp: _map_op,  # pyright: ignore[reportAssignmentType]
    affine.MinOp: _map_op,  # pyright: ignore[reportAssignmentType]
    affine.MaxOp: _map_op,  # pyright: ignore[reportAssignmentType]
    math.FmaOp: _fma,  # pyright: ignore[reportAssignmentType]
    **{t: _float_binary for t in (*_FLOAT_BINARY, *_FLOAT_HELPERS)},
}
"""The ops written differently for lanes; the others' ordinary emitters serve."""
