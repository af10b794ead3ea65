"""The gpu dialect: grids of blocks of threads, shared memory, barriers, data races.

A kernel (`gpu.func`, or the body of a `gpu.launch`) becomes a Python function that
runs one thread; its first parameter is the thread's context (`ctx.ids` holds the
block ids, thread ids, grid and block sizes, x y z each). `run_grid` runs the blocks one
after the other and, within a block, every thread: a kernel without `gpu.barrier`
runs its threads one by one to the end; with barriers it is a generator (each barrier
a `yield`), and the threads run as coroutines, each up to its next barrier, round
after round, until they all return. Threads that do not all reach the same barrier
are an error, as on the GPU.

Workgroup buffers are per block (`SharedArray`), and record for every element which
thread wrote it and which read it in the current barrier interval: a thread reading
what another wrote, writing what another read, or two threads writing one element,
with no barrier between, is a data race and raises `DataRaceError` — whatever order
the simulation happened to run the threads in.

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
from typing import Any, NoReturn

import numpy as np
from xdsl.dialects import llvm
from xdsl.dialects.builtin import IntegerAttr, MemRefType
from xdsl.ir import Operation
from xdsl.traits import SymbolTable

from affinec.dialects import gpu
from affinec.dialects.affinec import GRID, enclosing_mappings
from affinec.dialects.nvvm import KERNEL
from affinec.interpreter.codegen import FunctionWriter, ProgramWriter, Source, emits
from affinec.interpreter.control_ops import function_global, write_body
from affinec.interpreter.llvm_ops import dynamic_spec, pointer_arguments, shared_spec
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


class DataRaceError(InterpreterError):
    """Two threads of a block touched one shared element with no barrier between."""


class BarrierDivergenceError(InterpreterError):
    """The threads of a block did not all reach the same barrier."""


MANY_READERS = -2
"""A reader mark: more than one thread read the element in this interval."""

WARPGROUP_READER = -(1 << 20)
"""Reader marks at or below this are a warpgroup's collective reads (`wgmma`):
warpgroup `WARPGROUP_READER - mark`."""

RELEASED = -(1 << 40)
"""`read_epoch` marks at or below this are reads an mbarrier arrival released
(`mbarriers.BlockBarriers.releases`): a thread that waited for that arrival's phase
may overwrite them in the same interval."""


class BlockState:
    """What the shared buffers of the running block need to know: who runs now, and
    the asynchronous copies still in flight (by record number, see `async_copies`)."""

    __slots__ = (
        "barriers",
        "block",
        "buffers",
        "copies",
        "epoch",
        "kernel",
        "thread",
        "threads",
        "wgmma_queues",
        "wgmma_reads",
    )

    def __init__(self, kernel: str, block: tuple[int, int, int], threads: tuple):
        self.wgmma_queues: dict[int, Any] = {}
        """Each warpgroup's `wgmma`s in flight (`warpgroups.WgmmaQueue`)."""
        self.wgmma_reads: list[Any] = []
        """What the `wgmma` groups still in flight read (`warpgroups.InFlightRead`):
        no copy may land there until a wait retires them."""
        self.buffers: list[SharedArray] = []
        """The block's shared buffers, at increasing addresses."""
        self.barriers: Any = None
        """The block's mbarriers (`mbarriers.BlockBarriers`), made by the first."""
        self.kernel = kernel
        self.block = block
        self.threads = threads
        self.thread = 0
        self.epoch = 0
        self.copies: dict[int, Any] = {}

    def reader_name(self, reader: int) -> str:
        """Who a reader mark says read an element."""
        if reader == MANY_READERS:
            return "other threads"
        if reader <= WARPGROUP_READER:
            warpgroup = WARPGROUP_READER - reader
            return f"the warpgroup of {self.thread_name(warpgroup * 128)}"
        return self.thread_name(reader)

    def thread_name(self, linear: int) -> str:
        bx, by, _ = self.threads
        x, y, z = linear % bx, linear // bx % by, linear // (bx * by)
        return f"thread ({x}, {y}, {z})"

    def allocate(self, buffer: SharedArray) -> int:
        """A shared-memory address for `buffer`: after the others, on 1024 bytes
        (what any tile may need)."""
        end = 0
        if self.buffers:
            last = self.buffers[-1]
            end = last.address + last.data.nbytes
        self.buffers.append(buffer)
        return -(-end // 1024) * 1024

    def buffer_at(self, address: int) -> SharedArray | None:
        """The shared buffer holding byte `address`, if any."""
        for buffer in self.buffers:
            if buffer.address <= address < buffer.address + buffer.data.nbytes:
                return buffer
        return None

    def next_epoch(self) -> None:
        """A barrier: a new interval begins; copies in flight stay in flight."""
        self.epoch += 1
        for copy in self.copies.values():
            copy.restamp(self.epoch)


PENDING = -3
"""Writer marks at or below this (and above `LANDED`) are asynchronous copies in
flight: record `PENDING - mark` of `BlockState.copies` will write the element."""

LANDED = -(1 << 40)
"""Writer marks at or below this are TMA tiles an mbarrier phase landed: landing
`LANDED - mark` (`mbarriers.BlockBarriers`); a thread that waited for that phase may
read them."""


class SharedArray:
    """A workgroup buffer of one block, checked for data races element by element."""

    BOOKKEEPING = 32
    """Bytes per element beyond the data: who wrote and read it, and when."""

    __slots__ = (
        "_flat",
        "address",
        "data",
        "name",
        "read_epoch",
        "reader",
        "shape",
        "source_shape",
        "state",
        "write_epoch",
        "writer",
        "written_in",
    )

    def __init__(self, name: str, shape: tuple[int, ...], dtype: np.dtype, state):
        self.name = name
        self.shape = shape
        self.source_shape = shape
        """The shape errors name elements in (the buffer's own, for a flat view)."""
        self.state: BlockState = state
        self.data = poisoned(shape, dtype)
        self.writer = np.full(shape, -1, np.int64)
        self.write_epoch = np.full(shape, -1, np.int64)
        self.reader = np.full(shape, -1, np.int64)
        self.read_epoch = np.full(shape, -1, np.int64)
        self.written_in = [-1]
        """The last interval whose `write_epoch` marks anything (shared with the flat
        view): a read in another interval needs no look at the writer marks."""
        self._flat: SharedArray | None = None
        self.address = state.allocate(self)
        """The byte address of the buffer in the block's shared memory (the
        interpreter's own layout, for `llvm.ptrtoint` and `wgmma` descriptors)."""

    def flat_view(self) -> SharedArray:
        """A one-dimensional view of the buffer (and of its race records), as a
        pointer sees it; errors still name elements by the buffer's shape."""
        if len(self.shape) == 1:
            return self
        if self._flat is None:
            view = object.__new__(SharedArray)
            view.name = self.name
            view.shape = (self.data.size,)
            view.source_shape = self.shape
            view.state = self.state
            view.address = self.address
            for field in ("data", "writer", "write_epoch", "reader", "read_epoch"):
                setattr(view, field, getattr(self, field).reshape(-1))
            view.written_in = self.written_in
            view._flat = None
            self._flat = view
        return self._flat

    @property
    def dtype(self) -> np.dtype:
        return self.data.dtype

    def read_run(self, start: int, count: int, what: str) -> np.ndarray:
        """Elements [start, start + count) of a flat view, read by the running thread
        (race-checked like `__getitem__`; `what` names the reading op)."""
        state = self.state
        run = slice(start, start + count)
        return self._read_vector(run, state.thread, state.epoch, f"reads ({what})")

    def conflict(self, index, verb: str, writer: int, overwrite: bool = False) -> None:
        """Raise the race of the running thread's access `verb` ("reads") to an
        element last written in this interval by `writer` (a thread, a copy in
        flight, or a TMA landing), unless the thread waited for that landing (or,
        for a copy `overwrite`-ing it, started the landed load itself: its bytes
        have arrived)."""
        state = self.state
        if writer <= LANDED:
            if state.barriers.visible(writer, state.thread, overwrite):
                return
            self.race(index, f"{verb} {state.barriers.unseen(writer)}", barrier=False)
        copy = state.copies.get(PENDING - writer) if writer <= PENDING else None
        if copy is not None:
            self.race(
                index,
                f"{verb} what the asynchronous copy {copy.describe()} of "
                f"{state.thread_name(copy.thread)} may still be writing: "
                f"{copy.pending_reason()}",
                barrier=False,
            )
        self.race(index, f"{verb} what {state.thread_name(writer)} wrote")

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 1

    def stamp_writes(self, index, writer, epoch: int) -> None:
        """Mark elements `index` written in interval `epoch` by `writer` (a thread, a
        copy in flight, a TMA landing; None keeps each element's writer): every
        write mark goes through here, so that `written_in` stays true."""
        if writer is not None:
            self.writer[index] = writer
        self.write_epoch[index] = epoch
        if epoch > self.written_in[0]:
            self.written_in[0] = epoch

    def __getitem__(self, index):
        # a scalar access's index is an int or a tuple of ints; a run ends in a slice
        cls = index.__class__
        if cls is slice or (cls is tuple and index and index[-1].__class__ is slice):
            state = self.state
            return self._read_vector(index, state.thread, state.epoch)
        state = self.state
        t, e = state.thread, state.epoch
        if (
            self.written_in[0] == e
            and self.write_epoch[index] == e
            and self.writer[index] != t
        ):
            self.conflict(index, "reads", self.writer[index])
        read_epoch = self.read_epoch
        if read_epoch[index] != e:
            read_epoch[index] = e
            self.reader[index] = t
        else:
            reader = self.reader
            if (who := reader[index]) != t and who != MANY_READERS:
                reader[index] = MANY_READERS
        return self.data[index]

    def __setitem__(self, index, value) -> None:
        state = self.state
        t, e = state.thread, state.epoch
        cls = index.__class__
        if cls is slice or (cls is tuple and index and index[-1].__class__ is slice):
            self._write_vector(index, value, t, e)
            return
        if self.write_epoch[index] == e and self.writer[index] != t:
            self.conflict(index, "writes", self.writer[index])
        if self.read_epoch[index] == e and self.reader[index] != t:
            who = self.reader[index]
            other = state.reader_name(who)
            self.race(index, f"writes what {other} read")
        self.stamp_writes(index, t, e)
        self.data[index] = value

    def read_rows(
        self, starts: np.ndarray, count: int, threads: np.ndarray
    ) -> np.ndarray | None:
        """Runs of `count` elements of a flat view from each of `starts`, run k read
        by thread `threads[k]` (the rows of one `ldmatrix`), all at once: the same
        marks as `read_run` run after run (the threads distinct). None, having changed
        nothing, where something may be wrong (a run out of bounds, an element
        written in this interval): the caller then reads run by run, which says
        what."""
        if starts.min() < 0 or starts.max() > self.data.size - count:
            return None
        positions = (starts[:, None] + np.arange(count)).reshape(-1)
        readers = np.repeat(threads, count)
        e = self.state.epoch
        if self.written_in[0] == e and (self.write_epoch[positions] == e).any():
            return None
        shared = (self.read_epoch[positions] == e) & (self.reader[positions] != readers)
        self.read_epoch[positions] = e
        self.reader[positions] = np.where(shared, MANY_READERS, readers)
        if (np.diff(np.sort(starts)) < count).any():  # runs overlap
            unique, times = np.unique(positions, return_counts=True)
            self.reader[unique[times > 1]] = MANY_READERS
        return self.data[positions].reshape(len(starts), count)

    def _read_vector(
        self, index: tuple | slice, t: int, e: int, verb: str = "reads"
    ) -> np.ndarray:
        """A run's elements (`index` a slice or ending in one), race-checked as
        `__getitem__` checks one."""
        if self.written_in[0] == e:
            clash = (self.write_epoch[index] == e) & (self.writer[index] != t)
            if clash.any():
                self._conflicts(index, clash, verb)
        fresh = self.read_epoch[index] != e
        shared = ~fresh & (self.reader[index] != t)
        self.read_epoch[index] = e
        self.reader[index] = np.where(fresh, t, np.where(shared, MANY_READERS, t))
        return self.data[index].copy()

    def _write_vector(self, index: tuple | slice, value, t: int, e: int) -> None:
        """A vector store's elements (`index` ends in a slice), race-checked as
        `__setitem__` checks one."""
        clash = (self.write_epoch[index] == e) & (self.writer[index] != t)
        if clash.any():
            self._conflicts(index, clash, "writes")
        read = (self.read_epoch[index] == e) & (self.reader[index] != t)
        if read.any():
            k = _element(index, int(np.argmax(read)))
            who = self.reader[k]
            other = self.state.reader_name(who)
            self.race(k, f"writes what {other} read")
        self.stamp_writes(index, t, e)
        self.data[index] = value

    def _conflicts(self, index: tuple | slice, clash: np.ndarray, verb: str) -> None:
        """`conflict` for the first element of each writer among the clashing
        elements of a run."""
        writers = self.writer[index]
        for writer in np.unique(writers[clash]):
            k = _element(index, int(np.argmax(clash & (writers == writer))))
            self.conflict(k, verb, int(writer))

    def race(self, index, what: str, barrier: bool = True) -> NoReturn:
        state = self.state
        if isinstance(index, tuple):
            where = [int(i) for i in index]
        elif self.source_shape != self.shape:
            where = [int(i) for i in np.unravel_index(int(index), self.source_shape)]
        else:
            where = [int(index)]
        raise DataRaceError(
            f"data race on shared memory %{self.name}{where} in block {state.block} "
            f"of @{state.kernel}: {state.thread_name(state.thread)} {what}"
            + (" with no gpu.barrier between them" if barrier else "")
        )


class SharedView:
    """A view of a shared buffer (`memref.subview` or `memref.reinterpret_cast` of a
    workgroup buffer): its first element (`offset` into the flat buffer, where a TMA
    box or a wgmma tile starts) and row-major `strides`; elements are written
    through it (an accumulator stored into part of a tile), not read."""

    __slots__ = ("buffer", "offset", "shape", "strides")

    def __init__(
        self,
        buffer: SharedArray,
        offset: int,
        shape: tuple[int, ...],
        strides: tuple[int, ...] | None = None,
    ):
        self.buffer = buffer
        self.offset = offset
        self.shape = shape
        if strides is None:
            strides = tuple(math.prod(shape[k + 1 :]) for k in range(len(shape)))
        self.strides = strides

    def __getitem__(self, index):
        raise InterpreterError(
            f"reads a view of %{self.buffer.name}: the interpreter takes views of "
            "shared memory as TMA destinations, wgmma tiles and stores only"
        )

    def __setitem__(self, index, value) -> None:
        if not isinstance(index, tuple) or any(
            not 0 <= i < n for i, n in zip(index, self.shape, strict=True)
        ):
            raise InterpreterError(
                f"writes element {index} of a view of %{self.buffer.name} of shape "
                f"{self.shape}"
            )
        flat = self.offset + sum(
            i * t for i, t in zip(index, self.strides, strict=True)
        )
        self.buffer[flat] = value


def shared_subview(op, source: SharedArray, offsets, shape) -> SharedView:
    """The view of `source` from element `offsets` (its first element's address)."""
    flat = 0
    for o, n in zip(offsets, source.shape, strict=True):
        flat = flat * n + o
    return SharedView(source.flat_view(), flat, tuple(shape))


def _element(index: tuple | slice, k: int):
    """Element `k` of the run `index` names."""
    if isinstance(index, slice):
        return index.start + k
    return (*index[:-1], index[-1].start + k)


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
) -> None:
    """Run `kernel` for every thread of every block of the grid: a block of at most
    `MAX_THREADS_PER_BLOCK` threads, every thread charged to `budget` up front."""
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
    for bz, by, bx in itertools.product(range(gz), range(gy), range(gx)):
        state = BlockState(name, (bx, by, bz), block)
        shared = [SharedArray(n, s, d, state) for n, s, d in workgroup]
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


