"""Shared-memory hazards of a block, found on the IR without running it.

The interpreter finds a data race when it meets one, on the inputs it is given; this
check proves the discipline a block's shared memory must keep for every input, in
one walk of the block's program, so that no kernel that breaks it is emitted:

- every read of shared memory comes after the `nvgpu.device_async_wait` that lands
  the asynchronous copies writing what it reads (a wait leaves the newest
  `numGroups` groups of the thread in flight), and after a `gpu.barrier` that makes
  what another thread wrote or landed visible;
- every write (a store, or an asynchronous copy starting) comes after a barrier that
  retires the reads and writes of the same elements since the last one, and never
  lands on elements a copy still in flight will write;
- no copy is left in flight when the kernel ends.

The walk follows the block as each of its threads runs it: ops that synchronize (a
barrier, a group, a wait) or hold one are *structure* — `affine.for` loops are run
trip by trip with their induction variable known, `affine.if` takes the branch its
condition chooses, a mapped band's body runs once for whichever thread — and
everything else is a *leaf* whose accesses are summarized. An access covers a
region of its buffer: each index that the known values determine (the trip of a
tile loop, the stage `%t mod 4` it computes), or any index (`*`) where a thread id
or a leaf's own loop decides it. Two regions overlap unless some index differs.
Where two accesses overlap with no barrier between (one of them a write), the check
asks which thread touches which element (`thread_overlaps`: who runs each access,
its points under the guards around it) and refuses when one element is touched by
two threads — or when it cannot tell, except within one block-mapped band, whose
iterations are independent by the band's own contract. So what it passes is
race-free for every thread; what it refuses names the two ops and, where it found
one, the element and the two threads. The asynchronous copies' rules look at no
thread: a copy in flight may be touched by none, its own thread included.

    affine.for %t = 0 to 2 {
      ... nvgpu.device_async_copy ... %input_shared[(%t + 1) mod 2, ...]
      %g = nvgpu.device_async_create_group
      nvgpu.device_async_wait %g {numGroups = 1 : i32}   // 3 here: tile %t may still
      gpu.barrier                                        // be in flight below
      ... nvgpu.ldmatrix %input_shared[%t mod 2, ...]
    }

A buffer marked `affinec.overlay` may share its bytes with any other shared buffer,
so its accesses overlap all of theirs. The check covers the levels from the grid
band to the outlined kernel (`gpu.func`) before `lower-affine`; the IR below that
is a mechanical lowering of what was checked.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from xdsl.dialects import memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintKind, AffineMap

from affinec.base.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu, nvvm
from affinec.dialects.affinec import GRID, OVERLAY, mapping_of
from affinec.ir.affine_exprs import Interval, expr_range
from affinec.ir.effects import reads, writes
from affinec.ir.index_sets import Guard, free_roots, index_sets
from affinec.ir.ranges import map_ranges, value_range
from affinec.transforms.gpu.bands import is_shared
from affinec.transforms.gpu.hazard_accesses import (
    access_run,
    guards_between,
    known_point,
    touches_shared,
)
from affinec.transforms.gpu.thread_overlaps import (
    Access,
    Span,
    ThreadOverlaps,
    trip_values,
    varies_by_thread,
)
from affinec.transforms.gpu.warp_specialize_phases import check_specialized_phases
from affinec.transforms.gpu.wgmma_tma_phases import check_phases

SYNC = (gpu.BarrierOp, nvgpu.DeviceAsyncCreateGroupOp, nvgpu.DeviceAsyncWaitOp)

_NOT_FOLLOWED = ("nvgpu.mbarrier.", "nvgpu.tma.", "nvgpu.warpgroup.")
"""Hopper's synchronization and the ops it orders, which the check has no rules for."""

MAX_TRIPS = 1 << 14
"""Iterations of the loops holding barriers, copy groups or waits the check follows
in all: a kernel's reduction steps number tens to hundreds (ResNet-50's 1x1 of 2048
channels in steps of 16: 128); past this the check refuses rather than run for
minutes."""


