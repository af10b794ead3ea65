"""A block's shared memory as the interpreter keeps it: every element of a workgroup
buffer (`SharedArray`) records which thread wrote it and which read it in the
current barrier interval (`BlockState.epoch`), so that a thread reading what another
wrote, writing what another read, or two threads writing one element, with no
barrier between, raises `DataRaceError` — whatever order the simulation ran the
threads in. Writers are threads, asynchronous copies in flight (`PENDING`) and TMA
tiles an mbarrier phase landed (`LANDED`); readers are threads, several of them
(`MANY_READERS`), a warpgroup's `wgmma`s (`WARPGROUP_READER`), or reads an arrival
released (`RELEASED`). `SharedView` is a view of a buffer (a TMA destination, a
`wgmma` tile, a store's destination).
"""

from __future__ import annotations

import math
from typing import Any, NoReturn

import numpy as np

from affinec.interpreter.support import InterpreterError, poisoned


class DataRaceError(InterpreterError):
    """Two threads of a block touched one shared element with no barrier between."""


MANY_READERS = -2
"""A reader mark: more than one thread read the element in this interval."""

WARPGROUP_READER = -(1 << 20)
"""Reader marks at or below this are a warpgroup's collective reads (`wgmma`):
warpgroup `WARPGROUP_READER - mark`."""

WARPGROUPS_READER = -(1 << 30)
"""Reader marks at or below this (and above `RELEASED`) are the collective reads of
several warpgroups (each one's `wgmma`s reading a tile they share):
`WARPGROUPS_READER - mask`, bit w for warpgroup w. Each warpgroup's arrival on an
mbarrier hands back its own reads (`mbarriers`), the element free once all have."""

RELEASED = -(1 << 40)
"""`read_epoch` marks at or below this are reads an mbarrier arrival released
(`mbarriers.BlockBarriers.releases`): a thread that waited for that arrival's phase
may overwrite them in the same interval."""


MAX_LANE_READS = 1 << 12
"""How many lockstep reads of a buffer wait for their marks before they are marked
(`SharedArray.mark_lane_reads`): a bound on what the log holds."""


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
        if reader <= WARPGROUPS_READER:
            mask = WARPGROUPS_READER - reader
            firsts = [w * 128 for w in range(mask.bit_length()) if mask >> w & 1]
            return "the warpgroups of " + ", ".join(map(self.thread_name, firsts))
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
        for buffer in self.buffers:
            buffer.lane_reads.clear()
        for copy in self.copies.values():
            copy.restamp(self.epoch)


def warpgroup_mask(marks: np.ndarray) -> np.ndarray:
    """The warpgroups (a bit each) whose collective reads reader marks name; 0
    for a thread's or several threads' reads."""
    marks = np.asarray(marks, np.int64)
    single = (marks <= WARPGROUP_READER) & (marks > WARPGROUPS_READER)
    several = marks <= WARPGROUPS_READER
    one = np.left_shift(1, np.where(single, WARPGROUP_READER - marks, 0))
    return np.where(single, one, np.where(several, WARPGROUPS_READER - marks, 0))


def warpgroup_marks(masks: np.ndarray) -> np.ndarray:
    """The reader marks of the warpgroups of `masks` (nonzero)."""
    masks = np.asarray(masks, np.int64)
    alone = (masks & (masks - 1)) == 0
    index = np.log2(np.where(alone, masks, 1)).astype(np.int64)
    return np.where(alone, WARPGROUP_READER - index, WARPGROUPS_READER - masks)


