"""Warps: the rendezvous of warp-collective ops, and what `ldmatrix` and `mma.sync`
compute for a whole warp.

A lane reaching a warp-collective op yields a `WarpCollective` naming the op, the
function that executes it for a warp and the lane's operands; the generated code
reads

    d_0 = yield WARP_COLLECTIVE_3(OP_4, MMA_5, (a_0, b_0, c_0))

When a round of `gpu_ops.run_grid` (every thread run to its next yield) finds a lane
at a collective, `run_collectives` takes over for that round: for each warp with a
lane at a collective, it checks that all 32 lanes of the warp wait at the same op (a
partial warp, lanes at different ops or lanes that returned are an error naming the
op), calls the op's function once with the 32 operand tuples, and resumes each lane
with its own result. Lanes then run on to the next collective, a barrier or their
end.

`ldmatrix` and `mma` here are the PTX ISA's semantics, with the layouts of
`affinec.ir.mma_layouts`; the emitters of both levels (nvgpu's vectors and memrefs,
nvvm's registers and pointers) convert to and from them.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from xdsl.ir import Operation

from affinec.dialects.nvgpu import WARP_SIZE, MmaKind
from affinec.interpreter.support import InterpreterError, describe
from affinec.ir.mma_layouts import LDMATRIX_ROWS, fragment_table, ldmatrix_table

FINISHED = object()
"""What `step_warp` reports for a lane that returned."""


class WarpCollective:
    """What a lane yields at a warp-collective op: the op, the function running it
    for the warp and the lane's operands.

    `execute(op, operands, state, base) -> results` gets the lanes' operands in
    lane order, the block's state and the linear thread id of lane 0, and returns the
    lanes' results. `width` is how many threads meet: a warp (32), or a warpgroup
    (128) for Hopper's `wgmma`."""

    __slots__ = ("execute", "op", "operands", "width")

    def __init__(
        self, op: Operation, execute: Callable, operands: tuple, width: int = WARP_SIZE
    ):
        self.op = op
        self.execute = execute
        self.operands = operands
        self.width = width


class Wait:
    """What a thread yields when it waits for other threads of its block other than
    at a `gpu.barrier` (at an mbarrier): `ready()` says whether it may go on,
    `stuck()` why it never will when no other thread can move."""

    __slots__ = ("op",)

    def __init__(self, op: Operation):
        self.op = op

    def ready(self) -> bool:
        raise NotImplementedError

    def stuck(self) -> str:
        raise NotImplementedError

    def unblock(self) -> bool:
        """Let what the thread waits for happen, if it can without another thread
        (an asynchronous copy finishing); whether anything changed."""
        return False


def _advance(thread, value):
    try:
        return thread.send(value)
    except StopIteration:
        return FINISHED


