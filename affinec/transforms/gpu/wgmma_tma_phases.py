"""The mbarrier discipline of a block whose stages TMA loads (`check_phases`),
proven on the IR by running the block's program trip by trip as its thread 0.

Each stage's barrier takes one arrival per tile (`arrive.expect_tx`, the tile's
bytes) for each load of the stage, and each `warpgroup_mma` step waits on it
(`try_wait.parity`) before reading it. The walk counts, per stage, the loads
whose arrivals are complete, and refuses:

- a wait on a stage with no load, or on a parity other than its last load's
  (`(loads - 1) mod 2`: a wait on the other parity passes at once on a phase
  already over, or waits on the next, which nothing completes);
- a load onto a stage whose last load no wait has seen (its tiles overwritten
  before they were read, its phase's arrivals mixed with the next's), or which
  the loading thread has not seen handed back (a wait on the stage's barrier of
  another group, completed by the consumers' arrivals alone, once per load the
  stage held);
- a load no wait sees before the block ends;
- a loop, condition or index the walk cannot follow (it depends on the block's
  position in the grid, or on values it does not know).

What each thread reads and when the data lands is the interpreter's to check on
any given input; this walk proves the phases for every input.
"""

from __future__ import annotations

import itertools

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, nvgpu
from affinec.transforms.gpu.wgmma_tma_copies import evaluate, holds

PHASE_OPS = (
    nvgpu.MBarrierInitOp,
    nvgpu.MBarrierArriveExpectTxOp,
    nvgpu.MBarrierArriveOp,
    nvgpu.MBarrierTryWaitParityOp,
)


def phase_ancestors(grid: Operation) -> set[Operation]:
    """The ops of `grid` (below it) that hold an mbarrier op: the structure a walk of
    the block's phases must enter; the rest it may skip."""
    found: set[Operation] = set()
    for op in grid.walk():
        if isinstance(op, PHASE_OPS):
            parent = op.parent_op()
            while parent is not None and parent is not grid:
                found.add(parent)
                parent = parent.parent_op()
    return found


_UNKNOWN = (
    "the barrier's phases depend on values the check cannot follow (such as the "
    "block's place in the grid, with full and partial tiles separated): keep the "
    "cp.async copies there (KernelConfig(tma=False), no --tma)"
)


class _Stage:
    __slots__ = ("arrivals", "count", "loads", "seen", "last", "loaded", "waited")

    def __init__(self, count: int) -> None:
        self.count = count
        self.arrivals = 0
        self.loads = 0
        """Phases completed."""
        self.seen = True
        self.last: Operation | None = None
        self.waited = 0
        """Phases the walking thread has seen complete (by its waits)."""
        self.loaded = False
        """Its phases complete on loads (`arrive.expect_tx`), not on arrivals alone
        (a stage handed back)."""


def check_phases(grid: Operation) -> None:
    """Refuse, located, the first break of the discipline (see the module) in
    `grid`'s block program."""
    walk = _Walk(grid)
    walk.block(grid.regions[0].block)
    for stage in walk.stages.values():
        if stage.arrivals:
            raise PassError(
                stage.last,
                f"a stage's phase gets {stage.arrivals} of its {stage.count} "
                "arrivals: its loads never complete",
            )
        if stage.loaded and not stage.seen:
            raise PassError(
                stage.last, "a load no wait sees: the block ends with it in flight"
            )


