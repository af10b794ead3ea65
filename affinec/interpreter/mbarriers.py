"""mbarriers and TMA loads: phases, transaction bytes, and tiles that land when a
phase completes.

A barrier group (`nvgpu.mbarrier.create`) is one per block (every thread's `create`
gives the same `BarrierGroup`). Each `MBarrier` counts, for its current phase, the
arrivals still missing and the bytes announced but not yet landed (`tx`):

    init(count)         phase 0, `count` arrivals a phase
    arrive.expect_tx(b) tx += b, one arrival
    arrive              one arrival
    TMA load of b bytes in flight; when its bytes arrive, tx -= b, and the tile
                        lands when the phase they arrived in completes

A phase completes when no arrival is missing and `tx` is 0: its TMA tiles are
written, the phase count goes up and the next phase expects `count` arrivals again.
`try_wait.parity p` lets a thread on once the phase of parity p has completed
(`phase % 2 != p`); until then the thread yields a `Wait`, and the block's other
threads run (`warps.run_collectives`). The bytes of a load arrive as late as they
can: only when every thread is stuck, and then those of the barriers waited on — so
a thread that does not wait for them, or waits on the wrong phase, reads a tile
still in flight. A wait nothing can end is an error naming the barrier, its missing
arrivals and bytes.

Races. A TMA tile is pending (`shared_memory.PENDING`) from the load to the end of its
phase, so any access before is a race naming the load and its barrier, and a load
onto what another thread read or wrote in the same barrier interval is one too. A
landed tile carries the landing (`LANDED - id`) as its writer: a thread may read it
in the same interval once it has waited on that barrier past that phase (its own
`try_wait` is the synchronization), not before. An arrival releases what the
arriving thread and its warpgroup's `wgmma`s read in the interval (`RELEASED`): a
thread that waits for that phase may overwrite it (a consumer handing a stage back
to a producer). An mbarrier initialized by one thread may be used by the others
only after a `gpu.barrier`. nvvm's mbarrier and TMA ops run here too, their
barriers found by pointer (one per i64 of a shared buffer).

    nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers              // thread 0
    gpu.barrier
    nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %c8192 : !barriers  // thread 0
    nvgpu.tma.async.load %map[%x, %y], %bar[%c0] to %tile : ...     // thread 0
    nvgpu.mbarrier.try_wait.parity %bar[%c0], %false, %ticks : !barriers  // all
    ... reads of %tile ...
"""

from __future__ import annotations

import itertools
import math
from contextlib import nullcontext
from typing import Any

import numpy as np
from xdsl.ir import Operation

from affinec.dialects import nvgpu, nvvm
from affinec.hardware.tensor_maps import TensorMapError, tensor_map_of
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE, TileLayout, swizzle_alignment
from affinec.interpreter.async_copies import Copy, claim
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.shared_memory import (
    LANDED,
    RELEASED,
    WARPGROUP_READER,
    WARPGROUPS_READER,
    SharedArray,
    SharedView,
    warpgroup_marks,
    warpgroup_mask,
)
from affinec.interpreter.support import InterpreterError, describe, numpy_dtype
from affinec.interpreter.warps import Wait

_uids = itertools.count()


