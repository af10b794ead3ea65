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
asks which thread touches which element: it enumerates each access's points (its
thread's id, and the leaf's loops, under the guards around it) and refuses when one
element is touched by two threads — or when it cannot tell (too many points, indices
it cannot follow), except within one block-mapped band, whose iterations are
independent by the band's own contract (the interpreter runs them on one thread).
Who runs an access: a thread band's iteration is its thread (the thread's linear id,
as the interpreter numbers them); code of a launch or a kernel runs on every thread
of the block, the thread ids its variables; code of a grid band outside its bands
runs on every thread of a band mapped to threads, on the block as one program
before. So what it passes is race-free for every thread; what it refuses names the
two ops and, where it found one, the element and the two threads. The asynchronous
copies' rules look at no thread: a copy in flight may be touched by none, its own
thread included.

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

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import AffineMapAttr, MemRefType, VectorType
from xdsl.ir import Block, BlockArgument, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintKind, AffineMap

from affinec.base.diagnostics import PassError
from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import BLOCK, GRID, OVERLAY, THREAD, mapping_of
from affinec.ir.affine_exprs import Interval, expr_range
from affinec.ir.effects import reads, writes
from affinec.ir.index_sets import Axis, Guard, free_roots, index_points, index_sets
from affinec.ir.ranges import map_ranges, value_range
from affinec.transforms.gpu.bands import is_shared

SYNC = (gpu.BarrierOp, nvgpu.DeviceAsyncCreateGroupOp, nvgpu.DeviceAsyncWaitOp)

_NOT_FOLLOWED = ("nvgpu.mbarrier.", "nvgpu.tma.", "nvgpu.warpgroup.")
"""Hopper's synchronization and the ops it orders, which the check has no rules for."""

MAX_TRIPS = 1 << 14
"""Iterations of the loops holding barriers, copy groups or waits the check follows
in all: a kernel's reduction steps number tens to hundreds (ResNet-50's 1x1 of 2048
channels in steps of 16: 128); past this the check refuses rather than run for
minutes."""

Span = frozenset[int] | Interval | None
"""The indices of one dimension an access may touch: the values it takes (where they
could be enumerated), an interval, or None where nothing bounds them."""

Region = tuple[Span, ...]

MAX_POINTS = 1 << 16
"""Points of one access (its thread, its leaf's loops) enumerated at most to tell
which thread touches which element; past this two overlapping accesses count as a
race (a copy of a 128 x 64 tile by 256 threads: 8,192)."""

Points = tuple[np.ndarray, np.ndarray]
"""Which element (a row of indices) which thread (its key, `_Who`) touches, one
entry per point of an access."""


class _Lazy:
    """An access's points, enumerated when first asked (most accesses never are)."""

    __slots__ = ("compute", "value")

    def __init__(self, compute: Callable[[], Points | None]) -> None:
        self.compute: Callable[[], Points | None] | None = compute
        self.value: Points | None = None

    def get(self) -> Points | None:
        if self.compute is not None:
            self.value, self.compute = self.compute(), None
        return self.value


@dataclass(frozen=True, eq=False)
class Access:
    op: Operation
    buffer: SSAValue
    region: Region
    band: tuple[int, Operation] | None
    """The visit of a leaf and the block-mapped band the access lies in, if any: two
    accesses of one band's visit are iterations of it, independent by its contract."""
    points: _Lazy | None = None
    """Which thread touches which element, where the check can tell."""

    def overlaps(self, other: Access, overlays: set[SSAValue]) -> bool:
        if self.buffer is not other.buffer:
            return self.buffer in overlays or other.buffer in overlays
        return all(_meet(a, b) for a, b in zip(self.region, other.region, strict=True))

    def describe(self) -> str:
        name = self.buffer.name_hint or "<shared>"
        return f"%{name}[{', '.join(_span_text(i) for i in self.region)}]"


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


