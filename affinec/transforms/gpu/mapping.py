"""How mapped `affine.parallel` bands become GPU blocks and threads.

`plan_launch` looks at one grid-mapped `affine.parallel` and everything under it, checks
that it can run on a GPU, and decides (without touching the IR):

- the grid: one block per grid iteration, the band linearized onto `blockIdx.x`;
- the phases: each block-mapped `affine.parallel` is a phase whose iterations the
  block's threads share. Iteration `lin` (row-major over the band's extents) goes to
  thread `lin mod T`, which runs it in its `lin floordiv T`-th turn (`%j`), so a phase
  larger than the block is a strided loop; a guard skips iterations past the band's end
  or past a partial tile's bound (`min(...)` upper bounds);
- the buffers allocated at grid level: one whose every access is indexed by exactly the
  induction variables of phases with the same iteration space is *thread-private* (each
  element is only ever touched by the thread that owns its iteration) and becomes a
  per-thread `memref.alloca` indexed by the turn `%j`, which LLVM's SROA keeps in
  registers; any other becomes a workgroup (shared memory) buffer;
- the barriers: a `gpu.barrier` goes before a phase that reads what an earlier phase (or
  the previous trip of an enclosing loop) wrote, or writes what it read or wrote, since
  the last barrier. Thread-private buffers never need one.

`build_launch` then rewrites the grid band into a `gpu.launch` following the plan.
Every refusal is a `PassError` raised by `plan_launch`, before anything is rewritten.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import (
    IndexType,
    IntegerAttr,
    MemRefType,
    ModuleOp,
    NoneAttr,
    UnitAttr,
)
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.ir.affine import (
    AffineConstraintExpr,
    AffineConstraintKind,
    AffineDimExpr,
    AffineExpr,
    AffineMap,
    AffineSet,
)
from xdsl.traits import Pure

from affinec.diagnostics import PassError
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, GRID, UNROLL, PaddedLoadOp, mapping_of
from affinec.dtypes import element_size
from affinec.ir.affine_exprs import Interval, grouped
from affinec.ir.ranges import as_dims, difference_range

MAX_THREADS_PER_BLOCK = 1024
DEFAULT_THREADS_PER_BLOCK = 256
"""The block size when the phases are larger: 8 warps, a common sweet spot."""

MAX_STATIC_SHARED_BYTES = 48 * 1024
"""Static shared memory per block that every CUDA GPU grants without opting in."""

MAX_GRID_BLOCKS = (1 << 31) - 1

MAX_UNROLLED_TURNS = 16
"""Turn loops longer than this are left rolled (their private buffers go to local
memory): LLVM takes about 0.6 s on 16 unrolled turns of a 7x7 convolution tap loop,
and seconds beyond."""

_READS = (affine.LoadOp, PaddedLoadOp, memref.LoadOp)
_WRITES = (affine.StoreOp, memref.StoreOp)
_ALLOCS = (memref.AllocOp, memref.AllocaOp)


# --------------------------------------------------------------------------------------
# Plans
# --------------------------------------------------------------------------------------


@dataclass
class Dim:
    """One dimension of a band: `iv = lower + step * idx` for `idx` in `[0, extent)`."""

    lower: int | None
    """The lower bound when it is a constant; else it is computed from `lower_map`."""
    lower_map: AffineMap
    """Over the band's lower-bound operands, all as dims."""
    step: int
    extent: int
    """The most iterations the dimension ever has (its trip count, if constant)."""
    guards: list[AffineExpr]
    """Upper bounds (over the band's upper-bound operands, as dims) that can cut the
    dimension short: `iv < bound`."""


@dataclass
class Band:
    op: affine.ParallelOp
    dims: list[Dim]

    @property
    def total(self) -> int:
        return math.prod(d.extent for d in self.dims)

    @property
    def signature(self) -> tuple | None:
        """Equal signatures map equal iterations to equal (thread, turn) pairs."""
        if any(d.lower is None for d in self.dims):
            return None
        return tuple((d.lower, d.step, d.extent) for d in self.dims)


@dataclass
class Access:
    """Buffers read and written since the last barrier."""

    reads: set[SSAValue] = field(default_factory=set)
    writes: set[SSAValue] = field(default_factory=set)

    def conflicts(self, other: Access) -> bool:
        return bool(
            self.writes & (other.reads | other.writes) or self.reads & other.writes
        )

    def __or__(self, other: Access) -> Access:
        return Access(self.reads | other.reads, self.writes | other.writes)

    def __bool__(self) -> bool:
        return bool(self.reads or self.writes)


