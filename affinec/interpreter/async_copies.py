"""Asynchronous copies (`cp.async`): data lands in shared memory at the wait, not
before, and every access in between is a data race.

Each thread keeps its copies as PTX does (`ThreadCopies`): copies started since its
last group, then its groups in the order they were made. A copy reads its source when
it starts (the source is global memory, which nothing writes meanwhile) and marks its
destination *pending*: the elements' writer becomes the copy itself
(`shared_memory.PENDING - record`), stamped with every new barrier interval, so that any
read or write of them by any thread — the copying one included — before the copy
lands is reported by the shared buffer's ordinary race check, naming the copy's op.
A copy that starts on elements another thread read or wrote in the same interval (a
stage still being read) is a race as well.

`device_async_wait {numGroups = N}` (`cp.async.wait.group N`) lands the thread's
oldest groups until at most N are left: the data is written then, by the copying
thread. Other threads see it after a barrier, as with any other write. Copies never
grouped are never landed by a wait.

    %t = nvgpu.device_async_copy %g[%i], %s[%j], 8 : memref<64xf16> to memref<64xf16, 3>
    %grp = nvgpu.device_async_create_group %t
    nvgpu.device_async_wait %grp {numGroups = 0 : i32}
    gpu.barrier
    %v = memref.load %s[%k] : memref<64xf16, 3>     // fine; without the wait: a race
"""

from __future__ import annotations

import itertools

import numpy as np
from xdsl.ir import Operation

from affinec.dialects import nvgpu, nvvm
from affinec.dialects.affinec import in_grid_band
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.lanes import checked_offsets
from affinec.interpreter.memref_ops import checked_pointer, flat_pointer
from affinec.interpreter.shared_memory import (
    PENDING,
    RELEASED,
    WARPGROUP_READER,
    SharedArray,
)
from affinec.interpreter.support import InterpreterError, describe, tuple_text
from affinec.interpreter.warps import read_row

_records = itertools.count()

_FEW = 64
"""Runs of at most this many elements are looked at as lists (`claim`)."""

NOT_LANDED = "no device_async_wait (cp.async.wait_group) has landed it yet"
"""Why a copy in flight is still in flight."""


class Copy:
    """One copy in flight: the flat destination run it will write, the values, and
    the thread that started it."""

    __slots__ = ("buffer", "op", "record", "run", "thread", "values")

    def __init__(self, op: Operation, thread: int, buffer, run: slice, values):
        self.op = op
        self.thread = thread
        self.buffer = buffer
        self.run = run
        self.values = values
        self.record = next(_records)

    def describe(self) -> str:
        return describe(self.op)

    def owner(self, index) -> int:
        """The thread that started the copy of the destination element `index`."""
        return self.thread

    def pending_reason(self) -> str:
        """Why the copy has not landed yet."""
        return NOT_LANDED

    def restamp(self, epoch: int) -> None:
        """Keep the destination pending in a new barrier interval."""
        if isinstance(self.buffer, SharedArray):
            self.buffer.stamp_writes(self.run, None, epoch)

    def land(self, epoch: int) -> None:
        """Write the data, as the copying thread, in the current interval."""
        buffer = self.buffer
        if isinstance(buffer, SharedArray):
            buffer.data[self.run] = self.values
            buffer.stamp_writes(self.run, self.thread, epoch)
        else:
            buffer[self.run] = self.values


class ThreadCopies:
    """One thread's copies: those not yet in a group, then its groups, oldest first
    (or a lockstep block's, whose threads all group and wait together)."""

    __slots__ = ("groups", "open")

    def __init__(self) -> None:
        self.open: list[Copy] = []
        self.groups: list[list[Copy]] = []


def _copies(ctx) -> ThreadCopies:
    if ctx.copies is None:
        ctx.copies = ThreadCopies()
    return ctx.copies


