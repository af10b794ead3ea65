"""A block's threads run together, as numpy vectors: a kernel in lockstep.

`gpu_ops.run_grid` runs a kernel thread by thread (coroutines that meet at each
barrier), so every op costs a Python statement per thread. Here, where the kernel
allows it, a block runs once: a value that differs between threads is an array over
them (its *lanes*, thread `lanes[k]` in lane k), shared memory is read and written a
vector of elements at a time, and a private buffer (`memref.alloca`) is one buffer
per thread. The rest of the kernel, uniform, is written by the ordinary emitters.

    %tx = gpu.thread_id x                    tx = lanes % 64
    affine.for %j = 0 to 13 {                for j in range(0, 13):
      affine.if #guard(%tx, %j) {              taken = flatnonzero(guard(tx, j))
        nvgpu.device_async_copy ...              if taken.size:  # those threads
      }                                            tx' = tx[taken]; lanes' = lanes[taken]
    }                                              copies(...)
    nvgpu.device_async_wait ...              wait(...)
    gpu.barrier                              next_epoch()
    %a = affine.load %s[%tx]                 a = s.read_lanes(tx, lanes)

An `affine.if` whose condition differs between threads runs each branch on the
threads that take it: their values gathered, the branch sees shorter arrays, and its
results are scattered back. Barriers, copy groups and waits must be reached by all
the block's threads at once (outside such a branch), and loop bounds must be the same
for every thread; a kernel that does not allow this, or holds an op without a
lockstep form here, runs thread by thread (`plan_lockstep` says which).

Shared memory keeps its race records: a vector of accesses marks each element as the
threads' accesses one after the other would (`SharedArray.read_lanes`,
`write_lanes`), and a race is reported whichever order the accesses come in. For a
kernel without races the results are the thread-by-thread ones, bit for bit: every
thread runs its own ops in order, and numpy rounds an array of floats as it rounds
one (`Interpreter(lockstep=False)` keeps the coroutines, to compare).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from xdsl.dialects import memref
from xdsl.dialects.builtin import IndexType, IntegerType, MemRefType
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineMap
from xdsl.traits import is_side_effect_free

from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import PaddedLoadOp
from affinec.interpreter import async_copies
from affinec.interpreter.affine_ops import (
    for_bounds,
    if_condition,
    map_ranges,
    map_results,
)
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source
from affinec.interpreter.lanes import (
    ELEMENTWISE,
    MAX_PRIVATE_BYTES_PER_LANE,
    LanePlan,
    LaneWriter,
    buffer_bytes,
    check_lanes,
    indices_fit,
)
from affinec.interpreter.memref_ops import named_indices, proven_inside
from affinec.interpreter.shared_memory import BlockState, SharedArray
from affinec.interpreter.support import (
    MAX_THREADS_PER_BLOCK,
    InterpreterError,
    access_shape,
    memref_shape,
    numpy_dtype,
    poisoned,
    shape_text,
)
from affinec.ir import ranges
from affinec.ir.affine_exprs import Interval, to_python

# -- which kernels run in lockstep ----------------------------------------------------------


@dataclass
class KernelPlan(LanePlan):
    """A `LanePlan` over a block's threads, with the kernel's shared buffers and
    its global arrays (the kernel's arguments)."""

    shared: set[SSAValue] = field(default_factory=set)
    arrays: set[SSAValue] = field(default_factory=set)
    known: dict[SSAValue, Interval] = field(default_factory=dict)
    """The ranges of thread and block ids that say nothing of their own (the
    limits of any launch), for `indices_fit`."""


def plan_lockstep(kernel: gpu.FuncOp) -> KernelPlan | None:
    """The lockstep plan of `kernel`, or None where it runs thread by thread."""
    if len(kernel.body.blocks) != 1:
        return None
    block = kernel.body.block
    if not isinstance(block.last_op, gpu.ReturnOp) or block.last_op.operands:
        return None
    plan = KernelPlan(
        private=set(kernel.private_args),
        shared=set(kernel.workgroup_args),
        arrays={a for a in kernel.arguments if isinstance(a.type, MemRefType)},
    )
    if any(not _small(a.type) for a in kernel.private_args):
        return None
    for op in kernel.walk():
        ids = isinstance(op, gpu.ThreadIdOp | gpu.BlockIdOp | gpu.GlobalIdOp)
        if ids and ranges.value_range(op.result) is None:
            plan.known[op.result] = _ID_RANGES[type(op)]
    return plan if _block_takes(block, plan, False) else None


MAX_GRID_BLOCKS = (1 << 31) - 1
"""The most blocks a launch has along a dimension (a lockstep block's ids must fit
the ranges its index arithmetic was checked against)."""

_ID_RANGES = {
    gpu.ThreadIdOp: (0, MAX_THREADS_PER_BLOCK - 1),
    gpu.BlockIdOp: (0, MAX_GRID_BLOCKS - 1),
    gpu.GlobalIdOp: (0, MAX_GRID_BLOCKS * MAX_THREADS_PER_BLOCK - 1),
}


def _small(t) -> bool:
    return (
        isinstance(t, MemRefType)
        and min(t.get_shape(), default=0) >= 0
        and buffer_bytes(t) <= MAX_PRIVATE_BYTES_PER_LANE
    )


def _block_takes(block: Block, plan: KernelPlan, divergent: bool) -> bool:
    return all(_op_takes(op, plan, divergent) for op in block.ops)


def _op_takes(op: Operation, plan: KernelPlan, divergent: bool) -> bool:
    """Whether `op` runs in lockstep (`divergent`: inside a branch some threads
    skip), recording in `plan` the values that differ between threads."""
    match op:
        case gpu.ReturnOp():
            return isinstance(op.parent_op(), gpu.FuncOp)
        case affine.YieldOp():
            return True
        case gpu.ThreadIdOp() | gpu.GlobalIdOp():
            plan.varying.add(op.result)
            return True
        case gpu.BarrierOp() | nvgpu.DeviceAsyncCreateGroupOp():
            return not divergent
        case nvgpu.DeviceAsyncWaitOp():
            return not divergent
        case nvgpu.DeviceAsyncCopyOp():
            return op.dst in plan.shared and op.src in plan.arrays
        case affine.ForOp():
            bounds = (*op.lowerBoundOperands, *op.upperBoundOperands)
            if op.iter_args or plan.differ(bounds):
                return False
            return _block_takes(op.body.block, plan, divergent)
        case affine.IfOp():
            s = op.condition.data
            condition = AffineMap(
                s.num_dims, s.num_symbols, tuple(c.lhs - c.rhs for c in s.constraints)
            )
            differs = plan.differ(op.args)
            if differs and not indices_fit(condition, op.args, plan.known):
                return False
            regions = [r.block for r in (op.then_region, op.else_region) if r.blocks]
            if not all(_block_takes(b, plan, divergent or differs) for b in regions):
                return False
            yields = [v for b in regions for v in b.last_op.operands]  # pyright: ignore
            if differs or plan.differ(yields):
                plan.varying.update(op.results)
            return True
        case memref.AllocaOp():
            if divergent or not _small(op.memref.type):
                return False
            plan.private.add(op.memref)
            return True
        case affine.LoadOp() | PaddedLoadOp() | affine.StoreOp():
            known = plan.shared | plan.private | plan.arrays
            if op.memref not in known or not indices_fit(
                op.map.data, op.indices, plan.known
            ):
                return False
            if isinstance(op, PaddedLoadOp) and op.memref not in plan.arrays:
                return False
            if op.memref not in plan.arrays or plan.differ(op.indices):
                plan.varying.update(op.results)
            return True
        case affine.ApplyOp() | affine.MinOp() | affine.MaxOp():
            if plan.differ(op.mapOperands):
                if not indices_fit(op.map.data, op.mapOperands, plan.known):
                    return False
                plan.varying.add(op.result)
            return True
    if op.regions or any(isinstance(v.type, MemRefType) for v in op.operands):
        return False
    if not plan.differ(op.operands):
        return is_side_effect_free(op)  # the same for every thread: computed once
    if isinstance(op, ELEMENTWISE):
        plan.varying.update(op.results)
        return True
    return False


# -- what the generated code calls ----------------------------------------------------------


class LockstepContext:
    """A block in lockstep: `ids` as a thread's context has them (the thread ids
    unused), `lanes` the threads running now, `block` the `BlockState`, `copies`
    the block's asynchronous copies (`async_copies.LaneCopies`)."""

    __slots__ = ("block", "copies", "ids", "lanes")

    def __init__(self, ids: tuple[int, ...], block: BlockState, lanes: np.ndarray):
        self.ids = ids
        self.block = block
        self.lanes = lanes
        self.copies = async_copies.LaneCopies()


def run_block(
    kernel: Callable[..., Any],
    ids: tuple[int, ...],
    state: BlockState,
    args: Sequence[Any],
    shared: Sequence[SharedArray],
) -> None:
    """Run one block of `kernel` in lockstep (`gpu_ops.run_grid` checked the
    launch and made the block's state and shared buffers)."""
    if max(ids[6:9]) > MAX_GRID_BLOCKS:
        raise InterpreterError(
            f"@{state.kernel}: a grid of {ids[6:9]} blocks; a GPU launches at most "
            f"{MAX_GRID_BLOCKS} along a dimension"
        )
    lanes = np.arange(math.prod(state.threads), dtype=np.int64)
    kernel(LockstepContext(ids, state, lanes), *args, *shared)


def thread_ids(lanes: np.ndarray, block: tuple[int, ...], dim: int) -> np.ndarray:
    """The `dim` (x, y, z) thread id of each of `lanes` (linear thread numbers)."""
    sx, sy, _ = block
    if dim == 0:
        return lanes % sx
    return lanes // sx % sy if dim == 1 else lanes // (sx * sy)


# -- writing a kernel in lockstep -----------------------------------------------------------


def write_lockstep_kernel(
    program: ProgramWriter, op: gpu.FuncOp, plan: KernelPlan, name: str
) -> Source:
    """The Python function running one block of the `gpu.func` `op` in lockstep."""
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in (*op.arguments, *op.workgroup_args)]
    writer = _KernelWriter(w, plan, ctx)
    w.line(f"{writer.lane} = {ctx}.lanes")
    w.line(f"{writer.count} = len({writer.lane})")
    for arg in op.private_args:
        writer.private_buffer(arg)
    writer.block(op.body.block)
    w.line("return ()")
    return w.function(f"def {name}({', '.join([ctx, *params])}):")