@dataclass
class LaunchPlan:
    grid: Band
    phases: list[Band]
    threads: int
    private: list[Operation]
    """Grid-level allocations that become per-thread storage."""
    shared: list[Operation]
    """Grid-level allocations that become workgroup (shared memory) buffers."""
    barriers: set[Operation]
    """Ops (phases or grid-level reads) that need a `gpu.barrier` right before them."""

    def turns(self, phase: Band) -> int:
        return -(-phase.total // self.threads)


# --------------------------------------------------------------------------------------
# Finding what to map
# --------------------------------------------------------------------------------------


def grid_parallels(module: ModuleOp) -> list[affine.ParallelOp]:
    """The grid-mapped bands, after checking that mapped bands nest properly."""
    grids: list[affine.ParallelOp] = []
    for op in module.walk():
        if not isinstance(op, affine.ParallelOp):
            continue
        level = mapping_of(op)
        enclosing = _enclosing_mappings(op)
        if level == GRID:
            if enclosing:
                raise PassError(
                    op,
                    f"a grid-mapped affine.parallel inside a {enclosing[0]}-mapped one",
                )
            grids.append(op)
        elif level == BLOCK:
            if GRID not in enclosing:
                raise PassError(
                    op,
                    "a block-mapped affine.parallel must be inside a grid-mapped one",
                )
            if BLOCK in enclosing:
                raise PassError(
                    op, "a block-mapped affine.parallel inside another block-mapped one"
                )
        elif level is not None:
            raise PassError(op, f"unknown mapping '{level}' (expected grid or block)")
    return grids


def _enclosing_mappings(op: Operation) -> list[str]:
    found: list[str] = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ParallelOp) and (m := mapping_of(parent)):
            found.append(m)
        parent = parent.parent_op()
    return found


# --------------------------------------------------------------------------------------
# Planning
# --------------------------------------------------------------------------------------


def plan_launch(grid_op: affine.ParallelOp, threads_per_block: int) -> LaunchPlan:
    """Check `grid_op` and decide how it maps to the GPU (see the module docstring)."""
    _check_host_position(grid_op)
    known: dict[SSAValue, Interval] = {}
    grid = _band(grid_op, known, "grid")
    if any(d.lower is None or d.guards for d in grid.dims):
        raise PassError(grid_op, "the bounds of a grid-mapped band must be constants")
    if grid.total > MAX_GRID_BLOCKS:
        raise PassError(
            grid_op, f"{grid.total} blocks exceed the grid limit of {MAX_GRID_BLOCKS}"
        )
    for iv, d in zip(grid_op.induction_variables, grid.dims, strict=True):
        assert d.lower is not None
        known[iv] = (d.lower, d.lower + d.step * max(d.extent - 1, 0))

    phases: list[Band] = []
    allocs: list[Operation] = []
    _collect(grid_op.body.block, known, phases, allocs)

    check_threads_per_block(grid_op, threads_per_block)
    largest = max((p.total for p in phases), default=1)
    threads = threads_per_block or max(1, min(DEFAULT_THREADS_PER_BLOCK, largest))

    private, shared = _classify_buffers(allocs, phases)
    shared_bytes = sum(_byte_size(a) for a in shared)
    if shared_bytes > MAX_STATIC_SHARED_BYTES:
        raise PassError(
            grid_op,
            f"the block's shared buffers take {shared_bytes} bytes, more than the "
            f"{MAX_STATIC_SHARED_BYTES} bytes of static shared memory",
        )
    plan = LaunchPlan(grid, phases, threads, private, shared, set())
    _plan_barriers(plan, grid_op.body.block, Access(), {p.op: p for p in phases})
    return plan


def check_threads_per_block(op: Operation, threads_per_block: int) -> None:
    if threads_per_block < 0 or threads_per_block > MAX_THREADS_PER_BLOCK:
        raise PassError(
            op,
            f"threads-per-block must be between 1 and {MAX_THREADS_PER_BLOCK} "
            f"(0 picks one), got {threads_per_block}",
        )


def _check_host_position(grid_op: affine.ParallelOp) -> None:
    parent = grid_op.parent_op()
    if parent is None or parent.name != "func.func":
        raise PassError(
            grid_op, "a grid-mapped affine.parallel must be directly in a function body"
        )
    if grid_op.res:
        raise PassError(grid_op, "a grid-mapped affine.parallel cannot reduce")


