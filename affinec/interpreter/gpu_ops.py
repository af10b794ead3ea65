"""The gpu dialect: grids of blocks of threads, shared memory, barriers, data races.

A kernel (`gpu.func`, or the body of a `gpu.launch`) becomes a Python function that
runs one thread; its first parameter is the thread's context (`ctx.ids` holds the
block ids, thread ids, grid and block sizes, x y z each). `run_grid` runs the blocks one
after the other and, within a block, every thread: a kernel without `gpu.barrier`
runs its threads one by one to the end; with barriers it is a generator (each barrier
a `yield`), and the threads run as coroutines, each up to its next barrier, round
after round, until they all return. Threads that do not all reach the same barrier
are an error, as on the GPU.

Workgroup buffers are per block (`affinec.interpreter.shared_memory`), and record
for every element which thread wrote it and which read it in the current barrier
interval: a thread reading what another wrote, writing what another read, or two
threads writing one element, with no barrier between, is a data race and raises
`DataRaceError` — whatever order the simulation happened to run the threads in.

Warp-collective ops (`ldmatrix`, `mma.sync`) are a rendezvous of the 32 lanes of a
warp (`affinec.interpreter.warps`): each lane yields a `WarpCollective` with its
operands, and once every lane of the warp waits at the same op, the op runs for the
warp and each lane resumes with its share of the result. Only a round in which some
thread yields a collective pays for this: a kernel with barriers only checks the type
of what each thread yields. An asynchronous copy (`affinec.interpreter.async_copies`) marks its
destination pending until the wait that lands it: an access in between is a race.
"""

from __future__ import annotations

import inspect
import itertools
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Operation
from xdsl.traits import SymbolTable

from affinec.dialects import gpu
from affinec.dialects.affinec import in_grid_band
from affinec.dialects.nvvm import KERNEL
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source, emits
from affinec.interpreter.control_ops import function_global, write_body
from affinec.interpreter.llvm_ops import dynamic_spec, pointer_arguments, shared_spec
from affinec.interpreter.lockstep import write_launch_body, write_lockstep_kernel
from affinec.interpreter.lockstep_plan import (
    KernelPlan,
    plan_launch,
    plan_llvm_lockstep,
    plan_lockstep,
)
from affinec.interpreter.lockstep_runtime import check_grid, run_block
from affinec.interpreter.shared_memory import (
    BlockState,
    SharedArray,
)
from affinec.interpreter.support import (
    MAX_THREADS_PER_BLOCK,
    InterpreterError,
    StepBudget,
    check_buffer,
    describe,
    memref_shape,
    numpy_dtype,
    poisoned,
)
from affinec.interpreter.warps import Wait, WarpCollective, run_collectives


class BarrierDivergenceError(InterpreterError):
    """The threads of a block did not all reach the same barrier."""


class ThreadContext:
    """`ids`: block ids, thread ids, grid sizes, block sizes (x, y, z each);
    `copies`: the thread's asynchronous copies (`async_copies.ThreadCopies`), made
    by its first copy; `block`: its block's `BlockState`."""

    __slots__ = ("block", "copies", "ids", "linear")

    def __init__(self, ids: tuple[int, ...], block: BlockState, linear: int):
        self.ids = ids
        self.block = block
        self.linear = linear
        self.copies: Any = None


WorkgroupSpec = Sequence[tuple[str, tuple[int, ...], np.dtype]]


