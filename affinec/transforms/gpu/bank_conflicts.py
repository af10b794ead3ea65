"""How many shared-memory wavefronts each access of a warp costs (read-only analysis).

Shared memory has 32 banks of 4 bytes and serves 128 bytes per cycle. A warp's
access is split into phases (all 32 lanes for accesses of up to 4 bytes, 16 lanes
for 8 bytes, 8 for 16: `ldmatrix` rows and 16-byte asynchronous copies); within a
phase, lanes that touch different 4-byte words of one bank are served one after
the other. The cost of an access is the number of wavefronts over its phases, the
ideal one wavefront a phase (PlaidML's bank-conflict cost, and what the tuner uses).

At the mapped level every index is an affine function of the thread band's variable
and of loop variables, so the analysis evaluates each access for the 32 lanes of the
block's first warp, every other variable at its first value (conflicts repeat from
one iteration to the next: the loops shift all lanes' addresses alike).

    report = conflicts(grid_op)          # one entry per shared access
    report[0].wavefronts, report[0].ideal
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.dialects import arith
from xdsl.dialects.builtin import IntegerAttr, MemRefType, VectorType
from xdsl.ir import Block, Operation, SSAValue

from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu, nvgpu
from affinec.dialects.affinec import THREAD, PaddedLoadOp, mapping_of
from affinec.hardware.chips import BANK_BYTES, SHARED_BANKS, WARP_SIZE

BANKS = SHARED_BANKS
WORD = BANK_BYTES
WARP = WARP_SIZE


@dataclass(frozen=True)
class SharedAccess:
    op: Operation
    buffer: SSAValue
    wavefronts: int
    ideal: int

    @property
    def degree(self) -> float:
        """Wavefronts over the ideal: 1.0 is conflict-free."""
        return self.wavefronts / self.ideal


class _Unknown(Exception):
    """A value the evaluation cannot follow (the access is left out)."""


def shared_accesses(
    root: Operation,
) -> list[tuple[Operation, SSAValue, list[SSAValue], int]]:
    """The shared-memory accesses inside thread bands under `root`: (op, buffer,
    index values, bytes per lane)."""
    found = []
    for op in root.walk():
        entry = _access(op)
        if entry is None:
            continue
        buffer, indices, width = entry
        if gpu.memory_space(buffer.type) != gpu.WORKGROUP_ADDRESS_SPACE:
            continue
        if _thread_band(op) is None:
            continue
        found.append((op, buffer, indices, width))
    return found


_MappedAccess = (
    affine.LoadOp
    | affine.StoreOp
    | PaddedLoadOp
    | affine.VectorLoadOp
    | affine.VectorStoreOp
)


def _access(op: Operation) -> tuple[SSAValue, list[SSAValue], int] | None:
    if isinstance(op, nvgpu.LdMatrixOp):
        return op.srcMemref, list(op.indices), 16
    if isinstance(op, nvgpu.DeviceAsyncCopyOp):
        size = element_size(op.dst.type.get_element_type())  # pyright: ignore
        return op.dst, list(op.dstIndices), op.elements * size
    if isinstance(op, affine.LoadOp | affine.StoreOp | PaddedLoadOp):
        t = op.memref.type
        assert isinstance(t, MemRefType)
        return op.memref, _map_values(op), element_size(t.get_element_type())
    if isinstance(op, affine.VectorLoadOp | affine.VectorStoreOp):
        v = op.result.type if isinstance(op, affine.VectorLoadOp) else op.value.type
        assert isinstance(v, VectorType)
        width = v.get_shape()[0] * element_size(v.get_element_type())
        return op.memref, _map_values(op), width
    return None


def _map_values(op: _MappedAccess) -> list:
    return [("map", op, k) for k in range(len(op.map.data.results))]  # pyright: ignore


def _thread_band(op: Operation) -> affine.ParallelOp | None:
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, affine.ParallelOp) and mapping_of(parent) == THREAD:
            return parent
        parent = parent.parent_op()
    return None


def cost(
    op: Operation, buffer: SSAValue, indices: list, width: int, shape: list[int]
) -> SharedAccess | None:
    """The access's wavefronts with `buffer` laid out row-major in `shape`, or None
    when some index cannot be evaluated."""
    lanes = lane_indices(op, indices)
    if lanes is None:
        return None
    return _wavefronts(op, buffer, lanes, width, shape)


def lane_indices(op: Operation, indices: list) -> list[list[int]] | None:
    """The index the access uses in each of its lanes (every other variable at its
    first value), or None when some index cannot be evaluated. It does not depend
    on the buffer's layout: `best_padding` evaluates it once for all paddings.

    The lanes are evaluated together: the thread variable is the vector of the
    lanes, and the expressions (`+`, `*`, `floordiv`, `mod`, min and max) are
    numpy's, elementwise."""
    band = _thread_band(op)
    assert band is not None
    lanes = np.array(_lanes(op), dtype=np.int64)
    env: dict[SSAValue, Any] = {band.induction_variables[0]: lanes}
    try:
        columns = [
            np.broadcast_to(np.asarray(_index(v, env), dtype=np.int64), lanes.shape)
            for v in indices
        ]
    except (_Unknown, OverflowError):  # an index past 64 bits: no address to model
        return None
    if not columns:
        return [[] for _ in lanes]
    return np.stack(columns, axis=1).tolist()


