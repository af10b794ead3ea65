"""How much code a module's full-unroll hints ask for.

A loop marked `{affinec.unroll}` reaches LLVM as `llvm.loop.unroll.full`, which
LLVM honours whatever the trip count: a tap loop of 65,536 iterations inside two
other unrolled loops is 196,608 copies of an MMA body, and LLVM's optimisation then
runs for hours. The passes that lower loops refuse such a hint before LLVM sees
it: the copies of a marked loop's body are its trip count times those of the
marked loops around it. The passes themselves mark at most a few hundred (448 over
1,540 configurations of the benchmark convolutions and three networks' layers), so
the limit leaves ample room.
"""

from __future__ import annotations

from xdsl.dialects import arith, scf
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Operation, SSAValue

from affinec.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import UNROLL

MAX_UNROLLED_COPIES = 4096
"""The most copies of a loop body the full-unroll hints may ask for."""


def check_unrolling(module: Operation) -> None:
    """Refuse a `{affinec.unroll}` loop whose body, with the marked loops around
    it, would be copied more than `MAX_UNROLLED_COPIES` times."""
    for op in module.walk():
        if not _marked(op):
            continue
        copies = 1
        around: Operation | None = op
        while around is not None:
            if _marked(around):
                copies *= max(trip_count(around) or 1, 1)
            around = around.parent_op()
        if copies > MAX_UNROLLED_COPIES:
            raise PassError(
                op,
                f"{{{UNROLL}}} asks for {copies:,} copies of this loop's body (its "
                f"trip count times those of the unrolled loops around it); at most "
                f"{MAX_UNROLLED_COPIES:,}: unroll less",
            )


def _marked(op: Operation) -> bool:
    return UNROLL in op.attributes and isinstance(op, affine.ForOp | scf.ForOp)


def trip_count(op: Operation) -> int | None:
    """The trip count of an `affine.for` or `scf.for` with constant bounds and
    step, else None."""
    if isinstance(op, affine.ForOp):
        lower, upper = op.lowerBoundMap.data, op.upperBoundMap.data
        if lower.num_dims + lower.num_symbols or upper.num_dims + upper.num_symbols:
            return None
        if len(lower.results) != 1 or len(upper.results) != 1:
            return None
        low, high = lower.results[0].eval([], []), upper.results[0].eval([], [])
        step = op.step.value.data
    elif isinstance(op, scf.ForOp):
        bounds = [_constant(v) for v in (op.lb, op.ub, op.step)]
        if None in bounds:
            return None
        low, high, step = bounds  # pyright: ignore[reportAssignmentType]
    else:
        return None
    if step <= 0:  # pyright: ignore[reportOptionalOperand]
        return None
    return max(0, -(-(high - low) // step))  # pyright: ignore[reportOperatorIssue]


def _constant(value: SSAValue) -> int | None:
    owner = value.owner
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    return None