def start_copy(
    ctx, op: Operation, dst, dst_offset: int, src, src_offset: int, count: int, valid
) -> None:
    """Start copying `count` elements from flat `src` at `src_offset` to flat `dst`
    at `dst_offset`; only the first `valid` (all when None) are read, the rest of the
    destination is zero-filled."""
    valid = count if valid is None else int(valid)
    if not 0 <= valid <= count:
        raise InterpreterError(f"{valid} source elements for a copy of {count}", op)
    dtype = dst.dtype
    if src.dtype != dtype:
        raise InterpreterError(f"copies {src.dtype} into a buffer of {dtype}", op)
    size = count * dtype.itemsize
    for what, offset in (("source", src_offset), ("destination", dst_offset)):
        if offset * dtype.itemsize % size:
            raise InterpreterError(
                f"the {what} (element {offset}) is not aligned to the "
                f"copy's {size} bytes",
                op,
            )
    if not 0 <= dst_offset <= len(dst) - count:
        raise InterpreterError(
            f"writes elements [{dst_offset}, {dst_offset + count}) "
            f"of a buffer of {len(dst)} elements",
            op,
        )
    if valid == count:  # read_row's array is a copy of its own
        values = read_row(op, src, src_offset, valid, ctx.linear % 32)
    else:
        values = np.zeros(count, dtype)
        if valid:
            values[:valid] = read_row(op, src, src_offset, valid, ctx.linear % 32)
    state = ctx.block
    run = slice(dst_offset, dst_offset + count)
    copy = Copy(op, ctx.linear, dst, run, values)
    if isinstance(dst, SharedArray):
        claim(dst, run, copy, state)
    state.copies[copy.record] = copy
    _copies(ctx).open.append(copy)


def _overwrites(copy: Copy) -> str:
    # printed only for a race: printing every copy took a fifth of a check
    return _overwrites_text(copy.op)


def _overwrites_text(op: Operation) -> str:
    return f"starts the asynchronous copy {describe(op)}, which overwrites"


def claim(dst: SharedArray, run: slice | np.ndarray, copy: Copy, state) -> None:
    """Mark `run` (a slice of a flat buffer, or its element positions) pending for
    `copy`, unless another access of this interval (or a copy in flight) holds one
    of its elements."""
    dst.mark_lane_reads()
    t, e = copy.thread, state.epoch

    def positions() -> np.ndarray:
        return np.arange(run.start, run.stop) if isinstance(run, slice) else run

    def copying(k: int) -> int:
        state.thread = copy.owner(k)  # who the race names: the element's copier
        return k

    # Each check first asks whether any element can have the mark it looks for
    # (a write in this interval, a read in it, a release), on a thread's few
    # elements as a list (a tenth of numpy's time on so few): most copies land on
    # elements untouched since the last barrier.
    small = run.__class__ is slice and run.stop - run.start <= _FEW
    if dst.written_in[0] == e and (
        e in dst.write_epoch[run].tolist()
        if small
        else (dst.write_epoch[run] == e).any()
    ):
        writers = dst.writer[run]
        written = (dst.write_epoch[run] == e) & (writers != t)
        if written.any():
            for writer in np.unique(writers[written]):
                k = copying(int(positions()[np.argmax(written & (writers == writer))]))
                dst.conflict(k, _overwrites(copy), int(writer), overwrite=True)
    marks = dst.read_epoch[run]
    if small:
        listed = marks.tolist()
        any_read = e in listed
        any_released = bool(listed) and min(listed) <= RELEASED
    else:
        any_read = bool((marks == e).any())
        any_released = bool((marks <= RELEASED).any())
    if any_read:
        # the thread's warpgroup's own wgmma reads are done (those in flight: below)
        own = WARPGROUP_READER - t // WARPGROUP_SIZE
        readers = dst.reader[run]
        read = (marks == e) & (readers != t) & (readers != own)
        if read.any():
            k = copying(int(positions()[np.argmax(read)]))
            dst.race(
                k, f"{_overwrites(copy)} what {state.reader_name(dst.reader[k])} read"
            )
    if any_released and state.barriers is not None:
        released = marks <= RELEASED
        if released.any():
            for mark in np.unique(marks[released]):
                why = state.barriers.unacquired(int(mark), t, e)
                if why is not None:
                    k = int(positions()[np.argmax(marks == mark)])
                    dst.race(k, f"{_overwrites(copy)} {why}", barrier=False)
    for in_flight in state.wgmma_reads:
        if (
            in_flight.buffer is dst
            and (hit := in_flight.overlap(positions())) is not None
        ):
            dst.race(
                hit,
                f"{_overwrites(copy)} what {in_flight.describe()} may still be "
                "reading: no wgmma wait has retired its group",
                barrier=False,
            )
    dst.stamp_writes(run, PENDING - copy.record, e)


def create_group(ctx) -> None:
    copies = _copies(ctx)
    copies.groups.append(copies.open)
    copies.open = []


def wait_groups(ctx, pending: int) -> None:
    """Land the thread's oldest groups until at most `pending` are in flight."""
    copies = _copies(ctx)
    state = ctx.block
    while len(copies.groups) > pending:
        for copy in copies.groups.pop(0):
            copy.land(state.epoch)
            del state.copies[copy.record]


# -- a block's threads in lockstep ----------------------------------------------------------