class MBarrier:
    """One barrier of a group: its phase and what the current phase still waits for."""

    __slots__ = (
        "copies",
        "expected",
        "in_flight",
        "init_epoch",
        "init_thread",
        "name",
        "pending",
        "phase",
        "tx",
        "uid",
    )

    def __init__(self, name: str):
        self.name = name
        self.uid = next(_uids)
        self.expected = 0
        self.pending = 0
        self.tx = 0
        self.phase = 0
        self.copies: list[TmaCopy] = []
        """Loads whose bytes counted on the current phase: they land with it."""
        self.in_flight: list[TmaCopy] = []
        """Loads whose bytes have not arrived yet."""
        self.init_thread: int | None = None
        self.init_epoch = -1

    def outstanding(self) -> str:
        if self.tx >= 0:
            missing = f"{self.tx} announced bytes"
        else:
            missing = f"has received {-self.tx} bytes more than announced"
        return (
            f"phase {self.phase} of {self.name} misses {self.pending} of its "
            f"{self.expected} arrivals and {missing}"
        )

    def deliver(self, state) -> bool:
        """Let the bytes of the loads in flight arrive, in the order they were
        issued (each counts on the phase current when it arrives); whether any did."""
        if not self.in_flight:
            return False
        for copy in self.in_flight:
            self.tx -= copy.nbytes
            self.copies.append(copy)
            self.complete_if_done(state)
        self.in_flight = []
        return True

    def arrive(self, op: Operation, state) -> None:
        if self.pending == 0:
            raise InterpreterError(
                f"arrives on {self.name} after all {self.expected} arrivals of phase "
                f"{self.phase}, which still waits for {self.tx} bytes",
                op,
            )
        self.pending -= 1
        self.complete_if_done(state)

    def complete_if_done(self, state) -> None:
        if self.pending or self.tx:
            return
        for copy in self.copies:
            copy.land(state.epoch)
            del state.copies[copy.record]
        self.copies = []
        self.phase += 1
        self.pending = self.expected


class BarrierGroup:
    """The barriers of one `nvgpu.mbarrier.create`, in one block."""

    __slots__ = ("barriers",)

    def __init__(self, name: str, count: int):
        self.barriers = [MBarrier(f"%{name}[{k}]") for k in range(count)]


class BlockBarriers:
    """A block's barrier groups, by their `create` op, and the tiles that landed
    (by landing id: the barrier and phase that landed them, and the load)."""

    __slots__ = ("at", "groups", "landings", "observed", "releases")

    def __init__(self) -> None:
        self.releases: dict[int, tuple[MBarrier, int, int, int]] = {}
        """Release id -> the barrier, its phase, the interval and the thread of an
        arrival that released the thread's (and its warpgroup's) reads."""
        self.groups: dict[Operation, BarrierGroup] = {}
        self.at: dict[tuple[int, int], MBarrier] = {}
        """nvvm's barriers, by (buffer, element)."""
        self.landings: dict[int, tuple[MBarrier, int, Operation, int]] = {}
        self.observed: dict[tuple[int, int], int] = {}
        """(thread, barrier uid) -> the phases of the barrier the thread saw end."""

    def visible(self, mark: int, thread: int, own_load: bool = False) -> bool:
        """Whether `thread` waited for the phase that landed the tile marked `mark`
        (with `own_load`, or started that load itself)."""
        barrier, phase, op, loader = self.landings[LANDED - mark]
        if own_load and loader == thread:
            return True
        return self.observed.get((thread, barrier.uid), 0) > phase

    def unacquired(self, mark: int, thread: int, epoch: int) -> str | None:
        """Why `thread` may not overwrite, in interval `epoch`, what was read and
        then released by the arrival `mark` (None: it waited for that phase)."""
        barrier, phase, released_in, reader = self.releases[RELEASED - mark]
        if (
            released_in != epoch
            or reader == thread  # its own reads, in its own order
            or self.observed.get((thread, barrier.uid), 0) > phase
        ):
            return None
        return (
            f"what {barrier.name}'s phase {phase} released (read by thread "
            f"{reader} and its warpgroup before it arrived): this thread has not "
            "waited for that phase"
        )

    def unseen(self, mark: int) -> str:
        barrier, phase, op, _ = self.landings[LANDED - mark]
        return (
            f"what the TMA load {describe(op)} landed with phase {phase} of "
            f"{barrier.name}, before waiting for that phase (try_wait.parity)"
        )


def block_barriers(state) -> BlockBarriers:
    if state.barriers is None:
        state.barriers = BlockBarriers()
    return state.barriers