class _Walk:
    def __init__(self, grid: Operation) -> None:
        self.env: dict[SSAValue, int] = {}
        self.stages: dict[tuple[SSAValue, int], _Stage] = {}
        self.relevant = phase_ancestors(grid)

    def value(self, v: SSAValue, at: Operation) -> int:
        return evaluate(v, self.env, at, _UNKNOWN)

    def block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, PHASE_OPS):
                self.phase_op(op)
            elif op in self.relevant:
                self.structure(op)

    def structure(self, op: Operation) -> None:
        if isinstance(op, affine.ForOp):
            lower, upper = op.lowerBoundMap.data, op.upperBoundMap.data
            lo_ops = list(op.lowerBoundOperands)
            up_ops = list(op.upperBoundOperands)
            lo = max(self._map(lower, lo_ops, op))
            hi = min(self._map(upper, up_ops, op))
            iv = op.body.block.args[0]
            for trip in range(lo, hi, op.step.value.data):
                self.env[iv] = trip
                self.block(op.body.block)
            self.env.pop(iv, None)
        elif isinstance(op, affine.IfOp):
            if holds(op, self.env, op, _UNKNOWN):
                self.block(op.then_region.block)
            elif op.else_region.blocks:
                self.block(op.else_region.block)
        elif isinstance(op, affine.ParallelOp):
            # a band: thread 0's iteration (the loads are its own), or every
            # thread's where threads arrive (each arrival counts)
            ivs = op.body.block.args
            extents = [1] * len(ivs)
            if any(isinstance(o, nvgpu.MBarrierArriveOp) for o in op.walk()):
                m = op.upperBoundsMap.data
                extents = [e.eval([], []) for e in m.results if not e.used_dims()]
                if len(extents) != len(ivs) or op.lowerBoundsMap.data.results != tuple(
                    AffineExpr.constant(0) for _ in ivs
                ):
                    raise PassError(op, _UNKNOWN)
            for point in itertools.product(*(range(n) for n in extents)):
                self.env.update(zip(ivs, point, strict=True))
                self.block(op.body.block)
        else:
            raise PassError(op, _UNKNOWN)

    def _map(self, m, operands: list[SSAValue], at: Operation) -> tuple[int, ...]:
        values = [self.value(v, at) for v in operands]
        return m.eval(values[: m.num_dims], values[m.num_dims :])

    def stage(self, op: Operation, group: SSAValue, index: SSAValue) -> _Stage:
        key = (group, self.value(index, op))
        if key not in self.stages:
            raise PassError(op, "uses a barrier no thread initialized before")
        return self.stages[key]

    def phase_op(self, op: Operation) -> None:
        if isinstance(op, nvgpu.MBarrierInitOp):
            key = (op.barriers, self.value(op.mbarId, op))
            self.stages[key] = _Stage(self.value(op.count, op))
            return
        if isinstance(op, nvgpu.MBarrierArriveExpectTxOp):
            s = self.stage(op, op.barriers, op.mbarId)
            if s.loads and not s.arrivals and not self.handed_back(op, s):
                raise PassError(
                    op,
                    "loads onto a stage no wait has seen handed back since its last "
                    "load (a warpgroup may still read it)",
                )
            if not s.seen:
                raise PassError(
                    op,
                    "loads onto a stage whose last load no wait has seen (its tiles "
                    "not yet read)",
                )
            s.arrivals += 1
            s.last = op
            s.loaded = True
            if s.arrivals == s.count:
                s.arrivals = 0
                s.loads += 1
                s.seen = False
            return
        if isinstance(op, nvgpu.MBarrierArriveOp):
            s = self.stage(op, op.barriers, op.mbarId)
            s.arrivals += 1
            s.last = op
            if s.arrivals == s.count:
                s.arrivals = 0
                s.loads += 1
            return
        assert isinstance(op, nvgpu.MBarrierTryWaitParityOp)
        s = self.stage(op, op.barriers, op.mbarId)
        parity = self._parity(op)
        if s.loads == 0 or s.arrivals:
            raise PassError(op, "waits on a stage whose load has not been issued")
        if parity != (s.loads - 1) % 2:
            raise PassError(
                op,
                f"waits on parity {parity}, the stage's load {s.loads - 1} completes "
                f"the phase of parity {(s.loads - 1) % 2}",
            )
        s.seen = True
        s.waited = s.loads

    def handed_back(self, op: nvgpu.MBarrierArriveExpectTxOp, s: _Stage) -> bool:
        """Whether the loading thread has seen the stage of `op` handed back once
        per load it held (on a barrier of another group, of the same index, that
        arrivals alone complete)."""
        index = self.value(op.mbarId, op)
        return any(
            i == index and group is not op.barriers and not other.loaded
            and other.waited >= s.loads
            for (group, i), other in self.stages.items()
        )  # fmt: skip

    def _parity(self, op: nvgpu.MBarrierTryWaitParityOp) -> int:
        v = op.phaseParity
        owner = v.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return int(bool(owner.value.value.data))
        if isinstance(owner, arith.CmpiOp) and owner.predicate.value.data in (0, 1):
            lhs = self.value(owner.lhs, op)
            rhs = self.value(owner.rhs, op)
            equal = lhs == rhs
            return int(equal if owner.predicate.value.data == 0 else not equal)
        raise PassError(op, _UNKNOWN)


__all__ = ["PHASE_OPS", "check_phases", "phase_ancestors"]