def run_collectives(
    arrived: list[tuple[int, Any, Any]], finished: list[int], state, block_size: int
) -> tuple[list[tuple[int, Any, Any]], list[int]]:
    """Finish a round of `gpu_ops.run_grid` in which some threads yielded a
    `WarpCollective` or a `Wait`: execute each collective once every thread of its
    warp (or warpgroup) waits at it, resume a waiting thread once it may go on, and
    repeat until every thread waits at a barrier or has returned. A collective that
    cannot meet and a wait that can never end are errors.

    `arrived` holds `(thread id, coroutine, what it yielded)`, `finished` the threads
    that returned this round; both are returned updated."""
    at: dict[int, list] = {t: [thread, site] for t, thread, site in arrived}
    done = list(finished)
    moved = True
    while moved:
        moved = False
        groups: dict[tuple[int, int], list[int]] = {}
        for t in sorted(at):
            entry = at[t]
            while isinstance(entry[1], Wait) and entry[1].ready():
                state.thread = t
                entry[1] = _advance(entry[0], None)
                moved = True
            site = entry[1]
            if site is FINISHED:
                del at[t]
                done.append(t)
            elif type(site) is WarpCollective:
                groups.setdefault((site.width, t // site.width), []).append(t)
        for (width, _), lanes in groups.items():
            first = at[lanes[0]][1]
            if len(lanes) != width or any(at[t][1].op is not first.op for t in lanes):
                continue
            results = first.execute(
                first.op, [at[t][1].operands for t in lanes], state, lanes[0]
            )
            for t, result in zip(lanes, results, strict=True):
                state.thread = t
                at[t][1] = _advance(at[t][0], result)
            moved = True
        if not moved:
            for _, site in at.values():
                if isinstance(site, Wait) and site.unblock():
                    moved = True
    for t in sorted(at):
        site = at[t][1]
        if type(site) is WarpCollective:
            _refuse_partial(t, site, at, done, state, block_size)
        if isinstance(site, Wait):
            raise InterpreterError(
                f"waits forever (block {state.block} of @{state.kernel}): "
                f"{state.thread_name(t)} waits here, and {site.stuck()}",
                site.op,
            )
    remaining = [(t, thread, site) for t, (thread, site) in sorted(at.items())]
    return remaining, done


def _refuse_partial(
    t: int, site: WarpCollective, at: dict, done: list[int], state, block_size: int
) -> None:
    """The error saying why the warp (or warpgroup) of thread `t`, which waits at a
    collective, never met there."""
    op, width = site.op, site.width
    group = t // width
    unit = "warp" if width == WARP_SIZE else "warpgroup"
    where = f"{unit} {group} of block {state.block} of @{state.kernel}"
    present = min(width, block_size - group * width)
    if present < width:
        raise InterpreterError(
            f"runs on a partial {unit}: {where} has {present} threads (the block "
            f"has {block_size}); {unit}-collective ops need all {width} threads",
            op,
        )
    for other in range(group * width, (group + 1) * width):
        if other in done:
            raise InterpreterError(
                f"lane {other % width} of {where} returned while lane "
                f"{t % width} waits at this {unit}-collective op",
                op,
            )
        there = at[other][1]
        if type(there) is not WarpCollective or there.op is not op:
            raise InterpreterError(
                f"the lanes of {where} diverge: lane {t % width} is at this "
                f"{unit}-collective op, lane {other % width} at "
                f"{describe(getattr(there, 'op', there))}",
                op,
            )


# --------------------------------------------------------------------------------------
# ldmatrix
# --------------------------------------------------------------------------------------


def read_row(op: Operation, buffer, offset: int, count: int, lane: int) -> np.ndarray:
    """`count` contiguous elements of a flat buffer (a numpy array or a shared
    buffer's flat view) from `offset`, read by `lane`, checked."""
    if not 0 <= offset <= len(buffer) - count:
        raise InterpreterError(
            f"lane {lane} reads elements [{offset}, {offset + count}) "
            f"of a buffer of {len(buffer)} elements",
            op,
        )
    reader = getattr(buffer, "read_run", None)
    if reader is not None:
        return reader(offset, count, f"{op.name}, lane {lane}")
    return np.array(buffer[offset : offset + count])


def ldmatrix(
    op: Operation,
    rows: Sequence[tuple[Any, int]],
    num_tiles: int,
    transpose: bool,
    state,
    base: int,
) -> np.ndarray:
    """What each lane receives from `ldmatrix.m8n8.x{num_tiles}.b16`: an array of
    shape (32, num_tiles, 2), [lane, tile, element].

    `rows[lane]` is the lane's address as (flat buffer, element offset); lanes 8i to
    8i+7 address rows 0 to 7 of tile i, each row 8 elements, 16-byte aligned (the
    others are ignored, as on the GPU). Each row is read by its lane (thread
    `base + lane`), so shared memory reads are race-checked like any other.
    """
    rows = rows[: num_tiles * LDMATRIX_ROWS]
    tiles = _ldmatrix_rows_at_once(rows, state, base)
    if tiles is None:
        tiles = _ldmatrix_row_by_row(op, rows, state, base)
    table = ldmatrix_table(transpose)
    return tiles[:, table[..., 0], table[..., 1]].transpose(1, 0, 2)


def _ldmatrix_row_by_row(
    op: Operation, rows: Sequence[tuple[Any, int]], state, base: int
) -> np.ndarray:
    """The tiles of an `ldmatrix`, each row read (and checked) by its lane."""
    lanes = len(rows)
    tiles = np.empty((lanes, LDMATRIX_ROWS), rows[0][0].dtype)
    for lane, (buffer, offset) in enumerate(rows):
        if buffer.dtype.itemsize != 2:
            raise InterpreterError(
                f"ldmatrix reads 16-bit elements, lane {lane}'s "
                f"buffer holds {buffer.dtype}",
                op,
            )
        if offset * 2 % 16:
            raise InterpreterError(
                f"lane {lane}'s row address (element {offset}) is not 16-byte aligned",
                op,
            )
        state.thread = base + lane
        tiles[lane] = read_row(op, buffer, offset, LDMATRIX_ROWS, lane)
    return tiles.reshape(lanes // LDMATRIX_ROWS, LDMATRIX_ROWS, LDMATRIX_ROWS)


def _ldmatrix_rows_at_once(
    rows: Sequence[tuple[Any, int]], state, base: int
) -> np.ndarray | None:
    """The tiles of an `ldmatrix` (num_tiles, 8, 8) read in one go from one shared
    buffer, where that gives what reading row by row gives (`SharedArray.read_rows`);
    else None (the rows are then read one by one, which names what is wrong)."""
    buffer = rows[0][0]
    if getattr(buffer, "read_rows", None) is None or buffer.dtype.itemsize != 2:
        return None
    if any(row[0] is not buffer for row in rows):
        return None
    starts = np.fromiter((row[1] for row in rows), np.int64, len(rows))
    if (starts % LDMATRIX_ROWS).any():  # 16 bytes of 16-bit elements
        return None
    lanes = len(rows)
    read = buffer.read_rows(starts, LDMATRIX_ROWS, np.arange(base, base + lanes))
    if read is None:
        return None
    state.thread = base + lanes - 1  # as after reading row by row
    return read.reshape(lanes // LDMATRIX_ROWS, LDMATRIX_ROWS, LDMATRIX_ROWS)


# --------------------------------------------------------------------------------------
# mma.sync
# --------------------------------------------------------------------------------------


def tf32(values: np.ndarray) -> np.ndarray:
    """f32 values as the tensor cores read them for tf32 MMAs: the low 13 bits of
    the mantissa are dropped (NaN stays NaN)."""
    bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
    kept = (bits & np.uint32(0xFFFFE000)).view(np.float32)
    return np.where(np.isnan(values), values, kept)


def mma(kind: MmaKind, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """D = A x B + C for whole warps: `a`, `b`, `c` are the lanes' fragments (shapes
    (32 w,) + kind.a_fragment, and so on, warp after warp), the result the lanes' D
    fragments (f32), each warp's product its own.

    The MMA unit's order of summation is unspecified, so this computes each element
    of D as the *exact* sum of its k products and C, rounded once to f32: the
    products of f16, bf16 and tf32 values are exact in float64; their sum is computed
    in float64 and, wherever float64 rounding could change which f32 the sum rounds
    to, again exactly (`math.fsum`, rounded to odd). tf32 operands keep their top 19
    bits (`tf32`). Levels from the MMA on are therefore held to the dtype's
    tolerance, not to bit-identity with the scalar loops they replace.
    """
    m, n, k = kind.shape
    warps = len(a) // WARP_SIZE
    ta, tb, tc = (fragment_table(kind, x) for x in "abc")
    if kind.operands == "tf32":
        a, b = tf32(a), tf32(b)
    A = np.empty((warps, m, k))
    B = np.empty((warps, k, n))
    C = np.empty((warps, m, n))
    A[:, ta[..., 0], ta[..., 1]] = a.reshape(warps, WARP_SIZE, *a.shape[1:])
    B[:, tb[..., 0], tb[..., 1]] = b.reshape(warps, WARP_SIZE, *b.shape[1:])
    C[:, tc[..., 0], tc[..., 1]] = np.reshape(c, (warps, WARP_SIZE, *c.shape[1:]))
    D = exact_dot(A, B, C)
    return D[:, tc[..., 0], tc[..., 1]].reshape(len(a), *kind.c_fragment)


def exact_dot(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """A @ B + C (float64 arrays whose products are exact) rounded once to f32; a
    stack of such products where the arrays have a leading dimension."""
    total = A @ B + C
    D = total.astype(np.float32)
    # float64 summation, in any order, errs by at most (k + 1) ulps of the
    # magnitudes summed; where the whole error interval rounds to one f32, that f32
    # is the exact answer's.
    magnitudes = np.abs(A) @ np.abs(B) + np.abs(C)
    bound = (A.shape[-1] + 2) * 2.0**-52 * magnitudes
    low = (total - 2 * bound).astype(np.float32)
    high = (total + 2 * bound).astype(np.float32)
    unsure = np.isfinite(total) & (low != high)
    if unsure.any():
        # Where every term is a multiple of one power of two q and the magnitudes
        # stay below 2**52 q, every partial sum is exact in float64: the sum is the
        # exact one, rounded once (f16 products often sum to an f32 midpoint).
        quantum = np.minimum(
            _lowest_bit(A).min(axis=-1)[..., :, None]
            * _lowest_bit(B).min(axis=-2)[..., None, :],
            _lowest_bit(C),
        )
        unsure &= ~(magnitudes < 2.0**52 * quantum)
    # a sum of zeros is -0 where every term is, which a matrix product's own
    # accumulator (+0 to start) loses: only a -0 in C can make one
    unsure |= (total == 0) & np.signbit(C)
    for at in np.argwhere(unsure):
        *stack, i, j = at
        terms = (A[(*stack, i, slice(None))] * B[(*stack, slice(None), j)]).tolist()
        terms.append(float(C[tuple(at)]))
        exact = any(terms) or math.isnan(total[tuple(at)])
        D[tuple(at)] = _rounded_sum(terms) if exact else np.float32(sum(terms))
    return D


def _lowest_bit(x: np.ndarray) -> np.ndarray:
    """The value of each element's lowest set bit (every multiple of it is a
    multiple of this power of two); infinity for zeros and non-finite elements."""
    mantissa, exponent = np.frexp(x)
    digits = np.abs(np.ldexp(mantissa, 53)).astype(np.int64)
    lowest = np.ldexp((digits & -digits).astype(np.float64), exponent - 53)
    return np.where(np.isfinite(x) & (x != 0), lowest, np.inf)


def _rounded_sum(terms: list[float]) -> np.float32:
    """The exact sum of `terms`, rounded once to f32: float64's correctly rounded sum,
    nudged to odd when inexact, so that rounding it to f32 is the single rounding
    (float64 has more than two extra bits; Boldo and Melquiond)."""
    s = math.fsum(terms)
    if math.isfinite(s):
        error = math.fsum([*terms, -s])
        if error and not struct.unpack("<q", struct.pack("<d", s))[0] & 1:
            s = math.nextafter(s, math.inf if error > 0 else -math.inf)
    return np.float32(s)


__all__ = [
    "FINISHED",
    "Wait",
    "WARP_SIZE",
    "WarpCollective",
    "exact_dot",
    "ldmatrix",
    "mma",
    "run_collectives",
    "tf32",
]


def whole_warps(op: Operation, lanes: np.ndarray) -> None:
    """Refuse a warp-collective op where a block in lockstep is not whole warps."""
    if len(lanes) % WARP_SIZE:
        raise InterpreterError(
            f"a warp-collective op in a block of {len(lanes)} threads: its last warp "
            f"has {len(lanes) % WARP_SIZE} of {WARP_SIZE} lanes",
            op,
        )