class _KernelWriter(LaneWriter):
    """Writes a kernel's ops for the block's threads: `lane` names the threads
    running now (linear numbers), `count` how many."""

    def __init__(self, w: FunctionWriter, plan: KernelPlan, ctx: str) -> None:
        super().__init__(w, plan)
        self.kernel_plan = plan
        self.ctx = ctx

    def op(self, op: Operation) -> None:
        emit = _KERNEL_EMITTERS.get(type(op))
        if emit is not None:
            emit(self, op)
        elif isinstance(op, gpu.ReturnOp):
            pass  # the function's own `return`, after the body
        else:
            super().op(op)

    def private_buffer(self, value: SSAValue) -> None:
        """One buffer of `value`'s type per thread of the block."""
        w = self.w
        t = value.type
        assert isinstance(t, MemRefType)
        shape = memref_shape(t)
        dtype = w.global_(numpy_dtype(t.get_element_type()), "dtype")
        buffer = w.global_(poisoned, "poisoned")
        w.line(f"{w.define(value)} = {buffer}(({self.count},) + {shape}, {dtype})")

    def on_lanes(self, taken: str, region: Block) -> dict[SSAValue, str]:
        """Rebind every value the region uses that differs between threads to its
        lanes `taken`; return the old names (for `restore`)."""
        w, plan = self.w, self.kernel_plan
        inside = {r for op in region.walk() for r in op.results} | {
            a
            for op in region.walk()
            for r in op.regions
            for b in r.blocks
            for a in b.args
        }
        used = {
            v
            for op in region.walk()
            for v in op.operands
            if v in plan.varying and v not in inside
        }
        old = {}
        for v in sorted(used, key=lambda v: w[v]):
            old[v] = w[v]
            w.line(f"{w.define(v)} = {old[v]}[{taken}]")
        return old

    def restore(self, old: dict[SSAValue, str]) -> None:
        for v, name in old.items():
            self.w.alias(v, name)