def _band(op: affine.ParallelOp, known: dict[SSAValue, Interval], what: str) -> Band:
    if op.res:
        raise PassError(op, f"a {what}-mapped affine.parallel cannot reduce")
    lower_map = as_dims(op.lowerBoundsMap.data)
    upper_map = as_dims(op.upperBoundsMap.data)
    lower_operands = op.lower_bound_operands
    upper_operands = op.upper_bound_operands
    lowers = grouped(list(lower_map.results), op.lower_groups)
    uppers = grouped(list(upper_map.results), op.upper_groups)
    dims: list[Dim] = []
    for k, (lows, ups, step) in enumerate(
        zip(lowers, uppers, op.step_values, strict=True)
    ):
        differences: list[list[Interval]] = []
        for u in ups:
            row: list[Interval] = []
            for lo in lows:
                r = difference_range(u, upper_operands, lo, lower_operands, known)
                if r is None:
                    raise PassError(
                        op,
                        f"the trip count of dimension {k} of a {what}-mapped band has "
                        "no static bound",
                    )
                row.append(r)
            differences.append(row)
        span = min(r[1] for row in differences for r in row)
        extent = max(0, -(-span // step))
        guards = [
            u
            for u, row in zip(ups, differences, strict=True)
            if min(r[0] for r in row) < step * (extent - 1) + 1
        ]
        constant = None
        if len(lows) == 1 and lows[0].used_dims() == set():
            constant = lows[0].eval([], [])
        dims.append(
            Dim(
                constant,
                AffineMap(lower_map.num_dims, 0, tuple(lows)),
                step,
                extent,
                guards,
            )
        )
    return Band(op, dims)


def _collect(
    block: Block,
    known: dict[SSAValue, Interval],
    phases: list[Band],
    allocs: list[Operation],
) -> None:
    """Walk the grid level (everything outside phases), collecting phases and buffers
    and refusing what all threads of a block cannot run together."""
    for op in block.ops:
        if isinstance(op, affine.ParallelOp):
            if mapping_of(op) != BLOCK:
                raise PassError(
                    op,
                    "an affine.parallel at grid level must be mapped to the block's "
                    'threads ({affinec.mapping = "block"})',
                )
            phases.append(_band(op, known, "block"))
            for inner in op.walk():
                if (
                    isinstance(inner, affine.ParallelOp)
                    and inner is not op
                    and mapping_of(inner) is not None
                ):
                    raise PassError(inner, "mapped bands cannot nest in a phase")
        elif isinstance(op, affine.ForOp):
            if op.inits:
                raise PassError(
                    op, "a grid-level affine.for cannot carry values (iter_args)"
                )
            _collect(op.body.block, known, phases, allocs)
        elif isinstance(op, affine.IfOp):
            if op.res:
                raise PassError(op, "a grid-level affine.if cannot yield values")
            for region in (op.then_region, op.else_region):
                if region.blocks:
                    _collect(region.block, known, phases, allocs)
        elif isinstance(op, _ALLOCS):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            if op.dynamic_sizes or any(s < 0 for s in t.get_shape()):
                raise PassError(op, "buffers of a block must have a static shape")
            if not _has_identity_layout(t):
                raise PassError(op, "buffers of a block must have the identity layout")
            allocs.append(op)
        elif isinstance(op, (affine.YieldOp, memref.DeallocOp, *_READS)):
            continue
        elif not op.has_trait(Pure) or op.regions:
            raise PassError(
                op,
                "every thread of a block would run this op: only loads, pure ops, "
                "buffers, affine.for/if and block-mapped bands may sit at grid level",
            )


def _has_identity_layout(t: MemRefType) -> bool:
    return isinstance(t.layout, NoneAttr)


def _byte_size(alloc: Operation) -> int:
    t = alloc.results[0].type
    assert isinstance(t, MemRefType)
    return math.prod(t.get_shape()) * element_size(t.get_element_type())


def _enclosing_phase(op: Operation, phases: dict[Operation, Band]) -> Band | None:
    parent = op.parent_op()
    while parent is not None:
        if parent in phases:
            return phases[parent]
        parent = parent.parent_op()
    return None


def _classify_buffers(
    allocs: list[Operation], phases: list[Band]
) -> tuple[list[Operation], list[Operation]]:
    by_op = {p.op: p for p in phases}
    private: list[Operation] = []
    shared: list[Operation] = []
    for alloc in allocs:
        (private if _is_private(alloc.results[0], by_op) else shared).append(alloc)
    return private, shared


def _is_private(buffer: SSAValue, phases: dict[Operation, Band]) -> bool:
    signatures: set[tuple] = set()
    for use in buffer.uses:
        op = use.operation
        if isinstance(op, memref.DeallocOp):
            continue
        if not isinstance(op, affine.LoadOp | affine.StoreOp | PaddedLoadOp):
            return False
        if op.memref is not buffer:
            return False
        phase = _enclosing_phase(op, phases)
        if phase is None or phase.signature is None:
            return False
        m = op.map.data
        ivs = list(phase.op.induction_variables)
        if len(m.results) != len(ivs) or m.num_symbols:
            return False
        for expr, iv in zip(m.results, ivs, strict=True):
            if not (
                isinstance(expr, AffineDimExpr) and op.indices[expr.position] is iv
            ):
                return False
        signatures.add(phase.signature)
    return len(signatures) == 1


# -- barriers -----------------------------------------------------------------------------


def _access_of(op: Operation, plan: LaunchPlan) -> Access:
    """The non-private buffers `op` (and the ops nested in it) reads and writes."""
    private = {a.results[0] for a in plan.private}
    acc = Access()
    for inner in op.walk():
        if isinstance(inner, _READS) and inner.memref not in private:
            acc.reads.add(inner.memref)
        elif isinstance(inner, _WRITES) and inner.memref not in private:
            acc.writes.add(inner.memref)
    return acc


def _plan_barriers(
    plan: LaunchPlan, block: Block, pending: Access, phases: dict[Operation, Band]
) -> Access:
    """Mark the ops that need a barrier before them; return what is pending after."""
    for op in block.ops:
        if op in plan.barriers:
            pending = Access()
        if op in phases or isinstance(op, _READS):
            acc = _access_of(op, plan)
            if pending.conflicts(acc):
                plan.barriers.add(op)
                pending = Access()
            pending = pending | acc
        elif isinstance(op, affine.ForOp):
            end = _plan_barriers(plan, op.body.block, pending, phases)
            # The next trip starts with what the last one left pending.
            end = _plan_barriers(plan, op.body.block, pending | end, phases)
            pending = pending | end
        elif isinstance(op, affine.IfOp):
            ends = [
                _plan_barriers(plan, r.block, pending, phases)
                for r in (op.then_region, op.else_region)
                if r.blocks
            ]
            for end in ends:
                pending = pending | end
    return pending


# --------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------


def _constant(value: int, block_ops: list[Operation]) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, IndexType()))
    block_ops.append(c)
    return c.result