class LaneCopy(Copy):
    """The copies one `device_async_copy` starts for a block's threads in lockstep
    (`affinec.interpreter.lockstep`): one record, `run` the destination elements of
    every lane (lane-major), `thread` the thread of each."""

    __slots__ = ()

    def owner(self, index) -> int:
        flat = (
            int(np.ravel_multi_index(index, self.buffer.source_shape))
            if (isinstance(index, tuple))
            else int(index)
        )
        return int(self.thread[int(np.argmax(self.run == flat))])


def start_lane_copies(
    ctx,
    threads: np.ndarray,
    op: Operation,
    dst,
    dst_indices,
    src,
    src_indices,
    count: int,
    valid,
) -> None:
    """`device_async_copy` for `threads` of a block in lockstep (`ctx`): the indices
    of each (arrays over the lanes, or one for all) checked as `_memref_copy` checks
    one thread's, the source only where something is read from it."""
    n = len(threads)
    reads = np.broadcast_to(count if valid is None else valid, (n,)) > 0
    dst_offset, src_offset = (
        checked_offsets(op, indices, tuple(array.shape), n, checked)
        for array, indices, checked in (
            (dst, dst_indices, True),
            (src, src_indices, reads),
        )
    )
    start_lane_run(
        ctx,
        threads,
        op,
        dst.flat_view(),
        dst_offset,
        src.reshape(-1),
        src_offset,
        count,
        valid,
    )


def start_lane_run(
    ctx,
    threads: np.ndarray,
    op: Operation,
    dst_flat,
    dst_offset: np.ndarray,
    src_flat: np.ndarray,
    src_offset: np.ndarray,
    count: int,
    valid,
) -> None:
    """Start each lane's copy of `count` elements from flat `src_flat` at its
    `src_offset` to the shared `dst_flat` at its `dst_offset` (`valid` elements
    read, one for all or one a lane; all when None), checked as `start_copy`
    checks one thread's, with the races between the lanes' runs."""
    n = len(threads)
    lanes = np.arange(n)
    valid = np.broadcast_to(count if valid is None else valid, (n,))

    def fail(k, message: str):
        ctx.block.thread = int(threads[k])
        raise InterpreterError(message, op)

    reads = valid > 0
    if ((valid < 0) | (valid > count)).any():
        k = int(np.argmax((valid < 0) | (valid > count)))
        fail(k, f"{int(valid[k])} source elements for a copy of {count}")
    if src_flat.dtype != dst_flat.dtype:
        raise InterpreterError(
            f"copies {src_flat.dtype} into a buffer of {dst_flat.dtype}", op
        )
    dst = dst_flat
    size = count * dst.dtype.itemsize
    for what, offset in (("source", src_offset), ("destination", dst_offset)):
        if (bad := (offset * dst.dtype.itemsize % size != 0)).any():
            k = int(np.argmax(bad))
            fail(
                k,
                f"the {what} (element {int(offset[k])}) is not aligned to the "
                f"copy's {size} bytes",
            )
    if (bad := (dst_offset < 0) | (dst_offset > dst_flat.data.size - count)).any():
        k = int(np.argmax(bad))
        start = int(dst_offset[k])
        fail(
            k,
            f"writes elements [{start}, {start + count}) "
            f"of a buffer of {dst_flat.data.size} elements",
        )
    if (bad := reads & ((src_offset < 0) | (src_offset > src_flat.size - valid))).any():
        k = int(np.argmax(bad))
        start = int(src_offset[k])
        fail(
            k,
            f"lane {int(threads[k]) % 32} reads elements [{start}, "
            f"{start + int(valid[k])}) of a buffer of {src_flat.size} elements",
        )
    within = np.arange(count)
    taken = within < valid[:, None]
    source = np.where(taken, src_offset[:, None] + within, 0)
    values = np.where(taken, src_flat[source], np.zeros((), dst.dtype))
    run = (dst_offset[:, None] + within).reshape(-1)
    owners = np.repeat(threads, count)
    order = np.sort(dst_offset)
    if n > 1 and (np.diff(order) < count).any():
        k = int(np.argmax(np.diff(order) < count))
        first = int(lanes[dst_offset == order[k]][0])
        second = int(lanes[dst_offset == order[k + 1]][-1])
        ctx.block.thread = int(threads[second])
        dst_flat.race(
            int(order[k + 1]),
            f"{_overwrites_text(op)} what the asynchronous copy "
            f"{describe(op)} of {ctx.block.thread_name(int(threads[first]))} may "
            f"still be writing: {NOT_LANDED}",
            barrier=False,
        )
    copy = LaneCopy(op, owners, dst_flat, run, values.reshape(-1))
    claim(dst_flat, run, copy, ctx.block)
    ctx.block.copies[copy.record] = copy
    ctx.copies.open.append(copy)