@dataclass(frozen=True)
class _Who:
    """Who runs an access at one of its points: the key
    `base + sign * sum(stride * (value - lo))` over the axes (each the values naming
    one variable, its interval, its stride). Threads have keys from 0 (their linear
    id); an iteration of a block-mapped band one below -1 (the band's number in its
    high bits); the block of a band not yet mapped to threads, -1."""

    axes: tuple[tuple[tuple[SSAValue, ...], Interval, int], ...] = ()
    base: int = 0
    sign: int = 1


_BLOCK_PROGRAM = -1
_BAND_BITS = 32


class _Threads:
    """The threads of a block program and how the interpreter numbers them."""

    def __init__(self, program: Operation) -> None:
        self.program = program
        self.dims: tuple[int, int, int] | None = None
        """The block's threads along x, y, z (None: unknown, or not yet mapped)."""
        self.ids: tuple[tuple[SSAValue, ...], ...] = ((), (), ())
        """The values that are the thread id along x, y, z."""
        self.mapped = False
        """A grid band with thread bands: the interpreter runs it as a launch."""
        if isinstance(program, affine.ParallelOp):
            sizes = {
                e
                for band in program.walk()
                if isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD
                for e in [_thread_band_size(band)]
            }
            self.mapped = bool(sizes)
            if len(sizes) == 1 and None not in sizes:
                self.dims = (sizes.pop(), 1, 1)  # pyright: ignore[reportAttributeAccessIssue]
            return
        ids: list[list[SSAValue]] = [[], [], []]
        extents: list[int | None] = [None, None, None]
        if isinstance(program, gpu.LaunchOp):
            args = program.body.blocks[0].args
            for k in range(3):
                ids[k].append(args[3 + k])
                r = value_range(program.block_sizes[k], {})
                extents[k] = None if r is None else r[1]
        else:
            assert isinstance(program, gpu.FuncOp)
            known = program.block_size or _launched_block(program)
            if known is not None:
                extents = list(known)
        for op in program.walk():
            if isinstance(op, gpu.ThreadIdOp):
                k = "xyz".index(op.dim)
                ids[k].append(op.result)
                if extents[k] is None and isinstance(program, gpu.FuncOp):
                    extents[k] = op.bound  # pyright: ignore[reportAttributeAccessIssue]
        self.ids = tuple(tuple(i) for i in ids)
        if all(isinstance(e, int) and e > 0 for e in extents):
            self.dims = tuple(extents)  # pyright: ignore[reportAttributeAccessIssue]

    def name(self, key: int) -> str:
        """Who a key says ran an access."""
        if key == _BLOCK_PROGRAM:
            return "the block"
        if key < 0:
            return f"iteration {(-2 - key) % (1 << _BAND_BITS)} of a block-mapped band"
        if self.dims is None:
            return f"thread {key}"
        bx, by, _ = self.dims
        return f"thread ({key % bx}, {key // bx % by}, {key // (bx * by)})"


def _launched_block(kernel: gpu.FuncOp) -> tuple[int, int, int] | None:
    """The most threads along x, y, z that the module's `gpu.launch_func`s of
    `kernel` launch it with (None where none does, or some size is unknown)."""
    module = kernel.parent_op()
    top = kernel
    while top.parent_op() is not None:
        top = top.parent_op()  # pyright: ignore[reportAssignmentType]
    name = kernel.properties.get("sym_name") or kernel.attributes.get("sym_name")
    module_name = None
    if module is not None:
        module_name = module.properties.get("sym_name") or module.attributes.get(
            "sym_name"
        )
    if name is None or module_name is None:
        return None
    sizes: list[int] | None = None
    for launch in top.walk():
        if not isinstance(launch, gpu.LaunchFuncOp):
            continue
        if (launch.module_name, launch.kernel_name) != (
            module_name.data,  # pyright: ignore[reportAttributeAccessIssue]
            name.data,  # pyright: ignore[reportAttributeAccessIssue]
        ):
            continue
        found = [
            value_range(v, {})
            for v in (launch.blockSizeX, launch.blockSizeY, launch.blockSizeZ)
        ]
        if any(r is None for r in found):
            return None
        ends = [r[1] for r in found]  # pyright: ignore[reportOptionalSubscript]
        sizes = (
            ends
            if sizes is None
            else [max(a, b) for a, b in zip(sizes, ends, strict=True)]
        )
    return None if sizes is None else tuple(sizes)  # pyright: ignore[reportReturnType]