def build_launch(plan: LaunchPlan) -> gpu.LaunchOp:
    """Rewrite the plan's grid band into a `gpu.launch` (in place)."""
    grid_op = plan.grid.op
    host = grid_op.parent_block()
    assert host is not None
    sizes: list[Operation] = []
    one = _constant(1, sizes)
    grid_size = _constant(plan.grid.total, sizes)
    threads = _constant(plan.threads, sizes)
    host.insert_ops_before(sizes, grid_op)

    shared_types = []
    for alloc in plan.shared:
        t = alloc.results[0].type
        assert isinstance(t, MemRefType)
        shared_types.append(
            MemRefType(
                t.get_element_type(),
                t.get_shape(),
                memory_space=IntegerAttr(gpu.WORKGROUP_ADDRESS_SPACE, 64),
            )
        )
    body = Block(arg_types=[*gpu.LaunchOp.body_arg_types(), *shared_types])
    launch = gpu.LaunchOp(
        [grid_size, one, one],
        [threads, one, one],
        Region(body),
        workgroup_count=len(shared_types),
    )
    host.insert_op_before(launch, grid_op)
    block_id, thread_id = body.args[0], body.args[3]
    for name, arg in (("bx", block_id), ("tx", thread_id)):
        arg.name_hint = name

    # The grid's induction variables, from the block id.
    prologue: list[Operation] = []
    ivs = _band_ivs(plan.grid, block_id, None, plan.grid.total, prologue)
    body.add_ops(prologue)
    for old, new in zip(grid_op.induction_variables, ivs, strict=True):
        old.replace_all_uses_with(new)
    for op in list(grid_op.body.block.ops):
        if isinstance(op, affine.YieldOp):
            _erase(op)
            continue
        op.detach()
        body.add_op(op)

    for alloc, arg in zip(plan.shared, body.args[12:], strict=True):
        arg.name_hint = alloc.results[0].name_hint
        _drop_deallocs(alloc.results[0])
        alloc.results[0].replace_all_uses_with(arg)
        _erase(alloc)

    private: dict[SSAValue, SSAValue] = {}
    for alloc in plan.private:
        turns = plan.turns(_phase_of_private(alloc, plan))
        t = alloc.results[0].type
        assert isinstance(t, MemRefType)
        new = memref.AllocaOp.get(t.get_element_type(), shape=[turns])
        new.memref.name_hint = alloc.results[0].name_hint
        alloc.parent_block().insert_op_before(new, alloc)  # pyright: ignore
        _drop_deallocs(alloc.results[0])
        private[alloc.results[0]] = new.memref

    for site in plan.barriers:
        site.parent_block().insert_op_before(gpu.BarrierOp(), site)  # pyright: ignore
    for phase in plan.phases:
        _distribute(phase, plan, thread_id, private)

    for alloc in plan.private:
        _erase(alloc)
    for op in body.walk():
        if isinstance(op, memref.AllocOp):
            _to_alloca(op)
    body.add_op(gpu.TerminatorOp())
    _erase(grid_op)
    return launch