class TmaCopy(Copy):
    """A TMA tile in flight: pending until its barrier's phase completes."""

    __slots__ = ("barrier", "nbytes")

    def __init__(self, op, thread, buffer, run, values, barrier: MBarrier):
        super().__init__(op, thread, buffer, run, values)
        self.barrier = barrier
        self.nbytes = values.size * values.dtype.itemsize

    def pending_reason(self) -> str:
        return f"the phase of {self.barrier.name} it completes on has not completed"

    def land(self, epoch: int) -> None:
        barriers = self.buffer.state.barriers
        landing = next(_uids)
        barriers.landings[landing] = (
            self.barrier,
            self.barrier.phase,
            self.op,
            self.thread,
        )
        self.buffer.data[self.run] = self.values
        self.buffer.stamp_writes(self.run, LANDED - landing, epoch)


# -- mbarrier ops --------------------------------------------------------------------


def create_group(ctx, op: nvgpu.MBarrierCreateOp) -> BarrierGroup:
    groups = block_barriers(ctx.block).groups
    group = groups.get(op)
    if group is None:
        t = op.barriers.type
        assert isinstance(t, nvgpu.MBarrierGroupType)
        group = groups[op] = BarrierGroup(op.barriers.name_hint or "barriers", t.count)
    return group


def group_barrier(op: Operation, group: BarrierGroup, index: int) -> MBarrier:
    """Barrier `index` of a group (nvgpu's ops)."""
    if not 0 <= index < len(group.barriers):
        raise InterpreterError(
            f"barrier {index} of a group of {len(group.barriers)}", op
        )
    return group.barriers[index]


def barrier_at(ctx, op: Operation, pointer) -> MBarrier:
    """The barrier at a shared-memory pointer (nvvm's ops): one per 8-byte element
    of a shared buffer, made by its first use."""
    buffer, offset = pointer
    if not isinstance(buffer, SharedArray) or buffer.dtype.itemsize != 8:
        raise InterpreterError("an mbarrier is an i64 in shared memory", op)
    if not 0 <= offset < len(buffer):
        raise InterpreterError(
            f"an mbarrier at element {offset} of %{buffer.name}, a buffer of "
            f"{len(buffer)}",
            op,
        )
    table = block_barriers(ctx.block).at
    key = (id(buffer.data), offset)
    if key not in table:
        table[key] = MBarrier(f"%{buffer.name}[{offset}]")
    return table[key]


def _checked(ctx, op: Operation, barrier: MBarrier) -> MBarrier:
    """The barrier, checked to be initialized, and visibly so to this thread."""
    state = ctx.block
    if barrier.init_thread is None:
        raise InterpreterError(f"uses {barrier.name} before it is initialized", op)
    if barrier.init_epoch == state.epoch and barrier.init_thread != ctx.linear:
        raise InterpreterError(
            f"{state.thread_name(ctx.linear)} uses {barrier.name}, which "
            f"{state.thread_name(barrier.init_thread)} initialized with no "
            "gpu.barrier between",
            op,
        )
    return barrier


def init(ctx, op, barrier: MBarrier, count: int) -> None:
    if count < 1:
        raise InterpreterError(f"initializes {barrier.name} to {count} arrivals", op)
    if barrier.copies or barrier.in_flight:
        raise InterpreterError(
            f"initializes {barrier.name} while TMA loads complete on it", op
        )
    barrier.expected = barrier.pending = count
    barrier.tx = 0
    barrier.phase = 0
    barrier.init_thread = ctx.linear
    barrier.init_epoch = ctx.block.epoch


def arrive_expect_tx(ctx, op, barrier: MBarrier, tx: int) -> None:
    _checked(ctx, op, barrier)
    if tx < 0:
        raise InterpreterError(f"announces {tx} bytes", op)
    barrier.tx += tx
    _release(ctx, barrier)
    barrier.arrive(op, ctx.block)


def arrive(ctx, op, barrier: MBarrier) -> int:
    _checked(ctx, op, barrier)
    phase = barrier.phase
    _release(ctx, barrier)
    barrier.arrive(op, ctx.block)
    return phase