def share_warpgroup_reads(
    reader: np.ndarray,
    positions: np.ndarray,
    before: np.ndarray,
    read_before: np.ndarray,
    warpgroup: int,
) -> None:
    """After `warpgroup`'s collective read of flat `positions` (reader marks
    `before`, read in this interval where `read_before`): an element another
    warpgroup's collective reads had read in this interval is read by both."""
    masks = warpgroup_mask(before)
    bit = 1 << warpgroup
    shared = read_before & (masks != 0) & (masks != bit)
    if shared.any():
        reader[positions[shared]] = warpgroup_marks(masks[shared] | bit)


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
        "lane_reads",
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
        self.lane_reads: list[tuple[np.ndarray, np.ndarray]] = []
        """Reads of the block's threads in lockstep not yet marked (`read_lanes`):
        their marks are only needed by a write in the same interval, which marks
        them first (`mark_lane_reads`); a barrier forgets them."""
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
            view.lane_reads = self.lane_reads
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
                f"{state.thread_name(copy.owner(index))} may still be writing: "
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

    def read_lanes(self, positions, threads: np.ndarray) -> np.ndarray:
        """The elements at flat `positions` (one per lane, or one for all), lane k
        read by thread `threads[k]` (distinct threads), all at once
        (`affinec.interpreter.lockstep`). A read of what another thread wrote in
        this interval is a race at once; the reader marks wait in `lane_reads`."""
        f = self.flat_view()
        pos = _per_lane(positions, threads)
        e = self.state.epoch
        if self.written_in[0] == e:
            clash = (f.write_epoch[pos] == e) & (f.writer[pos] != threads)
            if clash.any():
                k = int(np.argmax(clash))
                self.state.thread = int(threads[k])
                f.conflict(int(pos[k]), "reads", int(f.writer[pos[k]]))
        log = self.lane_reads
        log.append((pos, threads))
        if len(log) > MAX_LANE_READS:
            self.mark_lane_reads()
        return f.data[pos]

    def mark_lane_reads(self) -> None:
        """Mark the reads waiting in `lane_reads` as their threads' reads one after
        the other would: an element read by one thread names it, by several
        `MANY_READERS`."""
        log = self.lane_reads
        if not log:
            return
        f = self.flat_view()
        e = self.state.epoch
        pos = np.concatenate([p for p, _ in log])
        threads = np.concatenate([t for _, t in log])
        log.clear()
        order = np.argsort(pos, kind="stable")
        pos, threads = pos[order], threads[order]
        starts = np.flatnonzero(np.r_[True, pos[1:] != pos[:-1]])
        first = threads[starts]
        sizes = np.diff(np.r_[starts, len(pos)])
        mixed = np.logical_or.reduceat(threads != np.repeat(first, sizes), starts)
        where = pos[starts]
        fresh = f.read_epoch[where] != e
        same = ~mixed & (fresh | (f.reader[where] == first))
        f.read_epoch[where] = e
        f.reader[where] = np.where(same, first, MANY_READERS)

    def write_lanes(self, positions, values, threads: np.ndarray) -> None:
        """`values` written to flat `positions` (one per lane, or one for all), lane
        k by thread `threads[k]` (distinct threads), race-checked as the lanes'
        writes one after the other would be."""
        f = self.flat_view()
        pos = _per_lane(positions, threads)
        self.mark_lane_reads()
        state = self.state
        e = state.epoch
        clash = (f.write_epoch[pos] == e) & (f.writer[pos] != threads)
        if clash.any():
            k = int(np.argmax(clash))
            state.thread = int(threads[k])
            f.conflict(int(pos[k]), "writes", int(f.writer[pos[k]]))
        read = (f.read_epoch[pos] == e) & (f.reader[pos] != threads)
        if read.any():
            k = int(np.argmax(read))
            state.thread = int(threads[k])
            other = state.reader_name(int(f.reader[pos[k]]))
            f.race(int(pos[k]), f"writes what {other} read")
        if len(pos) > 1:
            order = np.argsort(pos, kind="stable")
            same = pos[order[1:]] == pos[order[:-1]]
            if same.any():
                k = int(np.argmax(same))
                first, second = order[k], order[k + 1]
                state.thread = int(threads[second])
                other = state.thread_name(int(threads[first]))
                f.race(int(pos[second]), f"writes what {other} wrote")
        f.stamp_writes(pos, threads, e)
        f.data[pos] = values

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


def _per_lane(positions, threads: np.ndarray) -> np.ndarray:
    """Flat positions one per lane: `positions` as they are, or one for all."""
    if positions.__class__ is np.ndarray and positions.shape == threads.shape:
        return positions
    return np.full(threads.shape, positions, np.int64)


def _element(index: tuple | slice, k: int):
    """Element `k` of the run `index` names."""
    if isinstance(index, slice):
        return index.start + k
    return (*index[:-1], index[-1].start + k)