def _thread_id(kw: _KernelWriter, op: gpu.ThreadIdOp | gpu.GlobalIdOp) -> None:
    w = kw.w
    dim = "xyz".index(op.dim)
    ids = w.global_(thread_ids, "thread_ids")
    text = f"{ids}({kw.lane}, {kw.ctx}.ids[9:12], {dim})"
    if isinstance(op, gpu.GlobalIdOp):
        text = f"{kw.ctx}.ids[{dim}] * {kw.ctx}.ids[{9 + dim}] + {text}"
    w.line(f"{w.define(op.result)} = {text}")


def _barrier(kw: _KernelWriter, op: gpu.BarrierOp) -> None:
    kw.w.line(f"{kw.ctx}.block.next_epoch()")


def _for(kw: _KernelWriter, op: affine.ForOp) -> None:
    w = kw.w
    iv = w.define(op.induction_variable)
    spend = w.global_(w.program.budget.spend_each, "spend_each")
    with w.indented(f"for {iv} in {spend}({kw.count}, {for_bounds(op, w)}):"):
        kw.block(op.body.block)


def _if(kw: _KernelWriter, op: affine.IfOp) -> None:
    w, plan = kw.w, kw.kernel_plan
    regions = [r.block for r in (op.then_region, op.else_region) if r.blocks]
    if not plan.differ(op.args):
        for result in op.results:
            w.define(result)
        for k, block in enumerate(regions):
            with w.indented(f"if {if_condition(op, w)}:" if k == 0 else "else:"):
                kw.block(block)
                for result, value in zip(op.results, _yielded(block), strict=True):
                    text = w[value]
                    if result in plan.varying and value not in plan.varying:
                        text = f"{w.global_(np.full, 'full')}({kw.count}, {text})"
                    w.line(f"{w[result]} = {text}")
        return
    s = op.condition.data
    names = w.names(op.args)
    dims, syms = names[: s.num_dims], names[s.num_dims :]
    tests = [
        f"({to_python(c.lhs - c.rhs, dims, syms)} {c.kind.value} 0)"
        for c in s.constraints
    ]
    condition = w.fresh("condition")
    broadcast = w.global_(np.broadcast_to, "broadcast_to")
    w.line(f"{condition} = {broadcast}({' & '.join(tests) or 'True'}, ({kw.count},))")
    for result in op.results:
        t = result.type
        dtype = np.dtype(np.int64) if isinstance(t, IndexType | IntegerType) else None
        dtype = w.global_(dtype or numpy_dtype(t), "dtype")
        empty = w.global_(poisoned, "poisoned")
        w.line(f"{w.define(result)} = {empty}(({kw.count},), {dtype})")
    nonzero = w.global_(np.flatnonzero, "flatnonzero")
    for k, block in enumerate(regions):
        taken = w.fresh("taken")
        w.line(f"{taken} = {nonzero}({'~' if k else ''}{condition})")
        with w.indented(f"if {taken}.size:"):
            old = kw.on_lanes(taken, block)
            lane, count = kw.lane, kw.count
            kw.lane, kw.count = w.fresh("lane"), w.fresh("lane_count")
            w.line(f"{kw.lane} = {lane}[{taken}]")
            w.line(f"{kw.count} = {taken}.size")
            kw.block(block)
            for result, value in zip(op.results, _yielded(block), strict=True):
                w.line(f"{w[result]}[{taken}] = {w[value]}")
            kw.lane, kw.count = lane, count
            kw.restore(old)


