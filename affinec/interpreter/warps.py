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

    `execute(op, operands, state, base) -> results` gets the 32 lanes' operands in
    lane order, the block's state and the linear thread id of lane 0, and returns the
    32 lanes' results."""

    __slots__ = ("execute", "op", "operands")

    def __init__(self, op: Operation, execute: Callable, operands: tuple):
        self.op = op
        self.execute = execute
        self.operands = operands


def _advance(thread, value):
    try:
        return thread.send(value)
    except StopIteration:
        return FINISHED


def run_collectives(
    arrived: list[tuple[int, Any, Any]], finished: list[int], state, block_size: int
) -> tuple[list[tuple[int, Any, Any]], list[int]]:
    """Finish a round of `gpu_ops.run_grid` in which some lanes yielded a
    `WarpCollective`: warp by warp, execute the collective the warp's lanes wait at
    and resume them, until every lane waits at a barrier or has returned.

    `arrived` holds `(thread id, coroutine, what it yielded)`, `finished` the threads
    that returned this round; both are returned updated."""
    warps: dict[int, list] = {}
    for entry in arrived:
        warps.setdefault(entry[0] // WARP_SIZE, []).append(entry)
    for t in finished:
        warps.setdefault(t // WARP_SIZE, []).append((t, None, FINISHED))
    out_arrived: list[tuple[int, Any, Any]] = []
    out_finished: list[int] = []
    for warp in sorted(warps):
        steps = sorted(warps[warp], key=lambda entry: entry[0])
        while any(type(site) is WarpCollective for _, _, site in steps):
            collective = _rendezvous(steps, state, block_size)
            results = collective.execute(
                collective.op,
                [site.operands for _, _, site in steps],
                state,
                steps[0][0],
            )
            resumed = []
            for (t, thread, _), result in zip(steps, results, strict=True):
                state.thread = t
                resumed.append((t, thread, _advance(thread, result)))
            steps = resumed
        for t, thread, site in steps:
            if site is FINISHED:
                out_finished.append(t)
            else:
                out_arrived.append((t, thread, site))
    return out_arrived, out_finished


def _rendezvous(steps: list, state, block_size: int) -> WarpCollective:
    """The collective every lane of the warp waits at, or the error saying why not."""
    first_t, _, first = next(s for s in steps if type(s[2]) is WarpCollective)
    op = first.op
    warp = first_t // WARP_SIZE
    where = f"warp {warp} of block {state.block} of @{state.kernel}"
    lanes_in_warp = min(WARP_SIZE, block_size - warp * WARP_SIZE)
    if lanes_in_warp < WARP_SIZE:
        raise InterpreterError(
            f"runs on a partial warp: {where} has {lanes_in_warp} "
            f"threads (the block has {block_size}); warp-collective ops need all "
            f"{WARP_SIZE} lanes",
            op,
        )
    for t, _, site in steps:
        if site is FINISHED:
            raise InterpreterError(
                f"lane {t % WARP_SIZE} of {where} returned while lane "
                f"{first_t % WARP_SIZE} waits at this warp-collective op",
                op,
            )
        if type(site) is not WarpCollective or site.op is not op:
            other = site.op if type(site) is WarpCollective else site
            raise InterpreterError(
                f"the lanes of {where} diverge: lane "
                f"{first_t % WARP_SIZE} is at this warp-collective op, lane "
                f"{t % WARP_SIZE} at {describe(other)}",
                op,
            )
    if len(steps) != WARP_SIZE:
        present = {t % WARP_SIZE for t, _, _ in steps}
        missing = min(set(range(WARP_SIZE)) - present)
        raise InterpreterError(
            f"lane {missing} of {where} returned while the others "
            "wait at this warp-collective op",
            op,
        )
    return first


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
    buffer = rows[0][0]
    tiles = np.empty((num_tiles, LDMATRIX_ROWS, LDMATRIX_ROWS), buffer.dtype)
    for lane in range(num_tiles * LDMATRIX_ROWS):
        buffer, offset = rows[lane]
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
        tile, row = divmod(lane, LDMATRIX_ROWS)
        tiles[tile, row] = read_row(op, buffer, offset, LDMATRIX_ROWS, lane)
    table = ldmatrix_table(transpose)
    return tiles[:, table[..., 0], table[..., 1]].transpose(1, 0, 2)


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
    """D = A x B + C for one warp: `a`, `b`, `c` are the 32 lanes' fragments (shapes
    (32,) + kind.a_fragment, and so on), the result the lanes' D fragments (f32).

    The MMA unit's order of summation is unspecified, so this computes each element
    of D as the *exact* sum of its k products and C, rounded once to f32: the
    products of f16, bf16 and tf32 values are exact in float64; their sum is computed
    in float64 and, wherever float64 rounding could change which f32 the sum rounds
    to, again exactly (`math.fsum`, rounded to odd). tf32 operands keep their top 19
    bits (`tf32`). Levels from the MMA on are therefore held to the dtype's
    tolerance, not to bit-identity with the scalar loops they replace.
    """
    m, n, k = kind.shape
    ta, tb, tc = (fragment_table(kind, x) for x in "abc")
    a64 = (
        a.astype(np.float64) if kind.operands != "tf32" else tf32(a).astype(np.float64)
    )
    b64 = (
        b.astype(np.float64) if kind.operands != "tf32" else tf32(b).astype(np.float64)
    )
    A = np.empty((m, k))
    B = np.empty((k, n))
    C = np.empty((m, n))
    A[ta[..., 0], ta[..., 1]] = a64
    B[tb[..., 0], tb[..., 1]] = b64
    C[tc[..., 0], tc[..., 1]] = np.asarray(c, np.float64)
    D = exact_dot(A, B, C)
    return D[tc[..., 0], tc[..., 1]]


def exact_dot(A: np.ndarray, B: np.ndarray, C: np.ndarray) -> np.ndarray:
    """A @ B + C (float64 arrays whose products are exact) rounded once to f32."""
    products = A[:, :, None] * B[None, :, :]
    total = products.sum(axis=1) + C
    D = total.astype(np.float32)
    finite = np.isfinite(total)
    # float64 summation errs by at most (k + 1) ulps of the magnitudes summed; where
    # the whole error interval rounds to one f32, that f32 is the exact answer's.
    bound = (A.shape[1] + 2) * 2.0**-52 * (np.abs(products).sum(axis=1) + np.abs(C))
    low = (total - 2 * bound).astype(np.float32)
    high = (total + 2 * bound).astype(np.float32)
    for i, j in np.argwhere(finite & (low != high)):
        D[i, j] = _rounded_sum([*products[i, :, j].tolist(), float(C[i, j])])
    return D


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
    "WARP_SIZE",
    "WarpCollective",
    "exact_dot",
    "ldmatrix",
    "mma",
    "run_collectives",
    "tf32",
]