def _release(ctx, barrier: MBarrier) -> None:
    """An arrival releases what the thread, and its warpgroup's `wgmma`s, read in this
    interval: a thread that waits for the phase may then overwrite it (a consumer
    handing a stage back to the producer)."""
    state = ctx.block
    t, e = ctx.linear, state.epoch
    readers = (t, WARPGROUP_READER - t // WARPGROUP_SIZE)
    release = next(_uids)
    block_barriers(state).releases[release] = (barrier, barrier.phase, e, t)
    bit = 1 << t // WARPGROUP_SIZE
    for buffer in state.buffers:
        flat = buffer.flat_view()
        current = flat.read_epoch == e
        mine = current & np.isin(flat.reader, readers)
        if mine.any():
            flat.read_epoch[mine] = RELEASED - release
        # a tile several warpgroups read: the others' reads stay until they arrive
        several = current & (flat.reader <= WARPGROUPS_READER)
        if several.any():
            masks = warpgroup_mask(flat.reader[several])
            left = np.where(masks & bit, masks & ~bit, masks)
            flat.reader[several] = warpgroup_marks(left)


class BarrierWait(Wait):
    """A thread at `try_wait.parity` for a phase that has not completed."""

    __slots__ = ("barrier", "parity", "state")

    def __init__(self, op: Operation, barrier: MBarrier, parity: int, state):
        super().__init__(op)
        self.barrier = barrier
        self.parity = parity
        self.state = state

    def ready(self) -> bool:
        return self.barrier.phase % 2 != self.parity

    def unblock(self) -> bool:
        return self.barrier.deliver(self.state)

    def stuck(self) -> str:
        return (
            f"the phase of parity {self.parity} never completes: "
            f"{self.barrier.outstanding()}, and no thread can arrive or load"
        )


def try_wait(ctx, op, barrier: MBarrier, parity) -> BarrierWait | None:
    """None when the thread may go on (its observation recorded), else what it
    yields until then."""
    _checked(ctx, op, barrier)
    parity = int(bool(parity))
    if barrier.phase % 2 == parity:
        return BarrierWait(op, barrier, parity, ctx.block)
    observed = block_barriers(ctx.block).observed
    key = (ctx.linear, barrier.uid)
    observed[key] = max(observed.get(key, 0), barrier.phase)
    return None


# -- TMA ----------------------------------------------------------------------------


class TensorMap:
    """What `nvgpu.tma.create.descriptor` makes on the host: the global tensor, the
    box, and how the box lands (swizzle, out-of-bounds fill, every s-th element
    along a dimension of element stride s)."""

    __slots__ = ("array", "box", "fill", "strides", "swizzle")

    def __init__(self, array: np.ndarray, box: tuple[int, ...], swizzle: int, fill,
                 strides: tuple[int, ...] = ()):  # fmt: skip
        self.array = array
        self.box = box
        self.swizzle = swizzle
        self.fill = fill
        self.strides = strides or (1,) * len(box)

    def read_box(self, coordinates: tuple[int, ...]) -> np.ndarray:
        """The box at `coordinates` (innermost first), out-of-bounds elements filled."""
        origin = coordinates[::-1]
        out = np.full(self.box, self.fill, self.array.dtype)
        inside = []
        source = []
        shape = self.array.shape
        for o, b, n, k in zip(origin, self.box, shape, self.strides, strict=True):
            i = np.arange(o, o + b * k, k)
            keep = (i >= 0) & (i < n)
            inside.append(np.nonzero(keep)[0])
            source.append(i[keep])
        if all(len(s) for s in source):
            out[np.ix_(*inside)] = self.array[np.ix_(*source)]
        return out


def create_descriptor(op: nvgpu.TmaCreateDescriptorOp, array, box) -> TensorMap:
    """The tensor map of `array`, checked by the driver's rules
    (`affinec.hardware.tensor_maps`)."""
    t = op.tensorMap.type
    assert isinstance(t, nvgpu.TensorMapDescriptorType)
    expected = tuple(t.tensor.get_shape())
    box = tuple(int(b) for b in box)
    if box != expected:
        raise InterpreterError(f"a box of {box} for a tensor map of {expected}", op)
    array = np.asarray(array)
    dtype = numpy_dtype(t.tensor.get_element_type())
    if array.dtype != dtype:
        raise InterpreterError(f"a tensor of {array.dtype} for a box of {dtype}", op)
    try:
        spec = tensor_map_of(t, array.shape, array.strides, array.dtype)
    except TensorMapError as e:
        raise InterpreterError(str(e), op) from None
    fill = np.nan if spec.nan_fill else 0
    return TensorMap(array, box, spec.swizzle, fill, spec.traversal)


def tma_load(ctx, op: Operation, tensor_map, coordinates, barrier: MBarrier,
             dst) -> None:  # fmt: skip
    """Start the TMA load of the box at `coordinates` into `dst`: a whole
    workgroup buffer (nvgpu's op) or a pointer into one (nvvm's)."""
    if not isinstance(tensor_map, TensorMap):
        raise InterpreterError(
            f"the tensor map is {type(tensor_map).__name__}, not one "
            "nvgpu.tma.create.descriptor made",
            op,
        )
    _checked(ctx, op, barrier)
    if isinstance(dst, SharedArray):
        buffer, offset = dst, 0
    elif isinstance(dst, SharedView):
        buffer, offset = dst.buffer, dst.offset
    else:
        buffer, offset = dst
    if not isinstance(buffer, SharedArray):
        raise InterpreterError("TMA loads into shared memory", op)
    flat = buffer.flat_view()
    e = flat.dtype.itemsize
    if flat.dtype != tensor_map.array.dtype:
        raise InterpreterError(
            f"loads {tensor_map.array.dtype} into a buffer of {flat.dtype}", op
        )
    alignment = swizzle_alignment(tensor_map.swizzle)
    if (flat.address + offset * e) % max(alignment, 128):
        raise InterpreterError(
            f"the destination (byte {offset * e} of %{flat.name}) is not aligned to "
            f"{max(alignment, 128)} bytes",
            op,
        )
    values = tensor_map.read_box(tuple(int(c) for c in coordinates))
    if offset + values.size > len(flat):
        raise InterpreterError(
            f"a box of {values.size} elements from element {offset} of a buffer "
            f"of {len(flat)}",
            op,
        )
    rows, cols = math.prod(tensor_map.box[:-1]), tensor_map.box[-1]
    if tensor_map.swizzle:
        positions = TileLayout(rows, cols, e, tensor_map.swizzle).addresses() // e
    else:
        positions = np.arange(rows * cols).reshape(rows, cols)
    positions = offset + positions.reshape(-1)
    state = ctx.block
    copy = TmaCopy(op, ctx.linear, flat, positions, values.reshape(-1), barrier)
    claim(flat, positions, copy, state)
    state.copies[copy.record] = copy
    barrier.in_flight.append(copy)


# -- emitters ------------------------------------------------------------------------


def _context(w: FunctionWriter, op: Operation) -> str:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    return w.gpu_context


def _call(w: FunctionWriter, op: Operation, fn, *args: str, result: Any = None) -> None:
    call = f"{w.global_(fn, fn.__name__)}({', '.join(args)})"
    w.line(f"{w.define(result)} = {call}" if result is not None else call)


@emits(nvgpu.MBarrierCreateOp)
def _create(op: nvgpu.MBarrierCreateOp, w: FunctionWriter) -> None:
    _call(w, op, create_group, _context(w, op), w.op_ref(op), result=op.barriers)


def _barrier_of(w: FunctionWriter, op: Operation) -> str:
    """The name of the barrier an nvgpu op (group and index) or an nvvm op (pointer)
    names, computed by a line written here."""
    name = w.fresh("barrier")
    if isinstance(op, nvvm.IntrinsicOp | nvvm.PtxOp):
        pointer = op.mbar if hasattr(op, "mbar") else op.addr  # pyright: ignore
        fn = w.global_(barrier_at, "barrier_at")
        w.line(f"{name} = {fn}({_context(w, op)}, {w.op_ref(op)}, {w[pointer]})")
    else:
        fn = w.global_(group_barrier, "group_barrier")
        group, index = op.barriers, op.mbarId  # pyright: ignore
        w.line(f"{name} = {fn}({w.op_ref(op)}, {w[group]}, {w[index]})")
    return name


def _predicated(w: FunctionWriter, op: Operation):
    predicate = getattr(op, "predicate", None)
    return w.indented(f"if {w[predicate]}:") if predicate is not None else nullcontext()


@emits(nvgpu.MBarrierInitOp, nvvm.MBarrierInitOp)
def _init(op: nvgpu.MBarrierInitOp | nvvm.MBarrierInitOp, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    with _predicated(w, op):
        _call(w, op, init, ctx, w.op_ref(op), _barrier_of(w, op), w[op.count])


@emits(nvgpu.MBarrierArriveExpectTxOp, nvvm.MBarrierArriveExpectTxOp)
def _expect_tx(op: Operation, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    with _predicated(w, op):
        tx = w[op.txcount]  # pyright: ignore
        _call(w, op, arrive_expect_tx, ctx, w.op_ref(op), _barrier_of(w, op), tx)


@emits(nvgpu.MBarrierArriveOp, nvvm.MBarrierArriveOp)
def _arrive(op: Operation, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    barrier = _barrier_of(w, op)
    _call(w, op, arrive, ctx, w.op_ref(op), barrier, result=op.results[0])


@emits(nvgpu.MBarrierTryWaitParityOp, nvvm.MBarrierTryWaitParityOp)
def _try_wait(op: Operation, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    parity = w[
        op.phaseParity if isinstance(op, nvgpu.MBarrierTryWaitParityOp) else op.phase
    ]  # pyright: ignore
    site = w.fresh("wait")
    call = (
        f"{w.global_(try_wait, 'try_wait')}({ctx}, {w.op_ref(op)}, "
        f"{_barrier_of(w, op)}, {parity})"
    )
    w.line(f"{site} = {call}")
    with w.indented(f"while {site} is not None:"):
        w.line(f"yield {site}")
        w.line(f"{site} = {call}")


@emits(nvvm.FenceMBarrierInitOp)
def _fence(op: nvvm.FenceMBarrierInitOp, w: FunctionWriter) -> None:
    w.line("pass  # the interpreter's barriers are visible once initialized")


@emits(nvgpu.TmaCreateDescriptorOp)
def _create_descriptor(op: nvgpu.TmaCreateDescriptorOp, w: FunctionWriter) -> None:
    box = ", ".join(w.names(op.boxDimensions))
    _call(w, op, create_descriptor, w.op_ref(op), w[op.tensor], f"({box},)",
          result=op.tensorMap)  # fmt: skip


@emits(nvgpu.TmaAsyncLoadOp, nvvm.CpAsyncBulkTensorGlobalToSharedClusterOp)
def _tma_load(op: Operation, w: FunctionWriter) -> None:
    ctx = _context(w, op)
    if isinstance(op, nvgpu.TmaAsyncLoadOp):
        if op.multicastMask is not None:
            raise InterpreterError(
                "multicast TMA loads (clusters) are not interpreted", op
            )
        tensor_map, dst = op.tensorMapDescriptor, op.dst
    else:
        tensor_map, dst = op.tmaDescriptor, op.dstMem  # pyright: ignore
    coordinates = f"({', '.join(w.names(op.coordinates))},)"  # pyright: ignore
    with _predicated(w, op):
        barrier = _barrier_of(w, op)
        _call(w, op, tma_load, ctx, w.op_ref(op), w[tensor_map], coordinates, barrier,
              w[dst])  # fmt: skip
