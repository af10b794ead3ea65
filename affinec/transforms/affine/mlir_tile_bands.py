"""The bands MLIR's `affine-loop-tile` tiles, and what the rest of its model reads
off them: which perfect `affine.for` nests are bands (`tileable_bands`), which MLIR
skips (`mlir_skips`), their trip counts and trip counts' divisors as MLIR computes
them, the memory accesses inside a band, and `TilingRefused`, raised where affinec
cannot reproduce MLIR's decision.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.dialects import func
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.ir.affine import (
    AffineConstantExpr,
    AffineExpr,
    AffineMap,
)

from affinec.base.semi_affine import largest_known_divisor
from affinec.dialects import affine
from affinec.dialects.affinec import PaddedLoadOp
from affinec.transforms.affine.analysis import (
    compose_map,
    is_defined_inside,
    map_slots,
)
from affinec.transforms.affine.rewriting import joint_maps

_UINT64_MAX = 2**64 - 1


class TilingRefused(Exception):
    """A band affinec cannot tile the way MLIR would; `op` is where, `reason` why."""

    def __init__(self, op: Operation, reason: str) -> None:
        super().__init__(reason)
        self.op = op
        self.reason = reason


# -- bands ------------------------------------------------------------------------------


def perfect_nest(root: affine.ForOp) -> list[affine.ForOp]:
    """`root` and the loops nested in it, each the only op of its parent's body."""
    band = [root]
    while True:
        ops = [o for o in band[-1].body.block.ops if not isinstance(o, affine.YieldOp)]
        if len(ops) != 1 or not isinstance(ops[0], affine.ForOp):
            return band
        band.append(ops[0])


def tileable_bands(module: ModuleOp) -> list[list[affine.ForOp]]:
    """The perfect nest of every `affine.for` directly in a function body."""
    bands = []
    for f in module.walk():
        if isinstance(f, func.FuncOp) and f.body.blocks:
            for op in f.body.block.ops:
                if isinstance(op, affine.ForOp):
                    bands.append(perfect_nest(op))
    return bands


def mlir_skips(band: Sequence[affine.ForOp]) -> bool:
    """Whether MLIR leaves the band untiled without a word: a loop that yields
    values, or one whose bounds use another loop of the band (not a box)."""
    for loop in band:
        if loop.results:
            return True
        bounds = (*loop.lowerBoundOperands, *loop.upperBoundOperands)
        if any(is_defined_inside(v, band[0]) for v in bounds):
            return True
    return False


# -- trip counts ------------------------------------------------------------------------


def trip_count_exprs(loop: affine.ForOp) -> tuple[list[AffineExpr], int, int] | None:
    """`(upper - lower) ceildiv step` per upper bound result, simplified, with the
    number of dims and symbols of its operand space; None when the lower bound has
    several results (MLIR's `getTripCountMapAndOperands`)."""
    lower, upper = map_slots(loop)
    if len(lower.map.results) != 1:
        return None
    (lo_results, hi_results), num_dims, num_syms, operands = joint_maps(
        [(lower.map, lower.operands), (upper.map, upper.operands)]
    )
    step = loop.step.value.data
    exprs = []
    for hi in hi_results:
        m, _ = compose_map(
            AffineMap(num_dims, num_syms, ((hi - lo_results[0]).ceil_div(step),)),
            operands,
        )
        exprs.append(m.results[0])
    return exprs, num_dims, num_syms


def constant_trip_count(loop: affine.ForOp) -> int | None:
    """The loop's trip count when it is a constant (MLIR's `getConstantTripCount`)."""
    counts = trip_count_exprs(loop)
    if counts is None:
        return None
    values = [e.value for e in counts[0] if isinstance(e, AffineConstantExpr)]
    if len(values) != len(counts[0]):
        return None
    return max(0, min(values))


def largest_divisor_of_trip_count(loop: affine.ForOp) -> int:
    """MLIR's `getLargestDivisorOfTripCount` (a zero trip count divides by all)."""
    counts = trip_count_exprs(loop)
    if counts is None:
        return 1
    divisor = 0
    for e in counts[0]:
        if isinstance(e, AffineConstantExpr):
            d = _UINT64_MAX if e.value <= 0 else e.value
        else:
            d = largest_known_divisor(e)
        divisor = math.gcd(divisor, d)
    return divisor


# -- accesses ---------------------------------------------------------------------------

ACCESSES = (
    affine.LoadOp,
    affine.StoreOp,
    affine.VectorLoadOp,
    affine.VectorStoreOp,
    PaddedLoadOp,
)
"""The ops that read or write a memref, as the dependence test and the footprint
see them."""


def enclosing_loops(op: Operation, root: affine.ForOp) -> list[affine.ForOp]:
    """The `affine.for` loops around `op` up to `root`, outermost first."""
    loops = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ForOp):
            loops.insert(0, parent)
        if parent is root:
            return loops
        parent = parent.parent_op()
    return loops
