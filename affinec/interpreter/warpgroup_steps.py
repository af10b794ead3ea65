"""`affinec.warpgroup_mma` (the step `affinec-wgmma` writes) and the proxy fence.

The step runs as the warpgroup's collective (a 128-wide `warps.WarpCollective`):
the threads give their registers of the m64nN accumulator (their private
`%fragments`) and the same tiles and indices; A's 64 rows and B are read from the
shared tiles element by element where their layout puts them (row-major as the
promotion copied them, interleaved as the planner lays them out, or in the column
slabs TMA writes:
`affinec.dialects.affinec_wgmma`), in 16-byte runs race-checked as the warpgroup's
reads (`WARPGROUP_READER`, as its `wgmma`s' are); D = A × B + C is computed one k16 `wgmma` at a time, each its exact sum
rounded once to f32 (`warps.exact_dot`, as `nvgpu.warpgroup.mma` computes), and
each thread's registers get their elements back (`wgmma_layouts.accumulator_table`).

The lowered form (`nvvm.wgmma.mma_async` on 64-bit descriptors, `warpgroups.py`)
reads the tiles through the descriptors' fields instead, so a wrong leading or
stride byte offset is a wrong answer there.
"""

from __future__ import annotations

import math

import numpy as np

from affinec.dialects.affinec_wgmma import (
    CORE,
    WGMMA_ROWS,
    WGMMA_STEP,
    FenceProxyAsyncSharedOp,
    WarpgroupMmaRegistersOp,
    WarpgroupMmaStepOp,
    tile_offset,
)
from affinec.dialects.nvgpu import MmaKind
from affinec.dialects.nvvm_wgmma_registers import WgmmaRegistersRunOp
from affinec.hardware.wgmma_layouts import (
    WARPGROUP_SIZE,
    MatrixDescriptor,
    accumulator_table,
)
from affinec.interpreter.codegen import FunctionWriter, emits
from affinec.interpreter.shared_memory import (
    LANDED,
    MANY_READERS,
    WARPGROUP_READER,
    SharedArray,
    share_warpgroup_reads,
)
from affinec.interpreter.support import InterpreterError
from affinec.interpreter.warp_ops import bf16
from affinec.interpreter.warpgroups import (
    InFlightRead,
    _issued,
    _operand,
    _same_for_all,
)
from affinec.interpreter.warps import WarpCollective, exact_dot
from affinec.ir.mma_layouts import fragment_table


def _positions(
    shape: tuple[int, ...], leading: tuple[int, ...], rows: range, cols: int,
    pitch: int, height: int,
) -> np.ndarray:  # fmt: skip
    """Flat positions of the tile's elements (r, c), r in `rows`, c < `cols`, in a
    buffer of `shape` whose leading indices are `leading` (the tile of `height`
    rows row-major, interleaved with core matrices `pitch` rows apart, or in column
    slabs: `tile_offset`)."""
    tile = math.prod(shape[len(leading) :])
    base = 0
    for i, n in zip(leading, shape[: len(leading)], strict=True):
        base = base * n + i
    base *= tile
    r = np.arange(rows.start, rows.stop)[:, None]
    c = np.arange(cols)[None, :]
    return base + tile_offset(r, c, height, cols, pitch)


