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

from xdsl.dialects import scf
from xdsl.ir import Operation

from affinec.base.diagnostics import PassError
from affinec.dialects import affine
from affinec.dialects.affinec import UNROLL
from affinec.transforms.affine.analysis import constant_index
from affinec.transforms.affine.mlir_tile_bands import constant_trip_count

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
    """The trip count of an `affine.for` or `scf.for` when it is a constant."""
    if isinstance(op, affine.ForOp):
        return constant_trip_count(op)
    if not isinstance(op, scf.ForOp):
        return None
    low, high, step = (constant_index(v) for v in (op.lb, op.ub, op.step))
    if low is None or high is None or step is None or step <= 0:
        return None
    return max(0, -(-(high - low) // step))