def _thread_band_size(band: affine.ParallelOp) -> int | None:
    """The threads a thread band's iterations number (its bounds constant)."""
    extents = _band_extents(band)
    return None if extents is None else math.prod(extents)


def _band_extents(band: affine.ParallelOp) -> list[int] | None:
    """A band's extents where its bounds are constants from 0, step 1 (the
    interpreter's thread bands)."""
    lower, upper = band.lowerBoundsMap.data, band.upperBoundsMap.data
    n = len(band.induction_variables)
    if (
        lower.num_dims + lower.num_symbols + upper.num_dims + upper.num_symbols
        or len(lower.results) != n
        or len(upper.results) != n
        or any(s != 1 for s in band.step_values)
    ):
        return None
    if any(e.eval([], []) != 0 for e in lower.results):
        return None
    return [max(0, e.eval([], [])) for e in upper.results]


class _Walk:
    def __init__(
        self, overlays: set[SSAValue], barriers: bool, program: Operation
    ) -> None:
        self.overlays = overlays
        self.barriers = barriers
        self.threads = _Threads(program)
        self.whos: dict[Operation, tuple[_Who | None, Operation | None]] = {}
        """Per op touching shared memory: who runs it, and the block-mapped band it
        lies in."""
        self.bands: dict[Operation, int] = {}
        """The block-mapped bands met so far, numbered."""
        self.points: dict[tuple, _Lazy] = {}
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
        for op in block.walk():
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
        if roots is None or any(_varies_by_thread(r) for r in roots):
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
        points = [_point(r) for r in map_ranges(m, operands, self.known_ranges())]
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
                    _guards(o, op),
                    [b for b in reads(o) if is_shared(b)],
                    [b for b in writes(o) if is_shared(b)],
                )
                for o in op.walk()
                if _touches_shared(o)
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
        if indices is None or memrefs != [buffer]:
            t = buffer.type
            assert isinstance(t, MemRefType)
            region = (None,) * len(t.get_shape())
            return Access(op, buffer, region, self.band_of(op))
        m = op.map.data if isinstance(getattr(op, "map", None), AffineMapAttr) else None
        return self.access(op, buffer, indices, m, run=_run(op))

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
            key = (op, self.values_of(roots))
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
        points = self.points_of(op, buffer, indices, m, run, roots)
        return Access(op, buffer, tuple(region), self.band_of(op), points)

    def values_of(self, roots: Sequence[SSAValue]) -> tuple:
        """What the known trips say of `roots`: a value, else a range (a loop's
        bounds may depend on the trip of one enclosing it)."""
        ranges = self.known_ranges()
        return tuple(
            self.known[r] if r in self.known else value_range(r, ranges) for r in roots
        )

    # -- who touches what ----------------------------------------------------------------

    def who(self, op: Operation) -> tuple[_Who | None, Operation | None]:
        """Who runs `op` (None: the check cannot tell), and the block-mapped band
        it lies in."""
        if op in self.whos:
            return self.whos[op]
        band = op.parent_op()
        while band is not None and band is not self.threads.program:
            if isinstance(band, affine.ParallelOp) and mapping_of(band) in (
                BLOCK,
                THREAD,
            ):
                break
            band = band.parent_op()
        if band is self.threads.program:
            band = None
        who: _Who | None = None
        block_band: Operation | None = None
        threads = self.threads
        if isinstance(band, affine.ParallelOp) and mapping_of(band) == THREAD:
            extents = _band_extents(band)
            if extents is not None:
                ivs = band.induction_variables
                who = _Who(_row_major(ivs, [(0, e - 1) for e in extents]))
        elif isinstance(band, affine.ParallelOp):
            block_band = band
            number = self.bands.setdefault(band, len(self.bands))
            spans = [value_range(iv, {}) for iv in band.induction_variables]
            if all(s is not None for s in spans):
                axes = _row_major(band.induction_variables, spans)  # pyright: ignore
                size = math.prod(s[1] - s[0] + 1 for s in spans)  # pyright: ignore
                if size < 1 << _BAND_BITS:
                    who = _Who(axes, -2 - (number << _BAND_BITS), -1)
        elif isinstance(threads.program, affine.ParallelOp):
            if not threads.mapped:
                who = _Who(base=_BLOCK_PROGRAM)
            elif threads.dims is not None:  # every thread runs it
                who = _Who((((), (0, threads.dims[0] - 1), 1),))
        elif threads.dims is not None:
            spans = [(0, d - 1) for d in threads.dims]
            who = _Who(_row_major(threads.ids, spans, reverse=True))
        self.whos[op] = (who, block_band)
        return who, block_band

    def band_of(self, op: Operation) -> tuple[int, Operation] | None:
        _, band = self.who(op)
        return None if band is None else (self.phase, band)

    def points_of(
        self,
        op: Operation,
        buffer: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None,
        run: int,
        roots: list[SSAValue] | None,
    ) -> _Lazy | None:
        """Which thread touches which element (enumerated when first asked)."""
        who, _ = self.who(op)
        if who is None:
            return None
        # Past `MAX_POINTS` (or where a guard cannot be followed), the guards and
        # their variables (often the block's position: a partial tile) are left
        # out: more points, none lost.
        tries = [(roots, self.guards)] if roots is not None else []
        if self.guards:
            tries.append((free_roots(indices, []), []))
        tries = [(r, g) for r, g in tries if r is not None]
        if not tries:
            return None
        key = (op, buffer, self.values_of(tries[0][0]))
        if key in self.points:
            return self.points[key]
        plans = []
        for variables, guards in tries:
            axes = self.axes_of(who, variables)
            if axes is not None:
                known = {r: self.known[r] for r in variables if r in self.known}
                plans.append((axes, guards, known))

        def compute() -> Points | None:
            for axes, guards, known in plans:
                found = index_points(indices, m, guards, axes, known, MAX_POINTS)
                if found is not None:
                    return _points(found, who, run)
            return None

        lazy = self.points[key] = _Lazy(compute)
        return lazy

    def axes_of(self, who: _Who, roots: Sequence[SSAValue]) -> list[Axis] | None:
        """The variables to enumerate: who runs the access, and every root not
        known (None where one has no range)."""
        named = {v for values, _, _ in who.axes for v in values}
        axes: list[Axis] = [(values, span) for values, span, _ in who.axes]
        for r in roots:
            if r in self.known or r in named:
                continue
            span = value_range(r, self.known_ranges())
            if span is None:
                return None
            axes.append(([r], span))
        return axes

    def race(self, a: Access, b: Access, *, twice: bool = False) -> _Found | None:
        """Whether `a` and `b` (one of them a write, no barrier between) may touch
        one element from two threads: None if not, else what shows it (an element
        and its two threads, or nothing where the check cannot tell). With `twice`
        (`a` is `b`, an asynchronous copy), one thread touching an element twice is
        a race too."""
        if not a.overlaps(b, self.overlays):
            return None
        if a.buffer is b.buffer and a.points is not None and b.points is not None:
            pa, pb = a.points.get(), b.points.get()
            if pa is not None and pb is not None:
                found = _clash(pa, pb, twice)
                if found is None:
                    return None
                element, first, second = found
                name = a.buffer.name_hint or "<shared>"
                at = f"%{name}[{', '.join(map(str, element))}]"
                names = self.threads.name(first), self.threads.name(second)
                return _Found(at, *names)
        if a.band is not None and a.band == b.band:
            return None  # iterations of one band: independent by its contract
        return _Found()

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
                found = self.race(w, a)
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
            found = self.race(a, a, twice=True)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} more than once while the "
                    f"first copy may still be in flight{found.text('copies', 'copies')}",
                )
        if not self.barriers:
            return
        for r in self.state.reads:
            found = self.race(r, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} while {_quote(r.op)} may still be "
                    f"reading {r.describe()}: no gpu.barrier since that read"
                    f"{found.text('reads', 'writes')}",
                )
        for w in self.state.writes:
            found = self.race(w, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()}, which {_quote(w.op)} wrote into "
                    f"{w.describe()} with no gpu.barrier between"
                    f"{found.text('writes', 'writes')}",
                )
        if not copy:
            found = self.race(a, a)
            if found is not None:
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} from more than one thread "
                    f"with no gpu.barrier between{found.text('writes', 'writes')}",
                )