def _phase_of_private(alloc: Operation, plan: LaunchPlan) -> Band:
    by_op = {p.op: p for p in plan.phases}
    for use in alloc.results[0].uses:
        phase = _enclosing_phase(use.operation, by_op)
        if phase is not None:
            return phase
    raise AssertionError("a private buffer is used in a phase")


def _erase(op: Operation) -> None:
    if op.parent is not None:
        op.detach()
    op.erase()


def _drop_deallocs(buffer: SSAValue) -> None:
    for use in list(buffer.uses):
        if isinstance(use.operation, memref.DeallocOp):
            _erase(use.operation)


def _to_alloca(op: memref.AllocOp) -> None:
    t = op.memref.type
    assert isinstance(t, MemRefType)
    new = memref.AllocaOp.get(t.get_element_type(), shape=t.get_shape())
    new.memref.name_hint = op.memref.name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    _drop_deallocs(op.memref)
    op.memref.replace_all_uses_with(new.memref)
    _erase(op)


def _band_ivs(
    band: Band,
    linear_id: SSAValue,
    turn: SSAValue | None,
    threads: int,
    out: list[Operation],
) -> list[SSAValue]:
    """The band's induction variables for iteration `linear_id + turn * threads`."""
    ids: list[SSAValue] = [linear_id] + ([turn] if turn is not None else [])
    lin = AffineExpr.dimension(0)
    if turn is not None:
        lin = lin + AffineExpr.dimension(1) * threads
    extents = [d.extent for d in band.dims]
    ivs: list[SSAValue] = []
    for k, d in enumerate(band.dims):
        if d.extent == 1 and d.lower is not None:
            ivs.append(_constant(d.lower, out))
            continue
        stride = math.prod(extents[k + 1 :])
        idx = lin if stride == 1 else lin // stride
        if math.prod(extents[:k]) > 1:
            idx = idx % d.extent
        operands = list(ids)
        if d.lower is not None:
            expr = idx * d.step + d.lower if d.lower else idx * d.step
        else:
            fold = affine.MaxOp if len(d.lower_map.results) > 1 else affine.ApplyOp
            lower = fold(list(band.op.lower_bound_operands), d.lower_map)
            out.append(lower)
            operands.append(lower.result)
            expr = idx * d.step + AffineExpr.dimension(len(ids))
        apply = affine.ApplyOp(operands, AffineMap(len(operands), 0, (expr,)))
        out.append(apply)
        ivs.append(apply.result)
    for iv, old in zip(ivs, band.op.induction_variables, strict=True):
        if old.name_hint and isinstance(iv.owner, affine.ApplyOp):
            iv.name_hint = old.name_hint
    return ivs


