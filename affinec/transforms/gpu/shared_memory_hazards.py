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
or a leaf's own loop decides it. Two regions overlap unless some index differs, so
the check is conservative at that granularity: what it passes is race-free for every
thread; what it refuses names the two ops.

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
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineConstraintKind, AffineExpr, AffineMap

from affinec.diagnostics import PassError
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import GRID, OVERLAY, PaddedLoadOp, mapping_of
from affinec.ir.ranges import as_dims

SYNC = (gpu.BarrierOp, nvgpu.DeviceAsyncCreateGroupOp, nvgpu.DeviceAsyncWaitOp)

Region = tuple[int | None, ...]
"""The indices of a buffer an access may touch: a known index, or None for any."""


@dataclass(frozen=True)
class Access:
    op: Operation
    buffer: SSAValue
    region: Region

    def overlaps(self, other: Access, overlays: set[SSAValue]) -> bool:
        if self.buffer is not other.buffer:
            return self.buffer in overlays or other.buffer in overlays
        return all(
            a is None or b is None or a == b
            for a, b in zip(self.region, other.region, strict=True)
        )

    def describe(self) -> str:
        name = self.buffer.name_hint or "<shared>"
        index = ", ".join("*" if i is None else str(i) for i in self.region)
        return f"%{name}[{index}]"


@dataclass
class _State:
    """What a block has done to its shared memory since its last barrier."""

    reads: list[Access] = field(default_factory=list)
    writes: list[Access] = field(default_factory=list)
    """Stores, and copies landed by a wait, since the last barrier."""
    ungrouped: list[Access] = field(default_factory=list)
    groups: list[list[Access]] = field(default_factory=list)
    last_wait: Operation | None = None

    def in_flight(self) -> Iterator[Access]:
        yield from self.ungrouped
        for group in self.groups:
            yield from group


def check_shared_memory_hazards(root: Operation, *, barriers: bool = True) -> None:
    """Refuse, with a `PassError` at the op, the first hazard of every block program
    under `root` (grid bands, `gpu.launch` bodies, kernels). With `barriers=False`
    only the asynchronous copies' waits are checked (before barriers are placed)."""
    for program, overlays in _programs(root):
        _Walk(overlays, barriers).run(program)


def _programs(root: Operation) -> Iterator[tuple[Block, set[SSAValue]]]:
    for op in root.walk():
        if isinstance(op, affine.ParallelOp) and mapping_of(op) == GRID:
            block = op.body.block
            overlays = {
                a.results[0]
                for a in block.ops
                if isinstance(a, memref.AllocOp | memref.AllocaOp)
                and OVERLAY in a.attributes
            }
            yield block, overlays
        elif isinstance(op, gpu.LaunchOp | gpu.FuncOp):
            region = op.body
            if len(region.blocks) != 1:
                continue  # lowered to branches: checked at the levels above
            block = region.blocks[0]
            workgroup = [a for a in block.args if _is_shared(a)]
            marked = op.attributes.get(OVERLAY)
            indices = marked.get_values() if marked is not None else ()  # pyright: ignore
            yield block, {workgroup[i] for i in indices if i < len(workgroup)}


def _is_shared(value: SSAValue) -> bool:
    return (
        isinstance(value.type, MemRefType)
        and gpu.memory_space(value.type) == gpu.WORKGROUP_ADDRESS_SPACE
    )