def _wavefronts(
    op: Operation,
    buffer: SSAValue,
    lanes: list[list[int]],
    width: int,
    shape: list[int],
) -> SharedAccess:
    t = buffer.type
    assert isinstance(t, MemRefType)
    size = element_size(t.get_element_type())
    addresses = []
    for index in lanes:
        offset = 0
        for i, s in zip(index, shape, strict=True):
            offset = offset * s + i
        addresses.append(offset * size)
    per_phase = max(1, (BANKS * WORD) // max(width, WORD))
    wavefronts = 0
    phases = 0
    for start in range(0, len(addresses), per_phase):
        phase = addresses[start : start + per_phase]
        words: dict[int, set[int]] = {}
        for a in phase:
            for w in range(a // WORD, (a + max(width, 1) - 1) // WORD + 1):
                words.setdefault(w % BANKS, set()).add(w)
        wavefronts += max(len(v) for v in words.values())
        phases += 1
    return SharedAccess(op, buffer, wavefronts, phases)


def _lanes(op: Operation) -> list[int]:
    """The lanes whose addresses the access uses: every lane, but only the first
    8 per tile for ldmatrix (lanes past its tiles give no address)."""
    if isinstance(op, nvgpu.LdMatrixOp):
        return list(range(8 * op.num_tiles))
    return list(range(WARP))


def _index(v, env: dict[SSAValue, Any]) -> Any:
    if isinstance(v, tuple):  # ("map", op, k): result k of an access's own map
        _, op, k = v
        m = op.map.data
        values = [_value(x, env) for x in op.indices]
        return m.results[k].eval(values[: m.num_dims], values[m.num_dims :])
    return _value(v, env)


def _value(v: SSAValue, env: dict[SSAValue, Any]) -> Any:
    if v in env:
        return env[v]
    owner = v.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        if isinstance(parent, affine.ForOp):
            env[v] = _bound(
                parent.lowerBoundMap.data, parent.lowerBoundOperands, env, np.maximum
            )
            return env[v]
        if isinstance(parent, affine.ParallelOp):
            env[v] = 0  # the grid's first block, a band's first iteration
            return 0
        raise _Unknown
    if isinstance(owner, arith.ConstantOp) and isinstance(owner.value, IntegerAttr):
        return owner.value.value.data
    if isinstance(owner, affine.ApplyOp):
        return _bound(owner.map.data, owner.mapOperands, env, np.maximum)
    if isinstance(owner, affine.MinOp | affine.MaxOp):
        fold = np.minimum if isinstance(owner, affine.MinOp) else np.maximum
        return _bound(owner.map.data, owner.mapOperands, env, fold)
    raise _Unknown


def _bound(m, operands, env, fold) -> Any:
    """The results of map `m` over `operands`, folded elementwise by `fold`."""
    values = [_value(x, env) for x in operands]
    results = [e.eval(values[: m.num_dims], values[m.num_dims :]) for e in m.results]
    return functools.reduce(fold, results)


def conflicts(root: Operation) -> list[SharedAccess]:
    """The wavefronts of every shared access in the thread bands under `root`, with
    the buffers as they are allocated."""
    out = []
    for op, buffer, indices, width in shared_accesses(root):
        t = buffer.type
        assert isinstance(t, MemRefType)
        c = cost(op, buffer, indices, width, list(t.get_shape()))
        if c is not None:
            out.append(c)
    return out


def executions(op: Operation) -> int:
    """How often a thread runs `op` per run of its thread band: the trip counts of
    the constant loops between them (a weight, so that the compute band's accesses
    count for more than a copy's)."""
    from affinec.transforms.affine.analysis import constant_trip_extent

    count = 1
    parent = op.parent_op()
    while parent is not None and not (
        isinstance(parent, affine.ParallelOp) and mapping_of(parent) == THREAD
    ):
        if isinstance(parent, affine.ForOp):
            count *= constant_trip_extent(parent) or 1
        parent = parent.parent_op()
    return count


def best_padding(
    buffer: SSAValue, accesses: list[tuple[Operation, list, int]], max_words: int = 32
) -> int:
    """The padding of the buffer's innermost dimension (in elements) that costs its
    accesses the fewest wavefronts (each weighted by how often it runs), the
    smallest on ties: multiples of the widest access (16 bytes for ldmatrix rows
    and the widest asynchronous copies), so that every access stays aligned."""
    widest = max(w for _, _, w in accesses)
    return padded_cost(buffer, evaluate(accesses), widest=widest, max_words=max_words)[
        0
    ]


Evaluated = list[tuple[Operation, list[list[int]], int, int]]
"""Each access with its lanes' indices, bytes a lane and executions."""


def evaluate(accesses: list[tuple[Operation, list, int]]) -> Evaluated:
    """What does not depend on the buffer's layout, once: each access's lanes (those
    that can be evaluated) and weight."""
    return [
        (op, lanes, width, executions(op))
        for op, indices, width in accesses
        if (lanes := lane_indices(op, indices)) is not None
    ]


def padded_cost(
    buffer: SSAValue,
    evaluated: Evaluated,
    shape: list[int] | None = None,
    widest: int = 0,
    max_words: int = 32,
) -> tuple[int, int]:
    """The best padding of the innermost dimension of `buffer` laid out in `shape`
    (its own by default) for the `evaluated` accesses, in multiples of the widest
    access (`widest` bytes, or the widest evaluated), and their weighted wavefronts
    with it (see `best_padding`)."""
    t = buffer.type
    assert isinstance(t, MemRefType)
    shape = list(t.get_shape()) if shape is None else shape
    size = element_size(t.get_element_type())
    widest = widest or max((w for _, _, w, _ in evaluated), default=size)
    unit = max(1, widest // size)
    best, best_cost = 0, math.inf
    for pad in range(0, max(1, (max_words * WORD) // size) + 1, unit):
        padded = [*shape[:-1], shape[-1] + pad]
        total = sum(
            _wavefronts(op, buffer, lanes, width, padded).wavefronts * weight
            for op, lanes, width, weight in evaluated
        )
        if total < best_cost:
            best, best_cost = pad, total
    return best, int(best_cost) if best_cost != math.inf else 0


__all__ = [
    "Evaluated",
    "SharedAccess",
    "best_padding",
    "conflicts",
    "cost",
    "evaluate",
    "lane_indices",
    "padded_cost",
    "shared_accesses",
]