@dataclass
class _State:
    """What a block has done to its shared memory since its last barrier."""

    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)
    """Stores, and copies landed by a wait, since the last barrier."""
    ungrouped: list[Access] = field(default_factory=list)
    groups: list[list[Access]] = field(default_factory=list)
    last_wait: Operation | None = None

    def copy(self) -> _State:
        return _State(
            list(self.reads),
            list(self.writes),
            list(self.ungrouped),
            [list(g) for g in self.groups],
            self.last_wait,
        )

    def merge(self, other: _State, op: Operation) -> _State:
        """What either of two branches may have left."""
        if len(self.groups) != len(other.groups):
            raise PassError(
                op,
                "its branches leave different numbers of asynchronous-copy groups "
                "in flight: cannot check the shared-memory hazards",
            )
        return _State(
            self.reads + other.reads,
            self.writes + other.writes,
            self.ungrouped + other.ungrouped,
            [a + b for a, b in zip(self.groups, other.groups, strict=True)],
            self.last_wait or other.last_wait,
        )

    def in_flight(self) -> Iterator[Access]:
        yield from self.ungrouped
        for group in self.groups:
            yield from group


_AFTER_EACH_PASS: ContextVar[bool] = ContextVar("hazards_after_each_pass", default=True)


@contextmanager
def hazards_checked_once() -> Iterator[None]:
    """Within: the passes' own hazard checks (`check_after_pass`) are left to the
    one `gpu-kernel-outlining` makes on the kernels (the last structured level),
    as the verifier is left to the end when not run after each pass."""
    token = _AFTER_EACH_PASS.set(False)
    try:
        yield
    finally:
        _AFTER_EACH_PASS.reset(token)


def check_after_pass(root: Operation, *, barriers: bool = True) -> None:
    """A pass's check of its own result (`check_shared_memory_hazards`), unless
    checks are made once (`hazards_checked_once`)."""
    if _AFTER_EACH_PASS.get():
        check_shared_memory_hazards(root, barriers=barriers)


def check_shared_memory_hazards(root: Operation, *, barriers: bool = True) -> None:
    """Refuse, with a `PassError` at the op, the first hazard of every block program
    under `root` (grid bands, `gpu.launch` bodies, kernels). With `barriers=False`
    only the asynchronous copies' waits are checked (before barriers are placed)."""
    for program, overlays in _programs(root):
        _Walk(overlays, barriers, program).run(program.body.block)


def _programs(root: Operation) -> Iterator[tuple[Operation, set[SSAValue]]]:
    for op in root.walk():
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == GRID:
            block = op.body.block
            overlays = {
                a.results[0]
                for a in block.ops
                if isinstance(a, memref.AllocOp | memref.AllocaOp)
                and OVERLAY in a.attributes
            }
            yield op, overlays
        elif isinstance(op, gpu.LaunchOp | gpu.FuncOp):
            region = op.body
            if len(region.blocks) != 1:
                continue  # lowered to branches: checked at the levels above
            block = region.blocks[0]
            workgroup = [a for a in block.args if is_shared(a)]
            marked = op.attributes.get(OVERLAY)
            indices = marked.get_values() if marked is not None else ()  # pyright: ignore
            yield op, {workgroup[i] for i in indices if i < len(workgroup)}


