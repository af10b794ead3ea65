"""A register tile's chunk moved as vectors: the write-back of a thread that owns `v`
contiguous outputs along the innermost dimension (`ThreadPlan.vector_width`) stored
as one vector, and the loads along the chunk (of a shared tile as well) as one each.

Unrolled, the chunk's `v` scalar stores sit side by side, but LLVM merges them into
one wide store only where it can prove the address aligned, which it cannot through
a kernel's index arithmetic. The IR knows better: when the chunk's elements are
consecutive in the output's innermost dimension and its first one sits at a
multiple of `v` (every other term of the index a multiple of `v`, the innermost
size too), the chunk is written as `v` copies of the epilogue whose results are
packed into a vector (`vector.insert`) and stored with one `affine.vector_store`
(16 bytes of f16: `st.global.v4.b32`). Loads of other global operands along the
same index (a bias, a residual) are read the same way, one `affine.vector_load`
and `vector.extract` per element; so are, in a body that accumulates into the
thread's registers, its loads of shared tiles along the chunk (a depthwise
convolution's input and filter): the bank model of `affinec-plan-shared-memory`
then sees the 16-byte accesses the GPU makes, and pads the tile's rows for them.

    affine.for %q = 0 to 8 {                      // one chunk of 8 channels
      %g = affine.apply (d0, d1) -> (d0 * 8 + d1)(%t, %q)
      %sum = affine.load %acc[%q]
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %output[%n, %oh, %ow, %g0 * 32 + %g]
    } {affinec.unroll}

becomes

    %g = affine.apply (d0) -> (d0 * 8)(%t)        // and the seven others
    %sum = affine.load %acc[0]                    // ... %acc[7]
    %out = arith.truncf %sum : f32 to f16         // ... eight of them
    %p = vector.insert %out, %zeros [0]           // ... [7]
    affine.vector_store %p, %output[%n, %oh, %ow, %g0 * 32 + %g] : vector<8xf16>

`chunk_accesses` says whether a register-tiled band's body allows it;
`register_tiles.distribute_tiled` builds the chunks.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects import arith, vector
from xdsl.dialects.builtin import FloatAttr, IntegerAttr, MemRefType, VectorType
from xdsl.ir import Operation, SSAValue
from xdsl.traits import Pure

from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import PaddedLoadOp
from affinec.ir.affine_exprs import linear_form
from affinec.transforms.affine.analysis import compose_map
from affinec.transforms.gpu.bands import Band, is_private
from affinec.transforms.gpu.thread_plan import VECTOR_BYTES, ThreadPlan


@dataclass(frozen=True)
class ChunkAccesses:
    """The accesses of a band's body that a chunk makes vectors of."""

    store: affine.StoreOp | None
    """The one store of the body (to global memory), or None for a body that
    stores only into the thread's registers (the accumulation)."""
    loads: tuple[affine.LoadOp, ...]
    """Loads along the chunk (of global or shared memory), aligned to the chunk."""


def chunk_accesses(
    phase: Band, plan: ThreadPlan, body: list[Operation]
) -> ChunkAccesses | None:
    """The store and loads of `body`, the innermost ops of a register-tiled band,
    that one thread's chunk along the innermost dimension can move as vectors: its
    one store to global memory and the loads along the chunk (a write-back), or,
    in a body that stores only into the thread's registers (the accumulation),
    its loads along the chunk. None where the chunk is not a vector: a vector
    width of 1, a chunk wider than 16 bytes, an innermost dimension with partial
    tiles or threads past its end, a body that stores to memory more than once or
    loops, a store whose innermost index is not the band's innermost variable plus
    multiples of the width, a body with nothing to move."""
    v = plan.vector_width
    last = len(phase.dims) - 1
    if v <= 1 or v & (v - 1) or not plan.register_tile:
        return None
    dim = phase.dims[last]
    if (
        dim.lower != 0
        or dim.step != 1
        or dim.guards
        or dim.runtime_upper is not None
        or plan.thread_extents[last] * plan.register_tile[last] != dim.extent
    ):
        return None
    iv = phase.op.induction_variables[last]
    stores: list[affine.StoreOp] = []
    loads: list[affine.LoadOp] = []
    for o in body:
        for inner in o.walk():
            if isinstance(inner, affine.StoreOp) and not is_private(inner.memref):
                stores.append(inner)
            elif isinstance(inner, affine.StoreOp | affine.LoadOp):
                if isinstance(inner, affine.LoadOp) and not is_private(inner.memref):
                    loads.append(inner)
            elif not (isinstance(inner, PaddedLoadOp) or inner.has_trait(Pure)):
                return None  # a loop, a guard, an effect the chunk would reorder
    along = tuple(
        x for x in loads if _among(x, body) and _along_chunk(x, iv, v, shared=True)
    )
    if not stores:
        return ChunkAccesses(None, along) if along else None
    if len(stores) != 1 or not _among(stores[0], body):
        return None
    (store,) = stores
    if not _along_chunk(store, iv, v) or any(x.memref is store.memref for x in loads):
        return None  # (the chunk's loads all come before its one store)
    return ChunkAccesses(store, along)