@dataclass(frozen=True)
class _Found:
    """What shows a race: an element and the two threads touching it (nothing
    where the check could not tell which thread touches what)."""

    element: str = ""
    first: str = ""
    second: str = ""

    def text(self, first: str, second: str) -> str:
        if not self.element:
            return ""
        if self.first == self.second:
            return f" ({self.first} {first} into {self.element} twice)"
        return f" ({self.first} {first} {self.element}, {self.second} {second} it)"


def _row_major(
    values: Sequence, spans: Sequence[Interval], *, reverse: bool = False
) -> tuple[tuple[tuple[SSAValue, ...], Interval, int], ...]:
    """Axes numbering the points of `spans` row-major (the first varies slowest; with
    `reverse`, the first varies fastest, as thread ids x, y, z do); each entry of
    `values` one value or several naming the same variable."""
    order = list(range(len(spans)))
    if not reverse:
        order.reverse()
    strides = [0] * len(spans)
    stride = 1
    for k in order:
        strides[k] = stride
        stride *= spans[k][1] - spans[k][0] + 1
    return tuple(
        (tuple(v) if isinstance(v, tuple) else (v,), span, strides[k])
        for k, (v, span) in enumerate(zip(values, spans, strict=True))
    )


def _points(
    found: tuple[list[np.ndarray], list[np.ndarray]], who: _Who, run: int
) -> Points:
    """The elements and keys of the points `index_points` found."""
    results, values = found
    count = len(results[0]) if results else len(values[0]) if values else 1
    keys = np.full(count, who.base, np.int64)
    for (_, (lo, _), stride), v in zip(who.axes, values, strict=False):
        keys += who.sign * stride * (v - lo)
    columns = [np.broadcast_to(r, (count,)) for r in results]
    elements = np.stack(columns or [np.zeros(count)], axis=1).astype(np.int64)
    if run > 1:
        step = np.zeros((1, run, elements.shape[1]), np.int64)
        step[0, :, -1] = np.arange(run)
        elements = (elements[:, None, :] + step).reshape(-1, elements.shape[1])
        keys = np.repeat(keys, run)
    return elements, keys