def _yielded(block: Block) -> Sequence[SSAValue]:
    term = block.last_op
    assert isinstance(term, affine.YieldOp)
    return term.operands


def _alloca(kw: _KernelWriter, op: memref.AllocaOp) -> None:
    kw.private_buffer(op.memref)


def _access(kw: _KernelWriter, op: affine.LoadOp | PaddedLoadOp | affine.StoreOp):
    w, plan = kw.w, kw.kernel_plan
    if op.memref in plan.arrays:
        # global memory: as a band's lanes (a gather, a scatter), or once where the
        # access is the same for every thread
        if plan.differ((*op.operands, *op.results)):
            LaneWriter.op(kw, op)
        else:
            w.emit_op(op)
        return
    t = op.memref.type
    assert isinstance(t, MemRefType)
    shape = access_shape(t, w[op.memref])
    names = named_indices(w, map_results(w, op.map.data, op.indices))
    ranges = map_ranges(w, op.map.data, op.indices)
    dims = tuple(
        k
        for k, (r, dim) in enumerate(zip(ranges, shape, strict=True))
        if not proven_inside(r, dim)
    )
    index = _tuple(names)
    if dims:
        check = w.global_(check_lanes, "check_lanes")
        w.line(f"{check}({w.op_ref(op)}, {shape_text(shape)}, {index}, {dims})")
    array = w[op.memref]
    if op.memref in plan.private:
        full = ", ".join([kw.lane, *names])
        if isinstance(op, affine.StoreOp):
            w.line(f"{array}[{full}] = {w[op.value]}")
        else:
            w.line(f"{w.define(op.result)} = {array}[{full}]")
        return
    position = w.fresh("position")
    w.line(f"{position} = {_row_major(names, shape)}")
    if isinstance(op, affine.StoreOp):
        w.line(f"{array}.write_lanes({position}, {w[op.value]}, {kw.lane})")
    else:
        w.line(f"{w.define(op.result)} = {array}.read_lanes({position}, {kw.lane})")


