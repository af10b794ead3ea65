"""The mbarrier discipline of a warp-specialized block (`check_specialized_phases`),
proven on the IR by running its threads concurrently: the producer's thread ahead of
the consumers as far as its waits let it, and the other way round.

`wgmma_tma_phases` walks a block whose threads all run one program in step, as its
thread 0. A specialized block's producer and consumers run different programs at
their own pace, so each simulated thread (the first of each warp: the guards elect
a warpgroup's or the block's first thread) runs its own walk of the block program,
suspending at a wait until the phase it waits for completes. Each barrier counts
its completed phases and the arrivals of the current one; each thread, the phases
of each barrier it has seen complete. Refused, located:

- a wait on a parity other than that of the next phase the thread has not seen (a
  wait on the other parity passes at once, on a phase already over), or on a
  barrier two phases past it (parity cannot tell them apart);
- a load onto a stage whose release for its previous load the loading thread has
  not seen (a barrier of another group, same index, that arrivals alone complete);
- a release of a stage by a thread that has not seen the load it hands back, or two
  arrivals of one thread in one phase;
- a wait nothing can end (every thread stuck), a phase short of arrivals at the end,
  a load no wait sees;
- a loop, condition or index the walk cannot follow.
"""

from __future__ import annotations

from collections.abc import Iterator

from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr
from xdsl.ir import Block, Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import THREAD, mapping_of
from affinec.transforms.gpu.wgmma_tma_copies import evaluate, holds
from affinec.transforms.gpu.wgmma_tma_phases import PHASE_OPS, phase_ancestors

_UNKNOWN = (
    "the barrier's phases depend on values the check cannot follow (such as the "
    "block's place in the grid)"
)

_Key = tuple[SSAValue, int]


class _Barrier:
    __slots__ = ("arrivals", "arrivers", "count", "done", "last", "loaded")

    def __init__(self, count: int, op: Operation) -> None:
        self.count = count
        self.arrivals = 0
        self.arrivers: set[int] = set()
        self.done = 0
        """Phases completed."""
        self.loaded = False
        """Its phases complete on loads (`arrive.expect_tx`), not arrivals alone."""
        self.last = op


def check_specialized_phases(grid: affine.ParallelOp) -> None:
    """Refuse, located, the first break of the discipline (see the module) in
    `grid`'s block program, the producer's thread run first, then the consumers'."""
    for producer_first in (True, False):
        _Run(grid, producer_first).run()