class _Walk:
    def __init__(self, overlays: set[SSAValue], barriers: bool) -> None:
        self.overlays = overlays
        self.barriers = barriers
        self.known: dict[SSAValue, int] = {}
        self.state = _State()
        self.structure: dict[Operation, bool] = {}
        self.leaves: dict[Operation, list[Operation]] = {}

    def run(self, block: Block) -> None:
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
                taken = self.condition(op)
                if taken is None:
                    raise PassError(
                        op,
                        "a barrier or an asynchronous-copy group or wait under a "
                        "condition the block's threads may not agree on: cannot "
                        "check the shared-memory hazards",
                    )
                region = op.then_region if taken else op.else_region
                if region.blocks:
                    self.block(region.block)
            elif isinstance(op, affine.ParallelOp) and mapping_of(op) != GRID:
                self.block(op.body.block)  # every thread runs the band's body
            else:
                raise PassError(
                    op,
                    "holds a barrier or an asynchronous-copy group or wait in a way "
                    "the shared-memory hazard check cannot follow",
                )

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
        for value in range(lower, upper, op.step.value.data):
            self.known[iv] = value
            self.block(op.body.block)
        self.known.pop(iv, None)

    def bound(self, m: AffineMap, operands: Sequence[SSAValue], pick) -> int | None:
        values = [self.evaluate(v) for v in operands]
        results = [self.expression(e, m, values) for e in m.results]
        if any(r is None for r in results):
            return None
        return pick(results)  # pyright: ignore

    def condition(self, op: affine.IfOp) -> bool | None:
        s = op.condition.data
        values = [self.evaluate(v) for v in op.args]
        m = AffineMap(s.num_dims, s.num_symbols, ())
        for c in s.constraints:
            lhs = self.expression(c.lhs - c.rhs, m, values)
            if lhs is None:
                return None
            if c.kind == AffineConstraintKind.eq and lhs != 0:
                return False
            if c.kind == AffineConstraintKind.ge and lhs < 0:
                return False
        return True

    # -- values the block's threads agree on ---------------------------------------------

    def evaluate(self, value: SSAValue) -> int | None:
        if value in self.known:
            return self.known[value]
        op = value.owner
        if isinstance(op, arith.ConstantOp) and isinstance(op.value, IntegerAttr):
            return op.value.value.data
        if isinstance(op, affine.ApplyOp | affine.MinOp | affine.MaxOp):
            m = op.map.data
            values = [self.evaluate(v) for v in op.mapOperands]
            results = [self.expression(e, m, values) for e in m.results]
            if any(r is None for r in results):
                return None
            if isinstance(op, affine.MinOp):
                return min(results)  # pyright: ignore
            return max(results)  # pyright: ignore
        return None

    @staticmethod
    def expression(
        e: AffineExpr, m: AffineMap, values: Sequence[int | None]
    ) -> int | None:
        """`e`, an expression of `m`'s operands, where the operands it uses are known."""
        m = as_dims(AffineMap(m.num_dims, m.num_symbols, (e,)))
        used = m.results[0].used_dims()
        if any(values[d] is None for d in used):
            return None
        return m.eval([v or 0 for v in values], [])[0]

    # -- accesses --------------------------------------------------------------------------

    def leaf(self, op: Operation) -> None:
        if op not in self.leaves:
            self.leaves[op] = [
                (o, _guards(o, op)) for o in op.walk() if _touches_shared(o)
            ]
        for inner, guards in self.leaves[op]:
            if any(self.condition(g) is (not branch) for g, branch in guards):
                continue  # in a branch not taken here
            if isinstance(inner, nvgpu.DeviceAsyncCopyOp):
                a = self.access(inner, inner.dst, inner.dstIndices, wide=True)
                self.start_copy(a)
            elif isinstance(inner, READS_WITH_MAP):
                a = self.access(inner, inner.memref, inner.indices, inner.map.data)
                self.read(a)
            elif isinstance(inner, WRITES_WITH_MAP):
                a = self.access(inner, inner.memref, inner.indices, inner.map.data)
                self.write(a)
            elif isinstance(inner, memref.LoadOp):
                self.read(self.access(inner, inner.memref, inner.indices))
            elif isinstance(inner, nvgpu.LdMatrixOp):
                a = self.access(inner, inner.srcMemref, inner.indices, wide=True)
                self.read(a)
            elif isinstance(inner, memref.StoreOp):
                self.write(self.access(inner, inner.memref, inner.indices))
            elif not isinstance(inner, memref.DeallocOp):
                raise PassError(
                    inner,
                    "uses a shared buffer in a way the shared-memory hazard check "
                    "cannot follow",
                )

    def access(
        self,
        op: Operation,
        buffer: SSAValue,
        indices: Sequence[SSAValue],
        m: AffineMap | None = None,
        *,
        wide: bool = False,
    ) -> Access:
        """The region `op` touches: its indices (through its map) where known; a run
        of elements (a vector, a copy, a row of ldmatrix) along the innermost
        dimension counts as any index there."""
        region = [self.evaluate(v) for v in indices]
        if m is not None:
            region = [self.expression(e, m, region) for e in m.results]
        if (wide or _vector_access(op)) and region:
            region[-1] = None
        return Access(op, buffer, tuple(region))

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
                if a.overlaps(w, self.overlays):
                    raise PassError(
                        a.op,
                        f"reads {a.describe()}{self.where()}, which {_quote(w.op)} wrote into "
                        f"{w.describe()} with no gpu.barrier between: other threads' "
                        "writes may not be visible yet",
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
        self.overwrite(a, "starts an asynchronous copy into")
        self.state.ungrouped.append(a)

    def overwrite(self, a: Access, what: str) -> None:
        for copy in self.state.in_flight():
            if a.overlaps(copy, self.overlays):
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()}, which the asynchronous copy into "
                    f"{copy.describe()} may still be writing "
                    f"(the copy: {_quote(copy.op)})",
                )
        if not self.barriers:
            return
        for r in self.state.reads:
            if a.overlaps(r, self.overlays):
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()} while {_quote(r.op)} may still be "
                    f"reading {r.describe()}: no gpu.barrier since that read",
                )
        for w in self.state.writes:
            if w.op is not a.op and a.overlaps(w, self.overlays):
                raise PassError(
                    a.op,
                    f"{what} {a.describe()}{self.where()}, which {_quote(w.op)} wrote into "
                    f"{w.describe()} with no gpu.barrier between",
                )


READS_WITH_MAP = (affine.LoadOp, affine.VectorLoadOp, PaddedLoadOp)
WRITES_WITH_MAP = (affine.StoreOp, affine.VectorStoreOp)


def _guards(op: Operation, leaf: Operation) -> list[tuple[affine.IfOp, bool]]:
    """The `affine.if` ops between `leaf` and `op`, with the branch `op` is in."""
    guards = []
    child, parent = op, op.parent_op()
    while child is not leaf and parent is not None:
        if isinstance(parent, affine.IfOp):
            guards.append((parent, child.parent_region() is parent.then_region))
        child, parent = parent, parent.parent_op()
    return guards


def _vector_access(op: Operation) -> bool:
    return isinstance(op, affine.VectorLoadOp | affine.VectorStoreOp)


def _touches_shared(op: Operation) -> bool:
    return any(_is_shared(v) for v in op.operands)


def _quote(op: Operation) -> str:
    text = str(op).split("\n")[0].strip()
    return f"'{text[:117]}...'" if len(text) > 120 else f"'{text}'"