def _among(op: Operation, ops: list[Operation]) -> bool:
    return any(o is op for o in ops)


def _along_chunk(
    access: affine.StoreOp | affine.LoadOp, iv: SSAValue, v: int, shared: bool = False
) -> bool:
    """Whether `access` reads or writes global memory (or, with `shared`, shared
    memory) at consecutive elements as `iv` steps, starting at a multiple of `v`
    wherever `iv` is one: its innermost index `iv` plus multiples of `v`, its other
    indices free of `iv`, the memref's innermost size a multiple of `v` and the
    vector at most 16 bytes. (A shared buffer's rows stay multiples of its widest
    access when `affinec-plan-shared-memory` pads them.)"""
    t = access.memref.type
    assert isinstance(t, MemRefType)
    element = t.get_element_type()
    shape = t.get_shape()
    spaces = (0, 1, gpu.WORKGROUP_ADDRESS_SPACE) if shared else (0, 1)
    if (
        gpu.memory_space(t) not in spaces
        or not shape
        or shape[-1] < 0
        or shape[-1] % v
        or v * element_size(element) > VECTOR_BYTES
    ):
        return False
    m, operands = compose_map(access.map.data, list(access.indices))
    if iv not in operands or m.num_symbols:
        return False
    k = operands.index(iv)
    for r, result in enumerate(m.results):
        form = linear_form(result, m.num_dims, 0)
        if form is None:
            return False
        coefficients, _, constant = form
        if r < len(m.results) - 1:
            if coefficients[k]:
                return False
            continue
        if coefficients[k] != 1 or constant % v:
            return False
        if any(c % v for j, c in enumerate(coefficients) if j != k):
            return False
    return True


def vector_chunk(
    copies: list[list[Operation]],
    accesses: list[ChunkAccesses],
) -> list[Operation]:
    """The chunk's element copies (`copies[k]`: the body's ops for element `k`, the
    `accesses` found in each at the same places) as one: each copy's loads found
    along the chunk replaced by elements of one vector load (the first copy's),
    each copy's store (if any) by an insert into a vector, stored once where the
    first copy's element is."""
    v = len(copies)
    first = accesses[0]
    for j, load in enumerate(first.loads):
        whole = affine.VectorLoadOp(
            load.memref,
            list(load.indices),
            load.map.data,
            VectorType(load.result.type, [v]),
        )
        whole.result.name_hint = load.result.name_hint
        # where the first copy's load was (after its index values)
        copies[0].insert(_position(copies[0], load), whole)
        for k in range(v):
            scalar = accesses[k].loads[j]
            pick = vector.ExtractOp(whole.result, [k], load.result.type)
            at = copies[k]
            at[_position(at, scalar)] = pick
            scalar.result.replace_all_uses_with(pick.result)
            scalar.erase()
    if first.store is None:
        return [o for copy in copies for o in copy]
    t = first.store.value.type
    zero = arith.ConstantOp(FloatAttr(0.0, t))  # pyright: ignore[reportArgumentType]
    packed_op = vector.BroadcastOp(zero.result, VectorType(t, [v]))
    out: list[Operation] = [zero, packed_op]
    packed = packed_op.results[0]
    for k in range(v):
        store = accesses[k].store
        assert store is not None
        at = copies[k]
        position = _position(at, store)
        insert = vector.InsertOp(store.value, packed, [k])
        at[position] = insert
        packed = insert.results[0]
        if k:
            store.erase()
        out += at
    store = first.store
    out.append(
        affine.VectorStoreOp(packed, store.memref, list(store.indices), store.map.data)
    )
    store.erase()
    return out


def _position(ops: list[Operation], op: Operation) -> int:
    """Where `op` itself is in `ops` (by identity)."""
    for k, o in enumerate(ops):
        if o is op:
            return k
    raise ValueError("an access of the chunk is not among its ops")


def chunk_constant(k: int) -> arith.ConstantOp:
    """The index `k` of an element of a chunk, as a constant."""
    c = arith.ConstantOp(IntegerAttr.from_index_int_value(k))
    c.result.name_hint = f"e{k}"
    return c


__all__ = ["ChunkAccesses", "chunk_accesses", "chunk_constant", "vector_chunk"]
