"""Warpgroup MMA (`wgmma`) at the nvgpu and nvvm levels: matrix descriptors,
accumulators spread over 128 threads, the MMA read through the descriptors, and
the groups left in flight.

    nvgpu.warpgroup.generate.descriptor   thread: a `TileDescriptor` (the tile's
                                          buffer and layout)
    nvgpu.warpgroup.mma.init.accumulator  thread: zeros, (M/64, N/2) f32
    nvgpu.warpgroup.mma                   the warpgroup together (a 128-wide
                                          `warps.WarpCollective`)
    nvgpu.warpgroup.mma.store             thread: its registers to their places
                                          (after a wait for all groups)
    nvvm.wgmma.mma_async                  the warpgroup together, on i64 descriptors
    nvvm.wgmma.commit.group / wait.group  the warpgroup together

The MMA runs as PTX does: one `wgmma.mma_async` m64nNk16 per 64 rows of A and 16 of
K, each operand addressed by a real 64-bit descriptor (`wgmma_layouts`: the tile's
descriptor advanced by the sub-tile's offset, encoded, decoded, and its elements'
addresses computed from the fields and the swizzle), so a wrong offset or swizzle
reads the wrong elements. Each instruction's D = A × B + C is its exact sum rounded
once to f32, as `warps.mma` computes `mma.sync`.

The tiles are read by the whole warpgroup (marked read by it, `WARPGROUP_READER`):
a write to them in the same barrier interval — by any thread, or a TMA load its
threads have not all waited for — is a race. A group left in flight
(`waitGroup`, `wgmma.wait_group N`) keeps its reads in flight
(`BlockState.wgmma_reads`) until a wait retires it: a copy landing there before is
a race whatever barriers stand between.
"""

from __future__ import annotations

import numpy as np
from xdsl.ir import Operation

from affinec.dialects import nvgpu, nvvm
from affinec.hardware.wgmma_layouts import (
    WARPGROUP_SIZE,
    WGMMA_M,
    MatrixDescriptor,
    TileLayout,
    accumulator_table,
    operand_addresses,
)
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.shared_memory import (
    LANDED,
    WARPGROUP_READER,
    SharedArray,
    SharedView,
    share_warpgroup_reads,
)
from affinec.interpreter.support import InterpreterError, describe
from affinec.interpreter.warps import WarpCollective, exact_dot

WGMMA_K = 16
"""K of one f16/bf16 `wgmma` instruction."""


class TileDescriptor:
    """A thread's `!nvgpu.warpgroup.descriptor`: the flat buffer of the tile, the
    byte address the tile starts at, and its layout (the descriptor's fields follow
    from it)."""

    __slots__ = ("address", "buffer", "layout")

    def __init__(self, buffer: SharedArray, layout: TileLayout, offset: int = 0):
        self.buffer = buffer
        self.layout = layout
        self.address = buffer.address + offset * buffer.dtype.itemsize

    def same(self, other: object) -> bool:
        return (
            isinstance(other, TileDescriptor)
            and other.address == self.address
            and other.layout == self.layout
        )


def generate_descriptor(
    op: nvgpu.WarpgroupGenerateDescriptorOp, tile
) -> TileDescriptor:
    if isinstance(tile, SharedView):
        return TileDescriptor(tile.buffer, op.layout(), tile.offset)
    if not isinstance(tile, SharedArray):
        raise InterpreterError("describes a tile of shared memory", op)
    return TileDescriptor(tile.flat_view(), op.layout())