class _Walk:
    def __init__(
        self, overlays: set[SSAValue], barriers: bool, program: Operation
    ) -> None:
        self.overlays = overlays
        self.barriers = barriers
        self.program = program
        self.threads = ThreadOverlaps(program, overlays)
        self.known: dict[SSAValue, int] = {}
        self.ranges: dict[SSAValue, Interval] | None = None
        self.guards: list[Guard] = []
        """The guards around the access being summarized, within its leaf."""
        self.roots: dict[Operation, list[SSAValue] | None] = {}
        self.sets: dict[tuple, list[frozenset[int]] | None] = {}
        """Ranges of values under the known trips (computed as asked)."""
        self.state = _State()
        self.structure: dict[Operation, bool] = {}
        self.leaves: dict[Operation, list[tuple]] = {}
        """Per leaf: each op in it touching shared memory, its guards within the
        leaf, and the shared buffers it reads and writes."""
        self.phase = 0
        self.trips = 0
        """Iterations of structural loops followed so far (at most `MAX_TRIPS`)."""

    def run(self, block: Block) -> None:
        ops = list(block.walk())
        if any(isinstance(o, nvgpu.TmaAsyncLoadOp) for o in ops) and not any(
            o.name.startswith("nvgpu.warpgroup.") for o in ops
        ):  # affinec-tma-copies' stages, proven on the grid's block program (the
            # levels below it move them unchanged); the template's kernel: refused
            if isinstance(self.program, affine.ParallelOp):
                # a warp-specialized block's producer runs ahead of its consumers
                specialized = any(isinstance(o, nvvm.SetMaxRegisterOp) for o in ops)
                check = check_specialized_phases if specialized else check_phases
                check(self.program)
            return
        for op in ops:
            if op.name.startswith(_NOT_FOLLOWED):
                raise PassError(
                    op,
                    "the shared-memory hazard check follows gpu.barrier and cp.async "
                    "groups and waits, not mbarrier phases, TMA copies or wgmma: it "
                    "cannot check this kernel (the interpreter checks such kernels)",
                )
        self.block(block)
        for copy in self.state.in_flight():
            raise PassError(
                copy.op,
                f"the asynchronous copy into {copy.describe()} is still in flight "
                "when the kernel ends: no nvgpu.device_async_wait lands it",
            )

    # -- the program's structure ---------------------------------------------------------

    def is_structure(self, op: Operation) -> bool:
        if op not in self.structure:
            self.structure[op] = any(isinstance(o, SYNC) for o in op.walk())
        return self.structure[op]

    def block(self, block: Block) -> None:
        for op in block.ops:
            if isinstance(op, gpu.BarrierOp):
                self.state.reads.clear()
                self.state.writes.clear()
            elif isinstance(op, nvgpu.DeviceAsyncCreateGroupOp):
                self.state.groups.append(self.state.ungrouped)
                self.state.ungrouped = []
            elif isinstance(op, nvgpu.DeviceAsyncWaitOp):
                while len(self.state.groups) > op.groups:
                    self.state.writes.extend(self.state.groups.pop(0))
                self.state.last_wait = op
            elif not self.is_structure(op):
                self.leaf(op)
            elif isinstance(op, affine.ForOp):
                self.loop(op)
            elif isinstance(op, affine.IfOp):
                self.branch(op)
            elif isinstance(op, affine.ParallelOp) and mapping_of(op) != GRID:
                self.block(op.body.block)  # every thread runs the band's body
            else:
                raise PassError(
                    op,
                    "holds a barrier or an asynchronous-copy group or wait in a way "
                    "the shared-memory hazard check cannot follow",
                )

    def branch(self, op: affine.IfOp) -> None:
        """Take the branch the condition chooses; where only the block's own
        position decides it (a full tile or a partial one), take each in turn and
        go on with what either may have left."""
        taken = self.condition(op)
        regions = [op.then_region, op.else_region]
        if taken is not None:
            region = regions[0] if taken else regions[1]
            if region.blocks:
                self.block(region.block)
            return
        roots = free_roots(list(op.args), [])
        if roots is None or any(varies_by_thread(r) for r in roots):
            raise PassError(
                op,
                "a barrier or an asynchronous-copy group or wait under a condition "
                "the block's threads may not agree on: cannot check the "
                "shared-memory hazards",
            )
        before = self.state
        after = []
        for region in regions:
            self.state = before.copy()
            if region.blocks:
                self.block(region.block)
            after.append(self.state)
        self.state = after[0].merge(after[1], op)

    def loop(self, op: affine.ForOp) -> None:
        lower = self.bound(op.lowerBoundMap.data, op.lowerBoundOperands, max)
        upper = self.bound(op.upperBoundMap.data, op.upperBoundOperands, min)
        if lower is None or upper is None:
            raise PassError(
                op,
                "a loop holding a barrier or an asynchronous-copy group or wait "
                "needs bounds the block's threads agree on (constants, or values of "
                "enclosing such loops): cannot check the shared-memory hazards",
            )
        iv = op.body.block.args[0]
        step = op.step.value.data
        trips = max(0, -(-(upper - lower) // step))  # (len(range) overflows past 2^63)
        self.trips += trips
        if self.trips > MAX_TRIPS:
            raise PassError(
                op,
                f"a loop of {trips:,} iterations holding a barrier or an "
                "asynchronous-copy group or wait: the shared-memory check follows at "
                f"most {MAX_TRIPS:,} such iterations in a kernel",
            )
        for value in range(lower, upper, step):
            self.set_known(iv, value)
            self.block(op.body.block)
        self.set_known(iv, None)

    def set_known(self, iv: SSAValue, value: int | None) -> None:
        if value is None:
            self.known.pop(iv, None)
        else:
            self.known[iv] = value
        self.ranges = None  # what depends on it is computed anew

    # -- values --------------------------------------------------------------------------

    def known_ranges(self) -> dict[SSAValue, Interval]:
        """Ranges of values under the known trips (a cache, filled as asked)."""
        if self.ranges is None:
            self.ranges = {v: (k, k) for v, k in self.known.items()}
        return self.ranges

    def value_range(self, value: SSAValue) -> Interval | None:
        return value_range(value, self.known_ranges())

    def bound(self, m: AffineMap, operands: Sequence[SSAValue], pick) -> int | None:
        """A loop bound (`pick` of `m`'s results) where the threads agree on it."""
        points = [known_point(r) for r in map_ranges(m, operands, self.known_ranges())]
        if not points or any(p is None for p in points):
            return None
        return pick(points)

    def condition(self, op: affine.IfOp) -> bool | None:
        """Whether `op`'s condition holds, where the ranges of its operands decide it."""
        s = op.condition.data
        values = [value_range(v, self.known_ranges()) for v in op.args]
        dims, syms = values[: s.num_dims], values[s.num_dims :]
        holds = True
        for c in s.constraints:
            r = expr_range(c.lhs - c.rhs, dims, syms)
            if r is None:
                holds = None
                continue
            if c.kind == AffineConstraintKind.eq:
                if r[0] > 0 or r[1] < 0:
                    return False
                if r != (0, 0):
                    holds = None
            elif r[1] < 0:
                return False
            elif r[0] < 0:
                holds = None
        return holds

    # -- accesses --------------------------------------------------------------------------

    def leaf(self, op: Operation) -> None:
        self.phase += 1
        if op not in self.leaves:
            self.leaves[op] = [
                (
                    o,
                    guards_between(o, op),
                    [b for b in reads(o) if is_shared(b)],
                    [b for b in writes(o) if is_shared(b)],
                )
                for o in op.walk()
                if touches_shared(o)
            ]
        for inner, guards, read, written in self.leaves[op]:
            if any(self.condition(g) is (not branch) for g, branch in guards):
                continue  # in a branch not taken here
            self.guards = guards
            if isinstance(inner, nvgpu.DeviceAsyncCopyOp):
                run = inner.elements
                a = self.access(inner, inner.dst, inner.dstIndices, run=run)
                self.start_copy(a)
                continue
            # what the op declares it reads and writes (`affinec.ir.effects`)
            for buffer in read:
                self.read(self.touched(inner, buffer))
            for buffer in written:
                self.write(self.touched(inner, buffer))

    def touched(self, op: Operation, buffer: SSAValue) -> Access:
        """The region of `buffer` that `op` touches: through its indices (and map)
        where they index `buffer`, its only buffer; the whole buffer otherwise."""
        indices = getattr(op, "indices", None)
        memrefs = [v for v in op.operands if isinstance(v.type, MemRefType)]
        leading = getattr(op, "leading_indices", None)
        if leading is not None and (lead := leading(buffer)) is not None:
            # an op reading whole tiles its leading indices pick (a pipeline stage)
            t = buffer.type
            assert isinstance(t, MemRefType)
            part = self.access(op, buffer, lead).region if lead else ()
            rest = (None,) * (len(t.get_shape()) - len(lead))
            return Access(op, buffer, (*part, *rest), self.band_of(op))
        if indices is None or memrefs != [buffer]:
            t = buffer.type
            assert isinstance(t, MemRefType)
            region = (None,) * len(t.get_shape())
            return Access(op, buffer, region, self.band_of(op))
        m = op.map.data if isinstance(getattr(op, "map", None), AffineMapAttr) else None
        return self.access(op, buffer, indices, m, run=access_run(op))

    def access(
        self,
        op: Operation,
        buffer: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
        *,
        run: int = 1,
    ) -> Access:
        """The region `op` touches: the values of its indices (through its map) under
        the guards around it, or their ranges where they cannot be enumerated; the
        innermost one `run` elements long (a vector, a copy, a row of ldmatrix)."""
        if op not in self.roots:
            self.roots[op] = free_roots(indices, self.guards)
        roots = self.roots[op]
        region: list[Span] | None = None
        if roots is not None:
            key = (op, trip_values(roots, self.known, self.known_ranges()))
            if key not in self.sets:
                self.sets[key] = index_sets(
                    indices, m, self.guards, roots, self.known, self.known_ranges()
                )
            sets = self.sets[key]
            if sets is not None:
                region = list(sets)
                if region and run > 1:
                    region[-1] = frozenset(x + k for x in sets[-1] for k in range(run))
        if region is None:
            if m is None:
                region = [value_range(v, self.known_ranges()) for v in indices]
            else:
                region = list(map_ranges(m, indices, self.known_ranges()))
            last = region[-1] if region else None
            if last is not None and run > 1:
                assert isinstance(last, tuple)
                region[-1] = (last[0], last[1] + run - 1)
        points = self.threads.points_of(
            op,
            buffer,
            indices,
            m,
            run,
            roots,
            self.guards,
            self.known,
            self.known_ranges(),
        )
        return Access(op, buffer, tuple(region), self.band_of(op), points)

    # -- who touches what ----------------------------------------------------------------

    def band_of(self, op: Operation) -> tuple[int, Operation] | None:
        _, band = self.threads.who(op)
        return None if band is None else (self.phase, band)

    def read(self, a: Access) -> None:
        for copy in self.state.in_flight():
            if a.overlaps(copy, self.overlays):
                raise PassError(
                    a.op,
                    f"reads {a.describe()}{self.where()}, which the asynchronous copy into "
                    f"{copy.describe()} may still be writing: {self.unlanded(copy)} "
                    f"(the copy: {_quote(copy.op)})",
                )
        if self.barriers:
            for w in self.state.writes:
                found = self.threads.race(w, a)
                if found is not None:
                    raise PassError(
                        a.op,
                        f"reads {a.describe()}{self.where()}, which {_quote(w.op)} wrote into "
                        f"{w.describe()} with no gpu.barrier between: other threads' "
                        f"writes may not be visible yet{found.text('writes', 'reads')}",
                    )
        self.state.reads.append(a)

    def where(self) -> str:
        """The trips of the enclosing loops, as `(at %t = 3)`."""
        trips = [
            f"%{v.name_hint or '?'} = {k}"
            for v, k in self.known.items()
            if v.owner is not None
        ]
        return f" (at {', '.join(trips)})" if trips else ""

    def unlanded(self, copy: Access) -> str:
        """Why `copy` is still in flight."""
        state = self.state
        if copy in state.ungrouped:
            return (
                "it is in no nvgpu.device_async_create_group yet, so no wait lands it"
            )
        if state.last_wait is None:
            return "no nvgpu.device_async_wait has landed it"
        newer = next(
            len(state.groups) - k - 1 for k, g in enumerate(state.groups) if copy in g
        )
        return (
            f"the last wait, {_quote(state.last_wait)}, leaves its group in flight "
            f"with {newer} newer one{'s' * (newer != 1)}"
        )

    def write(self, a: Access) -> None:
        self.overwrite(a, "writes")
        self.state.writes.append(a)

    def start_copy(self, a: Access) -> None:
        self.overwrite(a, "starts an asynchronous copy into", copy=True)
        self.state.ungrouped.append(a)

    def overwrite(self, a: Access, what: str, *, copy: bool = False) -> None:
        for flight in self.state.in_flight():
            if a.overlaps(flight, self.overlays):
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()}, which the asynchronous copy into "
                    f"{flight.describe()} may still be writing "
                    f"(the copy: {_quote(flight.op)})",
                )
        if copy:
            # Two points of one copy on one element: the second lands on a copy in
            # flight, whichever thread starts it.
            found = self.threads.race(a, a, twice=True)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} more than once while the "
                    f"first copy may still be in flight{found.text('copies', 'copies')}",
                )
        if not self.barriers:
            return
        for r in self.state.reads:
            found = self.threads.race(r, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} while {_quote(r.op)} may still be "
                    f"reading {r.describe()}: no gpu.barrier since that read"
                    f"{found.text('reads', 'writes')}",
                )
        for w in self.state.writes:
            found = self.threads.race(w, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()}, which {_quote(w.op)} wrote into "
                    f"{w.describe()} with no gpu.barrier between"
                    f"{found.text('writes', 'writes')}",
                )
        if not copy:
            found = self.threads.race(a, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} from more than one thread "
                    f"with no gpu.barrier between{found.text('writes', 'writes')}",
                )


def _quote(op: Operation) -> str:
    text = str(op).split("\n")[0].strip()
    return f"'{text[:117]}...'" if len(text) > 120 else f"'{text}'"