def _read_tile(
    op: WarpgroupMmaStepOp, buffer, positions: np.ndarray, state, base: int
) -> np.ndarray:
    """The elements at `positions` (rows x columns, columns a multiple of 8), read in
    16-byte runs by the warpgroup's threads in turn, race-checked."""
    if not isinstance(buffer, SharedArray):
        raise InterpreterError("reads a tile of shared memory", op)
    flat = buffer.flat_view()
    if positions.min() < 0 or positions.max() >= flat.data.size:
        raise InterpreterError(
            f"reads elements {int(positions.min())} to {int(positions.max())} of "
            f"%{buffer.name}, a buffer of {flat.data.size}",
            op,
        )
    starts = positions[:, ::CORE].reshape(-1)
    # read by the warpgroup, as its wgmmas read (an arrival of one of its threads
    # hands the tiles back), not by any one thread
    warpgroup = WARPGROUP_READER - base // WARPGROUP_SIZE
    at = (starts[:, None] + np.arange(CORE)).reshape(-1)
    before, read_before = flat.reader[at], flat.read_epoch[at] == state.epoch
    data = flat.read_rows(starts, CORE, np.full(len(starts), warpgroup))
    if data is None:
        data = _read_landed(flat, starts, state, base)
    if data is None:  # run by run, which names what is wrong
        runs = []
        threads = base + np.arange(len(starts)) % WARPGROUP_SIZE
        for start, t in zip(starts.tolist(), threads.tolist(), strict=True):
            state.thread = t
            runs.append(flat.read_run(start, CORE, op.name))
        data = np.stack(runs)
        # each run read (and checked) by a thread of the warpgroup: the reads are
        # the warpgroup's, as above
        own = (flat.reader[at] >= base) & (flat.reader[at] < base + WARPGROUP_SIZE)
        flat.reader[at[own]] = warpgroup
    # a tile other warpgroups read too (B): each hands back its own reads
    share_warpgroup_reads(flat.reader, at, before, read_before, base // WARPGROUP_SIZE)
    return np.asarray(data, np.float64).reshape(positions.shape)


def _read_landed(flat, starts: np.ndarray, state, base: int) -> np.ndarray | None:
    """`_read_tile`'s runs from `starts`, run k read by thread `base + k % 128`,
    all at once, leaving the marks the run-by-run reads leave (the warpgroup's
    read, or several readers' where another read the element in this interval),
    where those reads cannot fail: the runs do not overlap, and each element
    written in this interval was landed by a TMA load whose phase the thread
    reading it waited for. A pipeline's tiles by TMA are such: `read_rows` leaves
    them to the run-by-run reads, which took most of a TMA kernel's time. None,
    having changed nothing, where the runs must be read one by one (they name
    what is wrong)."""
    count = len(starts)
    at = (starts[:, None] + np.arange(CORE)).reshape(-1)
    threads = np.repeat(base + np.arange(count) % WARPGROUP_SIZE, CORE)
    if at.min() < 0 or at.max() >= flat.data.size or np.unique(at).size != at.size:
        return None
    e = state.epoch
    if flat.written_in[0] == e:
        clash = (flat.write_epoch[at] == e) & (flat.writer[at] != threads)
        if clash.any():
            marks = flat.writer[at][clash]
            if state.barriers is None or (marks > LANDED).any():
                return None
            readers = threads[clash]
            for mark in np.unique(marks).tolist():
                for thread in np.unique(readers[marks == mark]).tolist():
                    if not state.barriers.visible(mark, thread):
                        return None
    before, read_before = flat.reader[at], flat.read_epoch[at] == e
    flat.read_epoch[at] = e
    several = read_before & (before != threads)
    flat.reader[at] = np.where(
        several, MANY_READERS, WARPGROUP_READER - base // WARPGROUP_SIZE
    )
    state.thread = int(threads[-1])
    return flat.data[at].reshape(count, CORE)


def warpgroup_step(op: WarpgroupMmaStepOp, lanes: list, state, base: int) -> list:
    """D = A x B + C by the warpgroup of thread `base`; `lanes[t]` is thread t's
    (fragments, A, A's indices, B, B's indices)."""
    _, a, a_idx, b, b_idx = lanes[0]
    for t, (_, a_t, ai, b_t, bi) in enumerate(lanes):
        if a_t is not a or b_t is not b or ai != a_idx or bi != b_idx:
            raise InterpreterError(
                f"thread {t} of the warpgroup gives other tiles or indices than "
                "thread 0",
                op,
            )
    rows_a, k, inter_a = op.a_tile()
    rows_b, cols_b, inter_b = op.b_tile()
    row = a_idx[-1]
    if row % CORE or not 0 <= row <= rows_a - WGMMA_ROWS:
        raise InterpreterError(
            f"reads rows {row} to {row + WGMMA_ROWS - 1} of A, a tile of {rows_a} rows",
            op,
        )
    state.thread = base
    pa = _positions(
        a.shape, a_idx[:-1], range(row, row + WGMMA_ROWS), k, inter_a, rows_a
    )
    pb = _positions(b.shape, b_idx, range(rows_b), cols_b, inter_b, rows_b)
    matrix_a = _read_tile(op, a, pa, state, base)
    matrix_b = _read_tile(op, b, pb, state, base)
    # the step's reads last while its group is in flight (`pending`): a load onto
    # them before the warpgroup's next step (or wait) retires it is a race
    queue = _issued(state, base)
    for tile, positions in ((a, pa), (b, pb)):
        read = InFlightRead(op, tile.flat_view(), positions.reshape(-1))
        queue.open.append(read)
        state.wgmma_reads.append(read)
    queue.commit()
    queue.retire(state, op.groups_left)
    if op.b_k_major is not None:
        matrix_b = matrix_b.T  # N x K as read, K x N to multiply
    tiles = [matrix_b[k0 : k0 + WGMMA_STEP] for k0 in range(0, k, WGMMA_STEP)]
    _accumulate_fragments(op.n, lanes, matrix_a, tiles)
    return [None] * len(lanes)


def _accumulate_fragments(n: int, lanes: list, a: np.ndarray, tiles: list) -> None:
    """Each thread's registers of the m64nN accumulator (`lanes[t][0]`) plus A x B,
    one k16 `wgmma` at a time (B's 16 x N `tiles` in turn)."""
    rows, cols = accumulator_table(n)
    c = np.empty((WGMMA_ROWS, n), np.float64)
    c[rows, cols] = np.stack([np.asarray(f, np.float64).reshape(-1) for f, *_ in lanes])
    d = _accumulate(a, tiles, c)[rows, cols].astype(np.float32)
    for t, (fragments, *_) in enumerate(lanes):
        fragments[...] = d[t].reshape(fragments.shape)


@emits(WarpgroupMmaStepOp)
def _step(op: WarpgroupMmaStepOp, w: FunctionWriter) -> None:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel or a thread band", op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(warpgroup_step, "warpgroup_step")
    a_idx = ", ".join(w.names(op.a_indices))
    b_idx = ", ".join(w.names(op.b_indices))
    w.line(
        f"yield {collective}({w.op_ref(op)}, {fn}, ({w[op.fragments]}, {w[op.a]}, "
        f"({a_idx},), {w[op.b]}, ({b_idx}{',' if b_idx else ''})), {WARPGROUP_SIZE})"
    )


@emits(FenceProxyAsyncSharedOp)
def _fence(op: FenceProxyAsyncSharedOp, w: FunctionWriter) -> None:
    w.line("pass  # the interpreter's shared memory has one proxy")


# -- A from registers ----------------------------------------------------------------


def _a_from_fragments(fragments: np.ndarray) -> np.ndarray:
    """The warpgroup's m64 x (16 S) A from its threads' fragments, (128, S, 4, 2):
    warp w's lanes hold rows 16 w on of each step in `mma.sync` m16n8k16's A
    layout (`affinec.ir.mma_layouts`)."""
    table = fragment_table(MmaKind(16, 8, 16, "f16"), "a")  # (32, 4, 2, 2)
    steps = fragments.shape[1]
    a = np.empty((WGMMA_ROWS, WGMMA_STEP * steps), np.float64)
    for w in range(WARPGROUP_SIZE // 32):
        lanes = fragments[32 * w : 32 * (w + 1)]  # (32, S, 4, 2)
        for s in range(steps):
            rows = 16 * w + table[..., 0]
            cols = WGMMA_STEP * s + table[..., 1]
            a[rows, cols] = lanes[:, s]
    return a


def _accumulate(a: np.ndarray, tiles: list[np.ndarray], c: np.ndarray) -> np.ndarray:
    """C + A x B one k16 `wgmma` at a time, B the steps' 16 x N tiles in turn."""
    for s, b in enumerate(tiles):
        step = slice(WGMMA_STEP * s, WGMMA_STEP * (s + 1))
        c = exact_dot(a[:, step], b, c).astype(np.float64)
    return c


def warpgroup_registers_step(
    op: WarpgroupMmaRegistersOp, lanes: list, state, base: int
) -> list:
    """D = A x B + C by the warpgroup of thread `base`, A from the threads'
    fragments; `lanes[t]` is thread t's (fragments, A's fragments, B, B's
    indices)."""
    _, _, b, b_idx = lanes[0]
    for t, (_, _, b_t, bi) in enumerate(lanes):
        if b_t is not b or bi != b_idx:
            raise InterpreterError(
                f"thread {t} of the warpgroup gives another tile or indices than "
                "thread 0",
                op,
            )
    rows_b, cols_b, pitch = op.b_tile()
    k = op.k
    state.thread = base
    tiles = []
    queue = _issued(state, base)
    for tap in np.ndindex(*op.tap_extents()):
        leading = (*b_idx, *(int(x) for x in tap))
        pb = _positions(b.shape, leading, range(rows_b), cols_b, pitch, rows_b)
        matrix = _read_tile(op, b, pb, state, base)
        read = InFlightRead(op, b.flat_view(), pb.reshape(-1))
        queue.open.append(read)
        state.wgmma_reads.append(read)
        if op.b_k_major is not None:
            matrix = matrix.T  # N x K as read, K x N to multiply
        tiles += [matrix[k0 : k0 + WGMMA_STEP] for k0 in range(0, k, WGMMA_STEP)]
    queue.commit()
    queue.retire(state, op.groups_left)
    fragments = np.stack(
        [np.stack([np.asarray(f, np.float64) for f in lane[1]]) for lane in lanes]
    ).reshape(WARPGROUP_SIZE, len(tiles), 4, 2)
    _accumulate_fragments(op.n, lanes, _a_from_fragments(fragments), tiles)
    return [None] * len(lanes)


@emits(WarpgroupMmaRegistersOp)
def _registers_step(op: WarpgroupMmaRegistersOp, w: FunctionWriter) -> None:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel or a thread band", op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(warpgroup_registers_step, "warpgroup_registers_step")
    a = "".join(f"{x}, " for x in w.names(op.a))
    b_idx = "".join(f"{x}, " for x in w.names(op.b_indices))
    w.line(
        f"yield {collective}({w.op_ref(op)}, {fn}, ({w[op.fragments]}, ({a}), "
        f"{w[op.b]}, ({b_idx})), {WARPGROUP_SIZE})"
    )


def nvvm_registers_run(op: WgmmaRegistersRunOp, lanes: list, state, base: int) -> list:
    """A run of `wgmma`s, A from registers: each thread gives the steps' B
    descriptors (the same for all), its A registers (4 a step) and its N/2
    accumulator registers."""
    _same_for_all(op, [d for d, _, _ in lanes], "descriptors")
    kind = op.kind.data
    element = np.dtype(np.float16) if kind == "f16" else bf16()
    packed = np.array([a for _, a, _ in lanes], np.int64).astype(np.int32)
    halves = packed.view(element).astype(np.float64)  # (128, 8 S)
    a = _a_from_fragments(halves.reshape(WARPGROUP_SIZE, op.steps, 4, 2))
    n = op.columns
    state.thread = base
    tiles = [
        _operand(
            op,
            MatrixDescriptor.decode(int(d)),
            n,
            op.transposed_b is None,
            2,
            state,
            base,
        ).T  # fmt: skip
        for d in lanes[0][0]
    ]
    rows, cols = accumulator_table(n)
    c = np.empty((WGMMA_ROWS, n), np.float64)
    c[rows, cols] = np.array([lane[2] for lane in lanes], np.float64)
    d = _accumulate(a, tiles, c)
    return [tuple(d[rows[t], cols[t]]) for t in range(WARPGROUP_SIZE)]


@emits(WgmmaRegistersRunOp)
def _registers_run(op: WgmmaRegistersRunOp, w: FunctionWriter) -> None:
    if w.gpu_context is None:
        raise InterpreterError("outside a kernel", op)
    collective = w.global_(WarpCollective, "warp_collective")
    fn = w.global_(nvvm_registers_run, "nvvm_registers_run")
    groups = [
        "(" + "".join(f"{x}, " for x in w.names(g)) + ")"
        for g in (op.descriptorsB, op.a)
    ]
    w.line(
        f"{w.define(op.res)} = yield {collective}({w.op_ref(op)}, {fn}, "
        f"({groups[0]}, {groups[1]}, {w[op.inouts]}), {WARPGROUP_SIZE})"
    )