def init_accumulator(op: nvgpu.WarpgroupMmaInitAccumulatorOp) -> np.ndarray:
    t = op.matrixC.type
    assert isinstance(t, nvgpu.WarpgroupAccumulatorType)
    m, n = t.shape
    return np.zeros((m // WGMMA_M, n // 2), np.float32)


def _operand(op: Operation, descriptor: MatrixDescriptor, rows: int, k_major: bool,
             element_bytes: int, state, base: int) -> np.ndarray:  # fmt: skip
    """A `wgmma` operand (rows x 16) as its 64-bit descriptor addresses it, read by
    the warpgroup of thread `base`, race-checked."""
    decoded = MatrixDescriptor.decode(descriptor.encode())
    addresses = operand_addresses(decoded, rows, WGMMA_K, element_bytes, k_major)
    low, high = int(addresses.min()), int(addresses.max())
    buffer = state.buffer_at(low)
    if buffer is None or high >= buffer.address + buffer.data.nbytes:
        raise InterpreterError(
            f"the descriptor {descriptor.encode():#x} addresses bytes {low} to {high} "
            "of shared memory, which no one buffer holds",
            op,
        )
    buffer = buffer.flat_view()
    e = buffer.dtype.itemsize
    if e != element_bytes or ((addresses - buffer.address) % e).any():
        raise InterpreterError(
            f"reads {element_bytes}-byte elements from %{buffer.name}, a buffer of "
            f"{buffer.dtype}",
            op,
        )
    positions = (addresses - buffer.address) // e
    epoch = state.epoch
    written = buffer.write_epoch[positions] == epoch
    if written.any():
        writers = buffer.writer[positions][written]
        for writer in np.unique(writers):
            k = int(positions[written][np.argmax(writers == writer)])
            if writer <= LANDED:
                for t in range(base, base + WARPGROUP_SIZE):
                    if not state.barriers.visible(int(writer), t):
                        state.thread = t
                        buffer.race(
                            k,
                            f"reads ({op.name}) {state.barriers.unseen(int(writer))}",
                            barrier=False,
                        )
            else:
                buffer.conflict(k, f"reads ({op.name})", int(writer))
    before, read_before = (
        buffer.reader[positions],
        buffer.read_epoch[positions] == epoch,
    )
    buffer.read_epoch[positions] = epoch
    buffer.reader[positions] = WARPGROUP_READER - base // WARPGROUP_SIZE
    share_warpgroup_reads(
        buffer.reader, positions, before, read_before, base // WARPGROUP_SIZE
    )
    read = InFlightRead(op, buffer, positions.reshape(-1))
    _issued(state, base).open.append(read)
    state.wgmma_reads.append(read)
    return buffer.data[positions].astype(np.float64)


class InFlightRead:
    """What one `wgmma` read of shared memory, until a wait retires its group."""

    __slots__ = ("buffer", "op", "positions")

    def __init__(self, op: Operation, buffer: SharedArray, positions: np.ndarray):
        self.op = op
        self.buffer = buffer
        self.positions = positions

    def overlap(self, positions: np.ndarray) -> int | None:
        """An element of `positions` this read covers, if any."""
        hit = np.isin(positions, self.positions)
        return int(positions[np.argmax(hit)]) if hit.any() else None

    def describe(self) -> str:
        return f"the wgmma of {describe(self.op)}"


class WgmmaQueue:
    """A warpgroup's `wgmma`s in flight: those issued since its last commit, then its
    committed groups, oldest first (PTX's `wgmma.commit_group`/`wait_group`)."""

    __slots__ = ("groups", "open")

    def __init__(self) -> None:
        self.open: list[InFlightRead] = []
        self.groups: list[list[InFlightRead]] = []

    def commit(self) -> None:
        self.groups.append(self.open)
        self.open = []

    def retire(self, state, pending: int) -> None:
        """Wait until at most `pending` groups are in flight."""
        while len(self.groups) > pending:
            for read in self.groups.pop(0):
                state.wgmma_reads.remove(read)


def _issued(state, base: int) -> WgmmaQueue:
    """The queue of the warpgroup of thread `base`."""
    queues = state.wgmma_queues
    queue = queues.get(base // WARPGROUP_SIZE)
    if queue is None:
        queue = queues[base // WARPGROUP_SIZE] = WgmmaQueue()
    return queue


def _same_for_all(op: Operation, values: list, what: str) -> None:
    if any(v != values[0] for v in values):
        raise InterpreterError(
            f"the threads of the warpgroup give different {what}", op
        )


def warpgroup_mma(op: nvgpu.WarpgroupMmaOp, lanes: list, state, base: int) -> list:
    tile_a, tile_b, _ = lanes[0]
    for t, (a, b, _) in enumerate(lanes):
        if not (tile_a.same(a) and tile_b.same(b)):
            raise InterpreterError(
                f"thread {t} of the warpgroup gives other descriptors than thread 0",
                op,
            )
    _, _, (m, n) = op.shapes()
    la, lb = tile_a.layout, tile_b.layout
    state.thread = base  # races name the warpgroup's first thread
    rows, cols = accumulator_table(n)
    acc = np.stack([c for _, _, c in lanes])  # (128, m/64, n/2)
    out = np.empty_like(acc)
    for block in range(m // WGMMA_M):
        c = np.empty((WGMMA_M, n), np.float64)
        c[rows, cols] = acc[:, block, :]
        for k0 in range(0, la.cols, WGMMA_K):
            at_a = tile_a.address + la.m_offset(block * WGMMA_M) + la.k_offset(k0, True)
            at_b = tile_b.address + lb.k_offset(k0, False)
            a = _operand(op, la.k_major().advanced(at_a), WGMMA_M, True,
                         la.element_bytes, state, base)  # fmt: skip
            b = _operand(op, lb.mn_major().advanced(at_b), n, False,
                         lb.element_bytes, state, base)  # fmt: skip
            c = exact_dot(a, b.T, c).astype(np.float64)
        out[:, block, :] = c[rows, cols]
    queue = _issued(state, base)
    queue.commit()
    queue.retire(state, op.groups_in_flight)
    return list(out)


def nvvm_wgmma(op: nvvm.WgmmaMmaAsyncOp, lanes: list, state, base: int) -> list:
    """One `wgmma.mma_async` m64nNk16: each thread gives the two descriptors (the
    same for all) and its N/2 accumulator registers."""
    _same_for_all(op, [(a, b) for a, b, _ in lanes], "descriptors")
    registers = (
        # the registers' own type first (f32 scalars convert ten times faster as
        # f32), then float64, exactly
        np.array([lane[2] for lane in lanes]) if op.accumulates else None
    )
    d = wgmma_registers(op, lanes[0][0], lanes[0][1], registers, state, base)
    return list(map(tuple, d))


def wgmma_registers(
    op: nvvm.WgmmaMmaAsyncOp, a, b, registers, state, base: int
) -> np.ndarray:
    """One `wgmma.mma_async` m64nNk16 of the warpgroup of thread `base`, on the
    descriptors `a` and `b` (the warpgroup's, checked the same for all) and its
    threads' accumulator registers, (128, N/2) (None where the op does not
    accumulate): the threads' result registers, (128, N/2) f32."""
    a, b = MatrixDescriptor.decode(int(a)), MatrixDescriptor.decode(int(b))
    n = op.n
    rows, cols = accumulator_table(n)
    state.thread = base
    matrix_a = _operand(op, a, WGMMA_M, True, 2, state, base)
    matrix_b = _operand(op, b, n, not op.transposed_b, 2, state, base)
    c = np.zeros((WGMMA_M, n), np.float64)
    if registers is not None:
        c[rows, cols] = registers.astype(np.float64)
    d = exact_dot(matrix_a, matrix_b.T, c)
    return d[rows, cols]


def commit_wgmma(state, base: int) -> None:
    """`wgmma.commit_group` of the warpgroup of thread `base`."""
    _issued(state, base).commit()


def wait_wgmma(state, base: int, pending: int) -> None:
    """`wgmma.wait_group pending` of the warpgroup of thread `base`."""
    _issued(state, base).retire(state, pending)


def store_accumulator(ctx, op: nvgpu.WarpgroupMmaStoreOp, acc: np.ndarray, dst) -> None:
    """The thread's registers to their places, once every `wgmma` of its warpgroup
    has finished (a wait for all, as the lowering writes before the stores)."""
    _issued(ctx.block, ctx.linear).retire(ctx.block, 0)
    thread = ctx.linear % WARPGROUP_SIZE
    n = 2 * acc.shape[1]
    rows, cols = accumulator_table(n)
    r, c = rows[thread], cols[thread]
    for block in range(acc.shape[0]):
        for row, col, value in zip(r + block * WGMMA_M, c, acc[block], strict=True):
            dst[row, col] = value


# -- emitters ------------------------------------------------------------------------


def _context(w: FunctionWriter, op: Operation) -> str:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    return w.gpu_context


@emits(nvgpu.WarpgroupGenerateDescriptorOp)
def _generate(op: nvgpu.WarpgroupGenerateDescriptorOp, w: FunctionWriter) -> None:
    fn = w.global_(generate_descriptor, "generate_descriptor")
    w.line(f"{w.define(op.descriptor)} = {fn}({w.op_ref(op)}, {w[op.tensor]})")


@emits(nvgpu.WarpgroupMmaInitAccumulatorOp)
def _init(op: nvgpu.WarpgroupMmaInitAccumulatorOp, w: FunctionWriter) -> None:
    fn = w.global_(init_accumulator, "init_accumulator")
    w.line(f"{w.define(op.matrixC)} = {fn}({w.op_ref(op)})")


@emits(nvgpu.WarpgroupMmaOp)
def _mma(op: nvgpu.WarpgroupMmaOp, w: FunctionWriter) -> None:
    _context(w, op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(warpgroup_mma, "warpgroup_mma")
    operands = ", ".join(w.names((op.descriptorA, op.descriptorB, op.matrixC)))
    w.line(
        f"{w.define(op.matrixD)} = yield {collective}({w.op_ref(op)}, {fn}, "
        f"({operands}), {WARPGROUP_SIZE})"
    )


@emits(nvvm.WgmmaMmaAsyncOp)
def _nvvm_mma(op: nvvm.WgmmaMmaAsyncOp, w: FunctionWriter) -> None:
    _context(w, op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(nvvm_wgmma, "nvvm_wgmma")
    operands = ", ".join(w.names((op.descriptorA, op.descriptorB, op.inouts)))
    w.line(
        f"{w.define(op.res)} = yield {collective}({w.op_ref(op)}, {fn}, "
        f"({operands}), {WARPGROUP_SIZE})"
    )


@emits(nvvm.WgmmaFenceAlignedOp)
def _fence(op: nvvm.WgmmaFenceAlignedOp, w: FunctionWriter) -> None:
    w.line("pass  # the interpreter orders registers and wgmma itself")


def _commit(op: nvvm.WgmmaGroupSyncAlignedOp, lanes: list, state, base: int) -> list:
    commit_wgmma(state, base)
    return [None] * len(lanes)


def _wait(op: nvvm.WgmmaWaitGroupSyncOp, lanes: list, state, base: int) -> list:
    wait_wgmma(state, base, op.group.value.data)
    return [None] * len(lanes)


@emits(nvvm.WgmmaGroupSyncAlignedOp, nvvm.WgmmaWaitGroupSyncOp)
def _group(op: Operation, w: FunctionWriter) -> None:
    """The warpgroup's groups, once for all its threads (`.sync.aligned`)."""
    _context(w, op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = _commit if isinstance(op, nvvm.WgmmaGroupSyncAlignedOp) else _wait
    fn_name = w.global_(fn, fn.__name__.strip("_"))
    w.line(f"yield {collective}({w.op_ref(op)}, {fn_name}, (), {WARPGROUP_SIZE})")


def _registers(op: nvvm.SetMaxRegisterOp, lanes: list, state, base: int) -> list:
    return [None] * len(lanes)


@emits(nvvm.SetMaxRegisterOp)
def _setmaxregister(op: nvvm.SetMaxRegisterOp, w: FunctionWriter) -> None:
    """A rendezvous of the warpgroup's 128 threads (`.sync.aligned`): registers are
    not modelled, but a warpgroup some of whose threads skip it is an error."""
    _context(w, op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(_registers, "registers")
    w.line(f"yield {collective}({w.op_ref(op)}, {fn}, (), {WARPGROUP_SIZE})")


@emits(nvgpu.WarpgroupMmaStoreOp)
def _store(op: nvgpu.WarpgroupMmaStoreOp, w: FunctionWriter) -> None:
    fn = w.global_(store_accumulator, "store_accumulator")
    w.line(
        f"{fn}({_context(w, op)}, {w.op_ref(op)}, {w[op.matrixD]}, {w[op.dstMemref]})"
    )