def _row_major(names: Sequence[str], shape: Sequence[Any]) -> str:
    """The row-major position of the element at `names` in `shape`."""
    text = names[0] if names else "0"
    for name, dim in zip(names[1:], shape[1:], strict=True):
        text = f"({text}) * {dim} + {name}"
    return text


def _tuple(names: Sequence[str]) -> str:
    return f"({', '.join(names)}{',' * (len(names) == 1)})"


def _async_copy(kw: _KernelWriter, op: nvgpu.DeviceAsyncCopyOp) -> None:
    w = kw.w
    valid = "None" if op.srcElements is None else w[op.srcElements]
    start = w.global_(async_copies.start_lane_copies, "lane_copies")
    w.line(
        f"{start}({kw.ctx}, {kw.lane}, {w.op_ref(op)}, {w[op.dst]}, "
        f"{_tuple(w.names(op.dstIndices))}, {w[op.src]}, "
        f"{_tuple(w.names(op.srcIndices))}, {op.elements}, {valid})"
    )
    w.alias(op.asyncToken, "None")


def _create_group(kw: _KernelWriter, op: nvgpu.DeviceAsyncCreateGroupOp) -> None:
    kw.w.alias(op.results[0], "None")
    kw.w.line(
        f"{kw.w.global_(async_copies.create_lane_group, 'create_group')}({kw.ctx})"
    )


def _wait(kw: _KernelWriter, op: nvgpu.DeviceAsyncWaitOp) -> None:
    wait = kw.w.global_(async_copies.wait_lane_groups, "wait_groups")
    kw.w.line(f"{wait}({kw.ctx}, {op.groups})")


_KERNEL_EMITTERS: dict[type[Operation], Callable[[_KernelWriter, Any], None]] = {
    gpu.ThreadIdOp: _thread_id,
    gpu.GlobalIdOp: _thread_id,
    gpu.BarrierOp: _barrier,
    affine.ForOp: _for,
    affine.IfOp: _if,
    memref.AllocaOp: _alloca,
    affine.LoadOp: _access,
    PaddedLoadOp: _access,
    affine.StoreOp: _access,
    nvgpu.DeviceAsyncCopyOp: _async_copy,
    nvgpu.DeviceAsyncCreateGroupOp: _create_group,
    nvgpu.DeviceAsyncWaitOp: _wait,
}
"""The ops written differently for a block's threads; the others as a band's lanes
(`LaneWriter`) or, the same for every thread, by their ordinary emitters."""