def write_kernel(
    program: ProgramWriter, module: gpu.ModuleOp, op: gpu.FuncOp
) -> Source:
    """The Python function running one thread of the `gpu.func` `op`."""
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
    name = kernel_global(module.sym_name.data, op.sym_name.data)
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


def in_grid_band(op: Operation) -> bool:
    return GRID in enclosing_mappings(op)


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
    with w.indented(f"def {kernel}({', '.join([ctx, *workgroup])}):"):
        w.gpu_context = ctx
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
        f"{w.program.budget_name})"
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
    if isinstance(kernel, gpu.FuncOp) and kernel.kernel is not None:
        spec = workgroup_spec(kernel.workgroup_args)
    elif isinstance(kernel, llvm.FuncOp) and KERNEL in kernel.attributes:
        module = kernel.parent_op()
        assert isinstance(module, gpu.ModuleOp)
        spec = shared_spec(module) + dynamic_spec(
            kernel, _dynamic_shared_size(op, kernel), op
        )
        args = f"{w.global_(pointer_arguments, 'pointers')}({args})"
    else:
        raise InterpreterError(f"no kernel {op.kernel}", op)
    w.line(
        f"{w.global_(run_grid, 'run_grid')}("
        f"{kernel_global(op.module_name, op.kernel_name)}, {op.kernel_name!r}, "
        f"{_sizes(w, op.grid_sizes)}, {_sizes(w, op.block_sizes)}, "
        f"{args}, {w.global_(spec, 'workgroup')}, {w.program.budget_name})"
    )
