"""What the GPU passes read off a grid-mapped band (read-only analysis).

A grid-mapped `affine.parallel` is one GPU launch: one block per grid iteration. Its
body is the *grid level*: what every thread of a block runs. There, the only ops are
phases (block- or thread-mapped bands), `affine.for`/`affine.if` around them, loads,
pure ops and buffers. `analyze_grid` checks that and returns the grid band's
geometry, its phases and its buffers; every GPU pass (placement, barriers, thread
mapping, conversion) starts from it, so each refuses the same inputs the same way.

A band's geometry (`Band`, `Dim`) is its iteration space as constants: for each
dimension the lower bound (constant, or an affine map of the band's operands), the
step, the largest trip count, and the upper bounds that can cut a partial tile
short (`min(16, 50 - %i * 16)`) as guards.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.dialects import arith, memref
from xdsl.dialects.builtin import IndexType, IntegerAttr, MemRefType, ModuleOp, NoneAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap
from xdsl.traits import Pure

from affinec.base.diagnostics import PassError
from affinec.base.element_types import memref_bytes
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import (
    BLOCK,
    GRID,
    THREAD,
    enclosing_mappings,
    mapping_of,
)
from affinec.ir.affine_exprs import Interval, grouped
from affinec.ir.effects import only_reads
from affinec.ir.ranges import as_dims, difference_range

MAX_GRID_BLOCKS = (1 << 31) - 1

ALLOCS = (memref.AllocOp, memref.AllocaOp)


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
    runtime_upper: AffineExpr | None = None
    """For the outermost dimension of a grid band whose bound is known only at run
    time (a dynamic batch): that bound, over the band's upper-bound operands as
    dims. `extent` is then the most the grid's block limit allows."""


@dataclass
class Band:
    op: affine.ParallelOp
    dims: list[Dim]

    @property
    def total(self) -> int:
        return math.prod(d.extent for d in self.dims)

    @property
    def runtime_sized(self) -> bool:
        """Whether the band's trip count is known only at run time (its outermost
        dimension's `runtime_upper`)."""
        return self.dims[0].runtime_upper is not None if self.dims else False

    @property
    def extents(self) -> list[int]:
        return [d.extent for d in self.dims]

    @property
    def signature(self) -> tuple | None:
        """Equal signatures mean equal iteration spaces (so equal distributions)."""
        if any(d.lower is None for d in self.dims):
            return None
        return tuple((d.lower, d.step, d.extent) for d in self.dims)


@dataclass
class GridAnalysis:
    """A grid-mapped band checked for the GPU: its geometry, phases and buffers."""

    grid: Band
    phases: list[Band]
    """The block- and thread-mapped bands at grid level, in program order."""
    allocs: list[Operation]
    """The buffers allocated at grid level (one set per block)."""

    def phase_of(self, op: Operation) -> Band | None:
        """The phase `op` is nested in, if any."""
        by_op = {p.op: p for p in self.phases}
        parent = op.parent_op()
        while parent is not None:
            if parent in by_op:
                return by_op[parent]
            parent = parent.parent_op()
        return None


# -- finding the bands --------------------------------------------------------------------


def grid_parallels(module: ModuleOp) -> list[affine.ParallelOp]:
    """The grid-mapped bands, after checking that mapped bands nest properly: grid
    outermost, then block or thread bands, which do not nest in each other."""
    grids: list[affine.ParallelOp] = []
    for op in module.walk():
        if not isinstance(op, affine.ParallelOp):
            continue
        level = mapping_of(op)
        enclosing = enclosing_mappings(op)
        if level == GRID:
            if enclosing:
                raise PassError(
                    op,
                    f"a grid-mapped affine.parallel inside a {enclosing[0]}-mapped one",
                )
            grids.append(op)
        elif level in (BLOCK, THREAD):
            if GRID not in enclosing:
                raise PassError(
                    op,
                    f"a {level}-mapped affine.parallel must be inside a grid-mapped one",
                )
            if inner := [m for m in enclosing if m != GRID]:
                raise PassError(
                    op,
                    f"a {level}-mapped affine.parallel inside a {inner[0]}-mapped one",
                )
    return grids


# -- geometry -------------------------------------------------------------------------------


def band_of(op: affine.ParallelOp, known: dict[SSAValue, Interval], what: str) -> Band:
    """The geometry of a mapped band; `known` bounds the values its bounds use."""
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
        if runtime := _runtime_upper(what, k, lows, ups, upper_operands, known):
            dims.append(
                Dim(0, AffineMap(lower_map.num_dims, 0, tuple(lows)), step, 0, [])
            )
            dims[-1].runtime_upper = runtime
            continue
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
    if dims and dims[0].runtime_upper is not None:
        # the trip count is bounded by the grid's block limit, all it can be
        others = math.prod(d.extent for d in dims[1:])
        dims[0].extent = MAX_GRID_BLOCKS // max(others, 1)
    return Band(op, dims)


def _runtime_upper(
    what: str,
    k: int,
    lows: list[AffineExpr],
    ups: list[AffineExpr],
    upper_operands: Sequence[SSAValue],
    known: dict[SSAValue, Interval],
) -> AffineExpr | None:
    """The bound of a grid band's outermost dimension when only the run time knows
    it (a dynamic batch: `to (symbol(%n))`), else None. Only the outermost
    dimension can be so: the block index is split into the others by their
    extents, and the outermost one takes what is left."""
    if what != "grid" or k != 0 or len(ups) != 1 or len(lows) != 1:
        return None
    if lows[0].used_dims() or lows[0].eval([], []) != 0:
        return None
    if difference_range(ups[0], upper_operands, lows[0], [], known) is not None:
        return None
    return ups[0]