def _clash(
    a: Points, b: Points, twice: bool
) -> tuple[tuple[int, ...], int, int] | None:
    """An element that `a` and `b` touch from two threads (or, with `twice`, an
    element `a` touches at two points), with its two threads' keys."""
    (ea, ka), (eb, kb) = a, b
    if not len(ea) or not len(eb):
        return None
    if a is b:
        ids, _ = _element_ids(ea, ea[:0])
        order = np.argsort(ids, kind="stable")
        ids, keys = ids[order], ka[order]
        same = ids[1:] == ids[:-1]
        if not twice:  # two points of an element with different keys
            same &= keys[1:] != keys[:-1]
        found = np.flatnonzero(same)
        if not len(found):
            return None
        i, j = order[found[0]], order[found[0] + 1]
        return tuple(ea[i].tolist()), int(ka[i]), int(ka[j])
    ia, ib = _element_ids(ea, eb)
    common = np.intersect1d(ia, ib)
    if not len(common):
        return None
    in_a, in_b = np.isin(ia, common), np.isin(ib, common)
    ids = np.concatenate([ia[in_a], ib[in_b]])
    keys = np.concatenate([ka[in_a], kb[in_b]])
    order = np.lexsort((keys, ids))
    ids, keys = ids[order], keys[order]
    found = np.flatnonzero((ids[1:] == ids[:-1]) & (keys[1:] != keys[:-1]))
    if not len(found):
        return None
    e = ids[found[0]]
    at_a, at_b = np.unique(ka[ia == e]), np.unique(kb[ib == e])
    for x in at_a.tolist():
        for y in at_b.tolist():
            if x != y:
                row = ea[np.argmax(ia == e)]
                return tuple(row.tolist()), int(x), int(y)
    raise AssertionError("an element of two keys has two different ones")