def _distribute(
    phase: Band,
    plan: LaunchPlan,
    thread_id: SSAValue,
    private: dict[SSAValue, SSAValue],
) -> None:
    """Replace a phase by its share of iterations for the thread `thread_id`."""
    op = phase.op
    parent = op.parent_block()
    assert parent is not None
    if phase.total == 0:
        _erase(op)  # it never runs
        return
    turns = plan.turns(phase)
    threads = plan.threads
    if turns > 1:
        loop_body = Block(arg_types=[IndexType()])
        loop_body.args[0].name_hint = "j"
        loop = affine.ForOp(0, turns, loop_body)
        if turns <= MAX_UNROLLED_TURNS and _uses_any(op, private):
            loop.attributes[UNROLL] = UnitAttr()
        parent.insert_op_before(loop, op)
        site, turn = loop_body, loop_body.args[0]
    else:
        site, turn = parent, None

    ops: list[Operation] = []
    ivs = _band_ivs(phase, thread_id, turn, threads, ops)
    ids: list[SSAValue] = [thread_id] + ([turn] if turn is not None else [])

    # The guard: the iteration exists, and no partial-tile bound cuts it off.
    operands: list[SSAValue] = list(ids)
    constraints: list[AffineConstraintExpr] = []
    lin = AffineExpr.dimension(0)
    if turn is not None:
        lin = lin + AffineExpr.dimension(1) * threads
    if turns * threads > phase.total:
        constraints.append(_ge0(AffineExpr.constant(phase.total - 1) - lin))
    bound_operands = list(op.upper_bound_operands)
    for iv, d in zip(ivs, phase.dims, strict=True):
        for bound in d.guards:
            index = []
            for v in (iv, *bound_operands):
                if v not in operands:
                    operands.append(v)
                index.append(AffineExpr.dimension(operands.index(v)))
            b = bound.replace_dims_and_symbols(index[1:], [])
            constraints.append(_ge0(b - index[0] - 1))
    body_block = op.body.block
    for old, new in zip(op.induction_variables, ivs, strict=True):
        old.replace_all_uses_with(new)
    moved = [o for o in body_block.ops if not isinstance(o, affine.YieldOp)]
    for o in moved:
        o.detach()
    condition, operands = _compact_set(constraints, operands)
    if condition.constraints:
        guarded = Block()
        guarded.add_ops(moved)
        guarded.add_op(affine.YieldOp())
        ops.append(
            affine.IfOp(
                condition,
                operands,
                guarded,
                Block([affine.YieldOp()]),
            )
        )
    else:
        ops.extend(moved)
    if turn is not None:
        ops.append(affine.YieldOp())
        site.add_ops(ops)
    else:
        parent.insert_ops_before(ops, op)
    _erase(op)

    for o in moved:
        for inner in o.walk():
            if (
                isinstance(inner, affine.LoadOp | affine.StoreOp | PaddedLoadOp)
                and inner.memref in private
            ):
                _retarget(inner, private[inner.memref], turn)


def _compact_set(
    constraints: list[AffineConstraintExpr], operands: list[SSAValue]
) -> tuple[AffineSet, list[SSAValue]]:
    """The constraints simplified, over only the operands they use."""
    n = len(operands)
    exprs = [
        c.lhs.simplify(n, 0) if c.lhs.is_pure_affine() else c.lhs for c in constraints
    ]
    used = sorted(set().union(*(e.used_dims() for e in exprs))) if exprs else []
    renumber = [
        AffineExpr.dimension(used.index(d)) if d in used else AffineExpr.constant(0)
        for d in range(n)
    ]
    kept = [_ge0(e.replace_dims_and_symbols(renumber, [])) for e in exprs]
    return AffineSet(len(used), 0, tuple(kept)), [operands[d] for d in used]


def _uses_any(op: Operation, buffers: dict[SSAValue, SSAValue]) -> bool:
    return any(v in buffers for inner in op.walk() for v in inner.operands)


def _ge0(e: AffineExpr) -> AffineConstraintExpr:
    return AffineConstraintExpr(AffineConstraintKind.ge, e, AffineExpr.constant(0))


def _retarget(
    op: affine.LoadOp | affine.StoreOp | PaddedLoadOp,
    buffer: SSAValue,
    turn: SSAValue | None,
) -> None:
    """Point an access of a thread-private buffer at the thread's element `turn`."""
    if turn is None:
        m, indices = AffineMap(0, 0, (AffineExpr.constant(0),)), []
    else:
        m, indices = AffineMap(1, 0, (AffineExpr.dimension(0),)), [turn]
    if isinstance(op, affine.StoreOp):
        new: Operation = affine.StoreOp(op.value, buffer, indices, m)
    else:
        new = affine.LoadOp(buffer, indices, m)
        new.results[0].name_hint = op.results[0].name_hint
    op.parent_block().insert_op_before(new, op)  # pyright: ignore
    if op.results:
        op.results[0].replace_all_uses_with(new.results[0])
    _erase(op)