def run_grid(
    kernel: Callable[..., Any],
    name: str,
    grid: tuple[int, int, int],
    block: tuple[int, int, int],
    args: Sequence[Any],
    workgroup: WorkgroupSpec,
    budget: StepBudget,
    lockstep: bool = False,
) -> None:
    """Run `kernel` for every thread of every block of the grid: a block of at most
    `MAX_THREADS_PER_BLOCK` threads, every thread charged to `budget` up front. A
    `lockstep` kernel runs each block once, its threads together
    (`affinec.interpreter.lockstep`)."""
    for what, dims in (("grid", grid), ("block", block)):
        if any(d <= 0 for d in dims):
            raise InterpreterError(
                f"@{name}: {what} sizes must be positive, got {dims}"
            )
    threads = math.prod(block)
    if threads > MAX_THREADS_PER_BLOCK:
        raise InterpreterError(
            f"@{name}: a block of {threads:,} threads {block}; a GPU runs at most "
            f"{MAX_THREADS_PER_BLOCK}"
        )
    budget.threads(math.prod(grid) * threads)
    for _, shape, dtype in workgroup:
        check_buffer(shape, dtype.itemsize + SharedArray.BOOKKEEPING, "shared buffer")
    generator = inspect.isgeneratorfunction(kernel)
    gx, gy, gz = grid
    sx, sy, sz = block
    if lockstep:
        check_grid(name, grid)
    for bz, by, bx in itertools.product(range(gz), range(gy), range(gx)):
        state = BlockState(name, (bx, by, bz), block)
        shared = [SharedArray(n, s, d, state) for n, s, d in workgroup]
        if lockstep:
            ids = (bx, by, bz, 0, 0, 0, gx, gy, gz, sx, sy, sz)
            run_block(kernel, ids, state, args, shared)
            continue
        contexts = [
            ThreadContext((bx, by, bz, tx, ty, tz, gx, gy, gz, sx, sy, sz), state, t)
            for t, (tz, ty, tx) in enumerate(
                itertools.product(range(sz), range(sy), range(sx))
            )
        ]
        if not generator:
            for t, ctx in enumerate(contexts):
                state.thread = t
                kernel(ctx, *args, *shared)
            continue
        live = [
            (t, kernel(ctx, *args, *shared), None) for t, ctx in enumerate(contexts)
        ]
        while live:
            arrived: list[tuple[int, Any, Any]] = []
            sites: set[Any] = set()
            finished: list[int] = []
            collective = False
            for t, thread, _ in live:
                state.thread = t
                try:
                    site = next(thread)
                except StopIteration:
                    finished.append(t)
                    continue
                if type(site) is WarpCollective or isinstance(site, Wait):
                    collective = True
                sites.add(site)
                arrived.append((t, thread, site))
            if collective:
                arrived, finished = run_collectives(
                    arrived, finished, state, sx * sy * sz
                )
                sites = {site for _, _, site in arrived}
            if arrived and (finished or len(sites) > 1):
                what = (
                    f"{state.thread_name(finished[0])} returned"
                    if finished
                    else "others reached another barrier"
                )
                raise BarrierDivergenceError(
                    f"block {state.block} of @{name}: {state.thread_name(arrived[0][0])} "
                    f"waits at {describe(next(iter(sites)))} while {what}"
                )
            state.next_epoch()
            live = arrived


def workgroup_spec(args: Sequence[Any]) -> list[tuple[str, tuple[int, ...], np.dtype]]:
    spec = []
    for k, arg in enumerate(args):
        t = arg.type
        assert isinstance(t, MemRefType)
        spec.append(
            (
                arg.name_hint or f"workgroup{k}",
                memref_shape(t),
                numpy_dtype(t.get_element_type()),
            )
        )
    return spec


def kernel_global(module_name: str, kernel_name: str) -> str:
    return function_global(f"{module_name}::{kernel_name}")


def lockstep_plan(
    program: ProgramWriter, kernel: gpu.FuncOp | llvm.FuncOp
) -> KernelPlan | None:
    """How `kernel` (a `gpu.func`, or a kernel `llvm.func`) runs in lockstep, or
    None where it runs thread by thread."""
    if not program.lockstep:
        return None
    if kernel not in program.kernel_plans:
        plan = (
            plan_lockstep(kernel)
            if isinstance(kernel, gpu.FuncOp)
            else plan_llvm_lockstep(kernel)
        )
        program.kernel_plans[kernel] = plan
    return program.kernel_plans[kernel]


def write_kernel(
    program: ProgramWriter, module: gpu.ModuleOp, op: gpu.FuncOp
) -> Source:
    """The Python function running one thread of the `gpu.func` `op`, or one block
    of it in lockstep."""
    name = kernel_global(module.sym_name.data, op.sym_name.data)
    if (plan := lockstep_plan(program, op)) is not None:
        return write_lockstep_kernel(program, op, plan, name)
    w = FunctionWriter(program)
    ctx = w.fresh("gpu")
    w.gpu_context = ctx
    params = [w.define(a) for a in (*op.arguments, *op.workgroup_args)]
    for arg in op.private_args:
        t = arg.type
        assert isinstance(t, MemRefType)
        w.line(
            f"{w.define(arg)} = {w.global_(poisoned, 'poisoned')}({memref_shape(t)}, "
            f"{w.global_(numpy_dtype(t.get_element_type()), 'dtype')})"
        )
    write_body(w, op.body, on_return=gpu.ReturnOp)
    return w.function(f"def {name}({', '.join([ctx, *params])}):")


_ID_BASE = {
    gpu.BlockIdOp: 0,
    gpu.ThreadIdOp: 3,
    gpu.GridDimOp: 6,
    gpu.BlockDimOp: 9,
}