def _element_ids(ea: np.ndarray, eb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One integer per element (row of indices) of `ea` and `eb`, equal where the
    rows are."""
    both = np.concatenate([ea, eb])
    lo, hi = both.min(axis=0), both.max(axis=0)
    spans = (hi - lo + 1).tolist()
    if math.prod(spans) < 1 << 62:
        strides = np.array(
            [math.prod(spans[k + 1 :]) for k in range(len(spans))], np.int64
        )
        ids = (both - lo) @ strides
    else:
        _, ids = np.unique(both, axis=0, return_inverse=True)
        ids = ids.reshape(-1)
    return ids[: len(ea)], ids[len(ea) :]


def _varies_by_thread(root: SSAValue) -> bool:
    """Whether `root` (a block argument or a GPU id) may differ between the threads of
    a block: thread and lane ids, the variables of block- and thread-mapped bands."""
    if isinstance(root, BlockArgument):
        owner = root.block.parent_op()
        if isinstance(owner, gpu.LaunchOp):
            return 3 <= root.index < 6
        if isinstance(owner, affine.ParallelOp):
            return mapping_of(owner) != GRID
        return False
    return isinstance(root.owner, gpu.ThreadIdOp | gpu.LaneIdOp)


def _guards(op: Operation, leaf: Operation) -> list[tuple[affine.IfOp, bool]]:
    """The `affine.if` ops between `leaf` and `op`, with the branch `op` is in."""
    guards = []
    child, parent = op, op.parent_op()
    while child is not leaf and parent is not None:
        if isinstance(parent, affine.IfOp):
            guards.append((parent, child.parent_region() is parent.then_region))
        child, parent = parent, parent.parent_op()
    return guards


def _run(op: Operation) -> int:
    """Elements an access touches from its address along the innermost dimension:
    a vector's, or a row of 16 bytes for each lane of ldmatrix."""
    if isinstance(op, nvgpu.LdMatrixOp):
        t = op.srcMemref.type
        assert isinstance(t, MemRefType)
        return 16 // element_size(t.get_element_type())
    vectors = [
        v.type for v in (*op.results, *op.operands) if isinstance(v.type, VectorType)
    ]
    return vectors[0].element_count() if vectors else 1


def _point(r: Interval | None) -> int | None:
    return r[0] if r is not None and r[0] == r[1] else None


def _meet(a: Span, b: Span) -> bool:
    """Whether two spans share an index."""
    if a is None or b is None:
        return True
    if isinstance(a, frozenset) and isinstance(b, frozenset):
        return not a.isdisjoint(b)
    if isinstance(a, frozenset):
        a, b = b, a
    assert isinstance(a, tuple)
    if isinstance(b, frozenset):
        return any(a[0] <= x <= a[1] for x in b)
    return a[0] <= b[1] and b[0] <= a[1]


def _span_text(span: Span) -> str:
    if span is None:
        return "*"
    if isinstance(span, frozenset):
        if not span:
            return "{}"
        lo, hi = min(span), max(span)
        if len(span) == hi - lo + 1:
            return str(lo) if lo == hi else f"{lo}..{hi}"
        return f"{{{', '.join(map(str, sorted(span)[:4]))}{', ...' * (len(span) > 4)}}}"
    return str(span[0]) if span[0] == span[1] else f"{span[0]}..{span[1]}"


def _touches_shared(op: Operation) -> bool:
    return any(is_shared(v) for v in op.operands)


def _quote(op: Operation) -> str:
    text = str(op).split("\n")[0].strip()
    return f"'{text[:117]}...'" if len(text) > 120 else f"'{text}'"