def band_ivs(
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
    extents = band.extents
    ivs: list[SSAValue] = []
    for k, d in enumerate(band.dims):
        if d.extent == 1 and d.lower is not None:
            c = arith.ConstantOp(IntegerAttr(d.lower, IndexType()))
            out.append(c)
            ivs.append(c.result)
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


# -- the grid level -------------------------------------------------------------------------


def analyze_grid(grid_op: affine.ParallelOp) -> GridAnalysis:
    """Check that `grid_op` can run on a GPU and read off its structure (see the
    module docstring); every refusal is a `PassError` at the op at fault."""
    parent = grid_op.parent_op()
    if parent is None or parent.name != "func.func":
        raise PassError(
            grid_op, "a grid-mapped affine.parallel must be directly in a function body"
        )
    known: dict[SSAValue, Interval] = {}
    grid = band_of(grid_op, known, "grid")
    for k, d in enumerate(grid.dims):
        if d.extent == 0 and d.runtime_upper is None:
            raise PassError(
                grid_op,
                f"dimension {k} of the grid-mapped band has no iteration: a grid "
                "has at least one block along every dimension",
            )
    if any(d.lower is None or d.guards for d in grid.dims):
        raise PassError(grid_op, "the bounds of a grid-mapped band must be constants")
    if grid.total > MAX_GRID_BLOCKS:
        raise PassError(
            grid_op, f"{grid.total} blocks exceed the grid limit of {MAX_GRID_BLOCKS}"
        )
    for iv, d in zip(grid_op.induction_variables, grid.dims, strict=True):
        assert d.lower is not None
        known[iv] = (d.lower, d.lower + d.step * max(d.extent - 1, 0))
    analysis = GridAnalysis(grid, [], [])
    _collect(grid_op.body.block, known, analysis)
    return analysis


def _collect(block: Block, known: dict[SSAValue, Interval], into: GridAnalysis) -> None:
    """Walk the grid level (everything outside phases), collecting phases and buffers
    and refusing what all threads of a block cannot run together."""
    for op in block.ops:
        if isinstance(op, affine.ParallelOp):
            level = mapping_of(op)
            if level not in (BLOCK, THREAD):
                raise PassError(
                    op,
                    "an affine.parallel at grid level must be mapped to the block's "
                    'threads ({affinec.mapping = "block"} or "thread")',
                )
            into.phases.append(band_of(op, known, level))
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
            _collect(op.body.block, known, into)
        elif isinstance(op, affine.IfOp):
            if op.res:
                raise PassError(op, "a grid-level affine.if cannot yield values")
            for region in (op.then_region, op.else_region):
                if region.blocks:
                    _collect(region.block, known, into)
        elif isinstance(op, ALLOCS):
            t = op.memref.type
            assert isinstance(t, MemRefType)
            if op.dynamic_sizes or any(s < 0 for s in t.get_shape()):
                raise PassError(op, "buffers of a block must have a static shape")
            if not isinstance(t.layout, NoneAttr):
                raise PassError(op, "buffers of a block must have the identity layout")
            into.allocs.append(op)
        elif isinstance(
            op,
            (
                affine.YieldOp,
                memref.DeallocOp,
                gpu.BarrierOp,
                # every thread closes and waits for its own asynchronous copies
                nvgpu.DeviceAsyncCreateGroupOp,
                nvgpu.DeviceAsyncWaitOp,
                nvgpu.MBarrierCreateOp,  # the block's barriers, like its buffers
            ),
        ) or only_reads(op):
            continue
        elif not op.has_trait(Pure) or op.regions:
            raise PassError(
                op,
                "every thread of a block would run this op: only loads, pure ops, "
                "buffers, barriers, affine.for/if and block- or thread-mapped bands "
                "may sit at grid level",
            )


def byte_size(alloc: Operation) -> int:
    return memref_bytes(alloc.results[0].type)


def require_placed(analysis: GridAnalysis, pass_name: str) -> None:
    """Refuse grid-level buffers that `affinec-place-buffers` has not placed."""
    for alloc in analysis.allocs:
        space = gpu.memory_space(alloc.results[0].type)
        if space not in (gpu.WORKGROUP_ADDRESS_SPACE, gpu.PRIVATE_ADDRESS_SPACE):
            raise PassError(
                alloc,
                f"a buffer of the grid level that is neither shared (memory space "
                f"{gpu.WORKGROUP_ADDRESS_SPACE}) nor private (memory space "
                f"{gpu.PRIVATE_ADDRESS_SPACE}): run affinec-place-buffers before "
                f"{pass_name}",
            )


def is_private(buffer: SSAValue) -> bool:
    return gpu.memory_space(buffer.type) == gpu.PRIVATE_ADDRESS_SPACE


def is_shared(buffer: SSAValue) -> bool:
    """A memref in shared memory (memory space 3)."""
    return (
        isinstance(buffer.type, MemRefType)
        and gpu.memory_space(buffer.type) == gpu.WORKGROUP_ADDRESS_SPACE
    )


def reallocated_shared(alloc: Operation, shape: Sequence[int]) -> memref.AllocOp:
    """A shared buffer like `alloc`'s (its element type, name and attributes) of
    `shape`, inserted before it; the caller moves the uses and erases `alloc`."""
    t = alloc.results[0].type
    assert isinstance(t, MemRefType)
    new = memref.AllocOp(
        [],
        [],
        gpu.in_memory_space(
            MemRefType(t.get_element_type(), list(shape)), gpu.WORKGROUP_ADDRESS_SPACE
        ),
    )
    new.memref.name_hint = alloc.results[0].name_hint
    new.attributes |= alloc.attributes
    block = alloc.parent_block()
    assert block is not None
    block.insert_op_before(new, alloc)
    return new
