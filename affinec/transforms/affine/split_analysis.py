"""How a block loop would split, and why it could not (read-only): `plan_split`,
`split_blocker`."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    MemRefType,
)
from xdsl.ir import Operation, SSAValue

from affinec.dialects import affine
from affinec.transforms.affine.analysis import (
    AccessOp,
    body_ops,
    sink_blocker,
    value_range,
)


@dataclass(frozen=True)
class SplitPlan:
    """How one block loop splits: its accumulators (allocations to expand), its
    phases (the top-level ops of each new loop, by name; empty phases are left out)
    and its extent along each dimension (the expanded buffer's leading shape)."""

    accumulators: tuple[memref.AllocaOp | memref.AllocOp, ...]
    phases: tuple[tuple[str, tuple[Operation, ...]], ...]
    extents: tuple[int | None, ...]


def plan_split(op: affine.ParallelOp) -> SplitPlan | None:
    """How `split_parallel` would split a block loop, or None when there is nothing
    to split (no reduction loop, or no scalar accumulator allocated before it)."""
    ops = body_ops(op.body.block)
    loops = [k for k, o in enumerate(ops) if isinstance(o, affine.ForOp)]
    if not loops:
        return None
    first, last = loops[0], loops[-1]
    accumulators = tuple(
        o for o in ops[:first] if isinstance(o, memref.AllocaOp | memref.AllocOp)
    )
    if not accumulators:
        return None
    phases = (
        ("initialization", tuple(o for o in ops[:first] if o not in accumulators)),
        ("reduction", tuple(ops[first : last + 1])),
        ("write-back", tuple(ops[last + 1 :])),
    )
    extents = []
    for iv in op.induction_variables:
        r = value_range(iv)
        extents.append(None if r is None or r[0] != 0 else r[1] + 1)
    return SplitPlan(accumulators, tuple(p for p in phases if p[1]), tuple(extents))


def split_blocker(op: affine.ParallelOp, plan: SplitPlan) -> str | None:
    """Why `split_parallel` cannot split `op` as planned, or None."""
    if None in plan.extents:
        return "its extent along some dimension is not bounded by a constant"
    for acc in plan.accumulators:
        t = acc.memref.type
        name = f"%{acc.memref.name_hint}" if acc.memref.name_hint else "an accumulator"
        if (
            not isinstance(t, MemRefType)
            or acc.dynamic_sizes
            or any(d < 0 for d in t.get_shape())
        ):
            return f"{name} does not have a static shape"
        for use in acc.memref.uses:
            user = use.operation
            if not isinstance(user, AccessOp) or (
                isinstance(user, affine.StoreOp) and use.index == 0
            ):
                return (
                    f"{name} is used by '{user.name}', not only affine loads and stores"
                )
    defined_in: dict[SSAValue, str] = {}
    for name, phase in plan.phases:
        for root in phase:
            for inner in root.walk():
                defined_in.update((r, name) for r in inner.results)
                for region in inner.regions:
                    for block in region.blocks:
                        defined_in.update((a, name) for a in block.args)
    for name, phase in plan.phases:
        for root in phase:
            for inner in root.walk():
                for v in inner.operands:
                    if defined_in.get(v, name) != name:
                        what = f"%{v.name_hint}" if v.name_hint else "a value"
                        return (
                            f"{what} is computed in the {defined_in[v]} part and used "
                            f"in the {name} part"
                        )
    return sink_blocker(op)