# -- emitters --------------------------------------------------------------------------


def _context(w: FunctionWriter, op: Operation) -> str:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    return w.gpu_context


def _memref_copy(ctx, op, dst, dst_indices, src, src_indices, count, valid) -> None:
    """`device_async_copy` on memrefs: the indices are checked, the source's only
    when something is read from it (a zero-filling copy may point anywhere)."""
    dst_buffer, dst_offset = checked_pointer(op, dst, dst_indices)
    read = valid is None or valid > 0
    source = checked_pointer if read else flat_pointer
    src_buffer, src_offset = source(op, src, src_indices)
    start_copy(ctx, op, dst_buffer, dst_offset, src_buffer, src_offset, count, valid)


@emits(nvgpu.DeviceAsyncCopyOp)
def _device_async_copy(op: nvgpu.DeviceAsyncCopyOp, w: FunctionWriter) -> None:
    valid = "None" if op.srcElements is None else w[op.srcElements]
    if w.gpu_context is None and in_grid_band(op):
        # A grid band not yet mapped to threads runs its bands one after the other:
        # a copy may as well land at once (its group and wait then do nothing).
        w.line(
            f"{w.global_(_sync_copy, 'sync_copy')}({w.op_ref(op)}, "
            f"{w[op.dst]}, {tuple_text(w.names(op.dstIndices))}, {w[op.src]}, "
            f"{tuple_text(w.names(op.srcIndices))}, {op.elements}, {valid})"
        )
        w.alias(op.asyncToken, "None")
        return
    ctx = _context(w, op)
    w.line(
        f"{w.global_(_memref_copy, 'async_copy')}({ctx}, {w.op_ref(op)}, "
        f"{w[op.dst]}, {tuple_text(w.names(op.dstIndices))}, {w[op.src]}, "
        f"{tuple_text(w.names(op.srcIndices))}, {op.elements}, {valid})"
    )
    w.alias(op.asyncToken, "None")


@emits(nvvm.CpAsyncOp)
def _cp_async(op: nvvm.CpAsyncOp, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    dst, src = w[op.dst], w[op.src]
    helper = w.global_(_cp_async_bytes, "cp_async")
    size = "None" if op.cpSize is None else w[op.cpSize]
    w.line(f"{helper}({ctx}, {w.op_ref(op)}, {dst}, {src}, {op.bytes}, {size})")


def _cp_async_bytes(ctx, op, dst, src, size: int, valid_bytes) -> None:
    """`cp.async` on pointers: sizes in bytes, converted to the buffers' elements."""
    itemsize = dst[0].dtype.itemsize
    valid = None
    if valid_bytes is not None:
        if valid_bytes % itemsize:
            raise InterpreterError(
                f"{valid_bytes} source bytes is not a whole number of "
                f"{dst[0].dtype} elements",
                op,
            )
        valid = valid_bytes // itemsize
    start_copy(ctx, op, dst[0], dst[1], src[0], src[1], size // itemsize, valid)


@emits(nvgpu.DeviceAsyncCreateGroupOp, nvvm.CpAsyncCommitGroupOp)
def _create_group(op: Operation, w: FunctionWriter) -> None:
    if op.results:
        w.alias(op.results[0], "None")
    if w.gpu_context is None and in_grid_band(op):
        w.line("pass")  # the copies of an unmapped grid band landed already
        return
    w.line(f"{w.global_(create_group, 'create_group')}({_context(w, op)})")


@emits(nvgpu.DeviceAsyncWaitOp, nvvm.CpAsyncWaitGroupOp)
def _wait(op: nvgpu.DeviceAsyncWaitOp | nvvm.CpAsyncWaitGroupOp, w: FunctionWriter):
    if w.gpu_context is None and in_grid_band(op):
        w.line("pass")
        return
    w.line(f"{w.global_(wait_groups, 'wait_groups')}({_context(w, op)}, {op.groups})")


def _sync_copy(op, dst, dst_indices, src, src_indices, count, valid) -> None:
    """A copy that lands at once: `valid` elements from the source (all when None),
    zeros for the rest."""
    dst_buffer, dst_offset = checked_pointer(op, dst, dst_indices)
    values = np.zeros(count, dst_buffer.dtype)
    if valid is None or valid > 0:
        src_buffer, src_offset = checked_pointer(op, src, src_indices)
        n = count if valid is None else valid
        values[:n] = src_buffer[src_offset : src_offset + n]
    dst_buffer[dst_offset : dst_offset + count] = values