class _Run:
    def __init__(self, grid: affine.ParallelOp, producer_first: bool) -> None:
        self.grid = grid
        self.producer_first = producer_first
        self.barriers: dict[_Key, _Barrier] = {}
        self.seen: dict[tuple[int, _Key], int] = {}
        self.events = 0
        self.passed: dict[int, int] = {}
        self.reached: dict[int, int] = {}
        self.simulated = 0
        self.relevant = phase_ancestors(grid)

    def run(self) -> None:
        body = self.grid.body.block
        threads = self._threads(body)
        order = list(range(0, threads, 32))
        if self.producer_first:
            order.reverse()
        self.simulated = len(order)
        walks: dict[int, Iterator[Operation]] = {
            t: self.block(body, {}, t) for t in order
        }
        waiting: dict[int, Operation] = {}
        while walks:
            before = self.events
            for t in list(walks):
                try:
                    waiting[t] = next(walks[t])
                except StopIteration:
                    del walks[t]
                    waiting.pop(t, None)
            if walks and self.events == before:
                t, op = next(iter(waiting.items()))
                raise PassError(
                    op,
                    f"thread {t} waits for a phase nothing completes (every thread "
                    "of the block is stuck)",
                )
        for (group, index), b in self.barriers.items():
            if b.arrivals:
                raise PassError(
                    b.last,
                    f"a phase of barrier {index} gets {b.arrivals} of its {b.count} "
                    "arrivals: it never completes",
                )
            seen = max(
                (n for (_, key), n in self.seen.items() if key == (group, index)),
                default=0,
            )
            if b.loaded and seen < b.done:
                raise PassError(
                    b.last, "a load no wait sees: the block ends with it in flight"
                )

    def _threads(self, body: Block) -> int:
        sizes = [
            o.upperBoundsMap.data.results[0].eval([], [])
            for o in body.ops
            if isinstance(o, affine.ParallelOp) and mapping_of(o) == THREAD
        ]
        if not sizes:
            raise PassError(self.grid, _UNKNOWN)
        return max(sizes)

    def block(
        self, block: Block, env: dict[SSAValue, int], t: int
    ) -> Iterator[Operation]:
        for op in block.ops:
            if isinstance(op, PHASE_OPS):
                yield from self.phase(op, env, t)
            elif isinstance(op, gpu.BarrierOp):
                yield from self.meet(op, t)
            elif op in self.relevant:
                yield from self.structure(op, env, t)

    def structure(
        self, op: Operation, env: dict[SSAValue, int], t: int
    ) -> Iterator[Operation]:
        if isinstance(op, affine.ForOp):
            lo_ops, up_ops = list(op.lowerBoundOperands), list(op.upperBoundOperands)
            lo = max(self._map(op.lowerBoundMap.data, lo_ops, env, op))
            hi = min(self._map(op.upperBoundMap.data, up_ops, env, op))
            iv = op.body.block.args[0]
            for trip in range(lo, hi, op.step.value.data):
                env[iv] = trip
                yield from self.block(op.body.block, env, t)
            env.pop(iv, None)
        elif isinstance(op, affine.IfOp):
            if holds(op, env, op, _UNKNOWN):
                yield from self.block(op.then_region.block, env, t)
            elif op.else_region.blocks:
                yield from self.block(op.else_region.block, env, t)
        elif isinstance(op, affine.ParallelOp) and mapping_of(op) == THREAD:
            (iv,) = op.body.block.args
            if t < op.upperBoundsMap.data.results[0].eval([], []):
                env[iv] = t
                yield from self.block(op.body.block, env, t)
        else:
            raise PassError(op, _UNKNOWN)

    def meet(self, op: gpu.BarrierOp, t: int) -> Iterator[Operation]:
        """A `gpu.barrier`: every simulated thread reaches it before any goes on."""
        n = self.passed.get(t, 0)
        self.passed[t] = n + 1
        self.reached[n] = self.reached.get(n, 0) + 1
        self.events += 1
        while self.reached[n] < self.simulated:
            yield op

    def _map(self, m, operands, env, at) -> tuple[int, ...]:
        values = [evaluate(v, env, at, _UNKNOWN) for v in operands]
        return m.eval(values[: m.num_dims], values[m.num_dims :])

    def barrier(self, op: Operation, group: SSAValue, index: SSAValue, env) -> _Key:
        key = (group, evaluate(index, env, op, _UNKNOWN))
        if key not in self.barriers:
            raise PassError(op, "uses a barrier no thread initialized before")
        return key

    def phase(
        self, op: Operation, env: dict[SSAValue, int], t: int
    ) -> Iterator[Operation]:
        if isinstance(op, nvgpu.MBarrierInitOp):
            key = (op.barriers, evaluate(op.mbarId, env, op, _UNKNOWN))
            self.barriers[key] = _Barrier(evaluate(op.count, env, op, _UNKNOWN), op)
            return
        if isinstance(op, nvgpu.MBarrierArriveExpectTxOp):
            key = self.barrier(op, op.barriers, op.mbarId, env)
            b = self.barriers[key]
            if b.done and not b.arrivals and not self._handed_back(key, b, t):
                raise PassError(
                    op,
                    "loads onto a stage no wait has seen handed back since its last "
                    "load (a warpgroup may still read it)",
                )
            b.loaded = True
            self._arrive(b, op, t)
            return
        if isinstance(op, nvgpu.MBarrierArriveOp):
            key = self.barrier(op, op.barriers, op.mbarId, env)
            b = self.barriers[key]
            if t in b.arrivers:
                raise PassError(op, f"thread {t} arrives twice on one phase")
            if not b.loaded and not self._read(key, b, t):
                raise PassError(
                    op,
                    f"thread {t} hands back a stage's use {b.done} before it has "
                    "seen that load complete",
                )
            self._arrive(b, op, t)
            return
        assert isinstance(op, nvgpu.MBarrierTryWaitParityOp)
        key = self.barrier(op, op.barriers, op.mbarId, env)
        b = self.barriers[key]
        k = self.seen.get((t, key), 0)
        parity = self._parity(op, env)
        if parity != k % 2:  # phase k - 1 again: it must be the barrier's last
            if k == 0 or b.done != k:
                raise PassError(
                    op,
                    f"waits on parity {parity}: thread {t} has seen {k} phases of the "
                    f"barrier, which has completed {b.done} (the wait passes on a "
                    "phase already over, or waits for one it did not mean)",
                )
            return
        while b.done <= k:
            yield op
        if b.done > k + 1:
            raise PassError(
                op,
                f"thread {t} waits for phase {k} of a barrier already {b.done - k} "
                "phases past it: parity cannot tell them apart",
            )
        self.seen[(t, key)] = k + 1

    def _arrive(self, b: _Barrier, op: Operation, t: int) -> None:
        b.arrivals += 1
        b.arrivers.add(t)
        b.last = op
        self.events += 1
        if b.arrivals == b.count:
            b.arrivals = 0
            b.arrivers.clear()
            b.done += 1

    def _handed_back(self, key: _Key, b: _Barrier, t: int) -> bool:
        """Whether thread `t` has seen the stage of `key` handed back once per load
        it held (on a barrier of another group, of the same index, that arrivals
        alone complete)."""
        return any(
            other_key[1] == key[1]
            and other_key[0] is not key[0]
            and not other.loaded
            and self.seen.get((t, other_key), 0) >= b.done
            for other_key, other in self.barriers.items()
        )

    def _read(self, key: _Key, b: _Barrier, t: int) -> bool:
        """Whether thread `t` has seen the load its arrival on `key` (a release)
        hands back: phase `b.done` of a loaded barrier of the same index."""
        return any(
            other_key[1] == key[1]
            and other.loaded
            and self.seen.get((t, other_key), 0) > b.done
            for other_key, other in self.barriers.items()
        )

    def _parity(self, op: nvgpu.MBarrierTryWaitParityOp, env) -> int:
        owner = op.phaseParity.owner
        if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
            return int(bool(owner.value.value.data))
        if isinstance(owner, arith.CmpiOp) and owner.predicate.value.data in (0, 1):
            equal = evaluate(owner.lhs, env, op, _UNKNOWN) == evaluate(
                owner.rhs, env, op, _UNKNOWN
            )
            return int(equal if owner.predicate.value.data == 0 else not equal)
        raise PassError(op, _UNKNOWN)


__all__ = ["check_specialized_phases"]
