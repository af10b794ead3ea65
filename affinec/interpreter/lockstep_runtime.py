"""What the code of a block in lockstep (`lockstep`) calls at run time: the
block's context, its threads' ids, the warp collectives over whole warps, values
made into arrays over the lanes, runs of elements, pointers of some lanes, and
thread 0's context for a block band beside thread bands."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation

from affinec.dialects import nvgpu
from affinec.dialects.nvgpu import WARP_SIZE
from affinec.hardware.wgmma_layouts import WARPGROUP_SIZE
from affinec.interpreter import async_copies
from affinec.interpreter.lanes import (
    checked_offsets,
)
from affinec.interpreter.shared_memory import BlockState, SharedArray
from affinec.interpreter.support import MAX_GRID_BLOCKS, InterpreterError
from affinec.interpreter.warpgroup_steps import (
    warpgroup_registers_step,
    warpgroup_step,
)
from affinec.interpreter.warps import ldmatrix, mma, whole_warps
from affinec.ir.mma_layouts import LDMATRIX_ROWS, ldmatrix_table


class LockstepContext:
    """A block in lockstep: `ids` as a thread's context has them (the thread ids
    unused), `lanes` the threads running now, `block` the `BlockState`, `copies`
    the block's asynchronous copies (`async_copies.ThreadCopies`: its threads
    make groups and wait together)."""

    __slots__ = ("block", "copies", "ids", "lanes")

    def __init__(self, ids: tuple[int, ...], block: BlockState, lanes: np.ndarray):
        self.ids = ids
        self.block = block
        self.lanes = lanes
        self.copies = async_copies.ThreadCopies()


def check_grid(name: str, grid: tuple[int, int, int]) -> None:
    """Refuse a grid whose block ids leave the ranges a lockstep kernel's index
    arithmetic was checked against (no GPU launches such a grid)."""
    if max(grid) > MAX_GRID_BLOCKS:
        raise InterpreterError(
            f"@{name}: a grid of {grid} blocks; a GPU launches at most "
            f"{MAX_GRID_BLOCKS} along a dimension"
        )


def run_block(
    kernel: Callable[..., Any],
    ids: tuple[int, ...],
    state: BlockState,
    args: Sequence[Any],
    shared: Sequence[SharedArray],
) -> None:
    """Run one block of `kernel` in lockstep (`gpu_ops.run_grid` checked the
    launch and made the block's state and shared buffers)."""
    lanes = np.arange(math.prod(state.threads), dtype=np.int64)
    kernel(LockstepContext(ids, state, lanes), *args, *shared)


def thread_ids(lanes: np.ndarray, block: tuple[int, ...], dim: int) -> np.ndarray:
    """The `dim` (x, y, z) thread id of each of `lanes` (linear thread numbers)."""
    sx, sy, _ = block
    if dim == 0:
        return lanes % sx
    return lanes // sx % sy if dim == 1 else lanes // (sx * sy)


def ldmatrix_lanes(
    op: nvgpu.LdMatrixOp, array, index: tuple, lanes: np.ndarray, state: BlockState
) -> np.ndarray:
    """`nvgpu.ldmatrix` for a block's threads (whole warps, in order): each warp's
    rows as `warps.ldmatrix` reads them, the addresses of the lanes that give one
    (the first 8 of each tile) checked as `checked_pointer` checks them."""
    whole_warps(op, lanes)
    used = op.num_tiles * LDMATRIX_ROWS
    rows_given = lanes % WARP_SIZE < used
    offsets = checked_offsets(op, index, tuple(array.shape), len(lanes), rows_given)
    flat = array.flat_view() if isinstance(array, SharedArray) else array.reshape(-1)
    return ldmatrix_warps(
        op, op.num_tiles, op.is_transposed, flat, offsets, lanes, state
    )


def ldmatrix_warps(
    op: Operation,
    tiles: int,
    transposed: bool,
    flat,
    offsets: np.ndarray,
    lanes: np.ndarray,
    state: BlockState,
) -> np.ndarray:
    """`warps.ldmatrix` for each warp of `lanes` (whole warps, in order), the rows
    from the flat buffer at each lane's offset: (lanes, tiles, 2). All warps' rows
    are read at once where that gives what reading them warp by warp gives
    (`SharedArray.read_rows`), else warp by warp (which names what is wrong)."""
    n, used = len(lanes), tiles * LDMATRIX_ROWS
    block = _ldmatrix_block(tiles, transposed, flat, offsets, lanes, state)
    if block is not None:
        return block
    out = np.empty((n, tiles, 2), flat.dtype)
    for first in range(0, n, WARP_SIZE):
        rows = [(flat, int(offsets[first + k])) for k in range(used)]
        base = int(lanes[first])
        out[first : first + WARP_SIZE] = ldmatrix(
            op, rows, tiles, transposed, state, base
        )
    return out


def _ldmatrix_block(
    tiles: int,
    transposed: bool,
    flat,
    offsets: np.ndarray,
    lanes: np.ndarray,
    state: BlockState,
) -> np.ndarray | None:
    """`ldmatrix_warps` in one read of the shared buffer, or None (nothing read)."""
    if getattr(flat, "read_rows", None) is None or flat.dtype.itemsize != 2:
        return None
    used = tiles * LDMATRIX_ROWS
    giving = lanes % WARP_SIZE < used
    starts = np.broadcast_to(offsets, lanes.shape)[giving].astype(np.int64)
    if (starts % LDMATRIX_ROWS).any():  # rows of 16 bytes
        return None
    read = flat.read_rows(starts, LDMATRIX_ROWS, lanes[giving])
    if read is None:
        return None
    state.thread = int(lanes[-WARP_SIZE]) + used - 1  # as after the last warp's rows
    table = ldmatrix_table(transposed)
    rows = read.reshape(len(lanes) // WARP_SIZE, tiles, LDMATRIX_ROWS, LDMATRIX_ROWS)
    per_lane = rows[:, :, table[..., 0], table[..., 1]]  # (warps, tiles, 32, 2)
    return per_lane.transpose(0, 2, 1, 3).reshape(len(lanes), tiles, 2)


def mma_lanes(op: nvgpu.MmaSyncOp, a, b, c, lanes: np.ndarray) -> np.ndarray:
    """`nvgpu.mma.sync` for a block's threads (whole warps, in order): each warp's
    fragments as `warps.mma` takes them."""
    whole_warps(op, lanes)
    n = len(lanes)
    fragments = [
        np.broadcast_to(x, (n, *shape))
        for x, shape in zip(
            (a, b, c),
            (op.kind.a_fragment, op.kind.b_fragment, op.kind.c_fragment),
            strict=True,
        )
    ]
    return mma(op.kind, *fragments)


def lanes_of(value, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A fresh array of `shape` (lanes first) holding `value`, the same for every
    lane or each lane's own (its trailing dimensions lined up with `shape`'s)."""
    out = np.empty(shape, dtype)
    value = np.asarray(value)
    if value.ndim and value.shape[0] == shape[0] and value.ndim < len(shape):
        value = value.reshape(
            shape[:1] + (1,) * (len(shape) - value.ndim) + value.shape[1:]
        )
    out[...] = value
    return out


def _runs(index: tuple, width: int) -> tuple:
    """The index of each lane's run of `width` elements from `index` along the
    last dimension: (lanes, width) after broadcasting."""
    return tuple(np.asarray(i)[..., None] for i in index[:-1]) + (
        np.asarray(index[-1])[..., None] + np.arange(width),
    )


def gather_runs(array: np.ndarray, index: tuple, width: int) -> np.ndarray:
    """Each lane's run of `width` elements of a global array: (lanes, width)."""
    return array[_runs(index, width)]


def scatter_runs(array: np.ndarray, index: tuple, width: int, values) -> None:
    """`gather_runs`' elements written: each lane's `values` (or one for all)."""
    array[_runs(index, width)] = values


def run_positions(start, count: int, width: int) -> np.ndarray:
    """The flat positions of each lane's run of `width` elements from `start` (lane
    by lane, or one for all), lane after lane."""
    starts = np.broadcast_to(np.asarray(start, np.int64), (count,))
    return (starts[:, None] + np.arange(width)).reshape(-1)


def pointer_offsets(pointer: tuple, n: int) -> np.ndarray:
    """Each of `n` lanes' offset of a pointer (one for all, or one a lane), int64."""
    return np.broadcast_to(np.asarray(pointer[1], np.int64), (n,))


def pointer_lanes(pointer: tuple, taken: np.ndarray) -> tuple:
    """The pointers of the lanes `taken`: the same buffer (a private one's rows
    are the threads' numbers), their offsets."""
    buffer, offsets = pointer
    return buffer, offsets[taken] if isinstance(offsets, np.ndarray) else offsets


class ThreadZero:
    """Thread 0 of a block in lockstep as a thread's context (`gpu_ops`'s emitters
    take it): the block's ids and state, its copies those of the block."""

    __slots__ = ("block", "copies", "ids", "linear")

    def __init__(self, ctx: LockstepContext) -> None:
        self.ids = ctx.ids
        self.block = ctx.block
        self.copies = ctx.copies
        self.linear = 0


def as_thread_zero(ctx: LockstepContext) -> ThreadZero:
    """Thread 0's context, its lanes' reads marked (its own accesses are checked
    one by one against them) and named as the running thread."""
    for buffer in ctx.block.buffers:
        buffer.mark_lane_reads()
    ctx.block.thread = 0
    return ThreadZero(ctx)


def warpgroup_step_lanes(
    op: Operation,
    fragments: np.ndarray,
    a: SharedArray,
    a_indices: tuple,
    b: SharedArray,
    b_indices: tuple,
    lanes: np.ndarray,
    state: BlockState,
) -> None:
    """`affinec.warpgroup_mma` for a block's threads (whole warpgroups, in order):
    each warpgroup's step as `warpgroup_steps.warpgroup_step` takes it, thread k's
    registers the k-th of the private `fragments` (written in place), its indices
    the k-th of each index that differs between threads."""
    whole_warpgroups(op, lanes)
    n = len(lanes)
    for first in range(0, n, WARPGROUP_SIZE):
        group = [
            (
                fragments[k],
                a,
                _lane_indices(a_indices, k),
                b,
                _lane_indices(b_indices, k),
            )
            for k in range(first, first + WARPGROUP_SIZE)
        ]
        warpgroup_step(op, group, state, int(lanes[first]))


def warpgroup_registers_lanes(
    op: Operation,
    fragments: np.ndarray,
    a: tuple,
    a_varying: tuple[bool, ...],
    b: SharedArray,
    b_indices: tuple,
    lanes: np.ndarray,
    state: BlockState,
) -> None:
    """`affinec.warpgroup_mma_registers` for a block's threads (whole warpgroups, in
    order), as `warpgroup_steps.warpgroup_registers_step` takes each warpgroup's:
    thread k's A fragments the k-th of each of `a` that differs between threads
    (`a_varying`), its registers the k-th of the private `fragments`."""
    whole_warpgroups(op, lanes)
    for first in range(0, len(lanes), WARPGROUP_SIZE):
        group = [
            (
                fragments[k],
                tuple(x[k] if v else x for x, v in zip(a, a_varying, strict=True)),
                b,
                _lane_indices(b_indices, k),
            )
            for k in range(first, first + WARPGROUP_SIZE)
        ]
        warpgroup_registers_step(op, group, state, int(lanes[first]))


def whole_warpgroups(op: Operation, lanes: np.ndarray) -> None:
    """Refuse a warpgroup-collective op on a block of a partial warpgroup."""
    if len(lanes) % WARPGROUP_SIZE:
        raise InterpreterError(
            f"runs on a partial warpgroup: the block has {len(lanes)} threads; "
            f"warpgroup-collective ops need all {WARPGROUP_SIZE} threads",
            op,
        )


def _lane_indices(indices: tuple, k: int) -> tuple:
    """Lane k's indices: an index that differs between threads is an array."""
    return tuple(int(i[k]) if isinstance(i, np.ndarray) else i for i in indices)