@emits(*_ID_BASE)
def _id(op: gpu.ThreadIdOp, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    index = _ID_BASE[type(op)] + "xyz".index(op.dim)
    w.line(f"{w.define(op.result)} = {ctx}.ids[{index}]")


@emits(gpu.GlobalIdOp)
def _global_id(op: gpu.GlobalIdOp, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    k = "xyz".index(op.dim)
    block, thread, size = _ID_BASE[gpu.BlockIdOp], _ID_BASE[gpu.ThreadIdOp], 9
    w.line(
        f"{w.define(op.result)} = {ctx}.ids[{block + k}] * {ctx}.ids[{size + k}] "
        f"+ {ctx}.ids[{thread + k}]"
    )


@emits(gpu.BarrierOp)
def _barrier(op: gpu.BarrierOp, w: FunctionWriter) -> None:
    if w.gpu_context is None and in_grid_band(op):
        # The phases of a grid band not yet mapped to threads run one after the
        # other, so there is nothing to wait for.
        w.line("pass")
        return
    _context(w, op)
    w.line(f"yield {w.op_ref(op)}")


def _context(w: FunctionWriter, op: Operation) -> str:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    return w.gpu_context


def _sizes(w: FunctionWriter, values) -> str:
    return f"({', '.join(w.names(values))})"


@emits(gpu.LaunchOp)
def _launch(op: gpu.LaunchOp, w: FunctionWriter) -> None:
    kernel, ctx = w.fresh("kernel"), w.fresh("gpu")
    block = w.single_block(op.body)
    workgroup = [w.define(a) for a in op.workgroup_args]
    outer = w.gpu_context
    plan = plan_launch(op) if w.program.lockstep else None
    with w.indented(f"def {kernel}({', '.join([ctx, *workgroup])}):"):
        w.gpu_context = ctx
        if plan is not None:
            write_launch_body(w, op, plan, ctx)
        else:
            for k, arg in enumerate(block.args[:12]):
                if arg.uses:
                    w.line(f"{w.define(arg)} = {ctx}.ids[{k}]")
            write_body(w, op.body, on_return=gpu.TerminatorOp)
    w.gpu_context = outer
    spec = w.global_(workgroup_spec(op.workgroup_args), "workgroup")
    name = repr(_launch_name(op))
    w.line(
        f"{w.global_(run_grid, 'run_grid')}({kernel}, {name}, "
        f"{_sizes(w, op.grid_sizes)}, {_sizes(w, op.block_sizes)}, (), {spec}, "
        f"{w.program.budget_name}, {plan is not None})"
    )


def _dynamic_shared_size(op: gpu.LaunchFuncOp, kernel: llvm.FuncOp) -> int:
    """The launch's bytes of dynamic shared memory: a constant (0 if not given)."""
    size = op.dynamicSharedMemorySize
    if size is None:
        return 0
    owner = size.owner
    value = getattr(owner, "value", None)
    if not isinstance(value, IntegerAttr):
        raise InterpreterError(
            "the interpreter launches with a constant dynamic shared memory size only",
            op,
        )
    return value.value.data


def _launch_name(op: Operation) -> str:
    func = op.parent_op()
    while func is not None and "sym_name" not in func.properties:
        func = func.parent_op()
    host = func.properties["sym_name"].data if func is not None else "?"  # pyright: ignore
    return f"{host} (gpu.launch)"


@emits(gpu.LaunchFuncOp)
def _launch_func(op: gpu.LaunchFuncOp, w: FunctionWriter) -> None:
    kernel = SymbolTable.lookup_symbol(op, op.kernel)
    names = w.names(op.kernelOperands)
    args = f"({', '.join(names)}{',' * (len(names) == 1)})"
    lockstep = False
    if isinstance(kernel, gpu.FuncOp) and kernel.kernel is not None:
        spec = workgroup_spec(kernel.workgroup_args)
        lockstep = lockstep_plan(w.program, kernel) is not None
    elif isinstance(kernel, llvm.FuncOp) and KERNEL in kernel.attributes:
        module = kernel.parent_op()
        assert isinstance(module, gpu.ModuleOp)
        spec = shared_spec(module) + dynamic_spec(
            kernel, _dynamic_shared_size(op, kernel), op
        )
        args = f"{w.global_(pointer_arguments, 'pointers')}({args})"
        lockstep = lockstep_plan(w.program, kernel) is not None
    else:
        raise InterpreterError(f"no kernel {op.kernel}", op)
    w.line(
        f"{w.global_(run_grid, 'run_grid')}("
        f"{kernel_global(op.module_name, op.kernel_name)}, {op.kernel_name!r}, "
        f"{_sizes(w, op.grid_sizes)}, {_sizes(w, op.block_sizes)}, "
        f"{args}, {w.global_(spec, 'workgroup')}, {w.program.budget_name}, "
        f"{lockstep})"
    )
