"""`affinec.warpgroup_mma` as nvvm ops: its part of `convert-nvgpu-to-nvvm`.

The step becomes the instructions of PTX's warpgroup MMA on the tiles where the
shared-memory planner laid them out (interleaved: 8 x 8 core matrices, no swizzle;
`affinec.transforms.gpu.wgmma_lowering_layout`) or TMA wrote them (column slabs:
`affinec-tma-copies`); a row-major tile is refused, naming the planner. Each thread:

    nvvm.fence.proxy.async.shared_cta     the copies' writes, before wgmma reads
    %c = llvm.insertvalue ...             its N/2 registers, from %fragments
    nvvm.wgmma.fence.aligned
    %da = arith.ori %start_a, <A's fields>     A's descriptor (per 16 of K: +32 B)
    %d = nvvm.wgmma.mma_async %da, %db, %c, <m = 64, n = N, k = 16>, ...
    ...                                   one per 16 of K, a run on one accumulator
    nvvm.wgmma.commit.group.sync.aligned
    nvvm.wgmma.wait.group.sync.aligned 0  (its `pending`: 1 leaves it in flight)
    memref.store ... %fragments           its registers back

The descriptors' start fields come from the tiles' addresses
(`affinec.element_pointer` of the slab's first element, `llvm.ptrtoint`, `(a &
0x3FFFF) >> 4`), their leading and stride byte offsets from the tile's shape
(`wgmma_fields`): with core matrices P x 16 bytes apart (P = 8 packed, more where
the planner padded them), A (M x K) and a K-major B (N x K) step 16 P bytes along
K and K/8 x 16 P along the rows; an MN-major B (K x N) steps 16 P bytes along N
and N/8 x 16 P along K. In column slabs of R rows, 128 bytes along the rows and
16 R along the columns.
"""

from __future__ import annotations

import math

from xdsl.dialects import arith, memref, vector
from xdsl.dialects.builtin import (
    BFloat16Type,
    DenseArrayBase,
    Float32Type,
    IndexType,
    IntegerAttr,
    MemRefType,
    VectorType,
    i32,
    i64,
)
from xdsl.dialects.llvm import (
    BitcastOp,
    ExtractValueOp,
    InsertValueOp,
    PtrToIntOp,
    UndefOp,
)
from xdsl.ir import Operation, SSAValue

from affinec.base.diagnostics import PassError
from affinec.dialects import nvvm
from affinec.dialects.affinec import ElementPointerOp
from affinec.dialects.affinec_wgmma import (
    CORE,
    WGMMA_STEP,
    FenceProxyAsyncSharedOp,
    WarpgroupMmaRegistersOp,
    WarpgroupMmaStepOp,
    slab_span,
)
from affinec.dialects.nvvm_mma import MMALayout, MMALayoutAttr
from affinec.dialects.nvvm_wgmma_registers import WgmmaRegistersRunOp
from affinec.hardware.wgmma_layouts import MatrixDescriptor, TileLayout
from affinec.transforms.nvvm.nvgpu_to_nvvm import Lowered, lowers

ROW_BYTES = 16
"""Bytes of one row of a core matrix."""


def wgmma_fields(
    rows: int, cols: int, k_major: bool, pitch: int = CORE
) -> tuple[MatrixDescriptor, int]:
    """The descriptor (start 0) of an interleaved tile of `rows` x `cols` 16-bit
    elements, core matrices `pitch` 16-byte rows apart (or, `pitch` negative, in
    column slabs of `slab_span(pitch)`-byte rows: unswizzled, the core matrices of a
    column of them one after the other; swizzled, rows of the span), read K-major
    (columns K) or MN-major (rows K), and the bytes one step of 16 along K moves
    its start (within a slab: `k_offsets` has every step's)."""
    span = slab_span(pitch)
    if span > ROW_BYTES:  # swizzled slabs, as TMA writes them
        layout = TileLayout(rows, cols, 2, span)
        if k_major:
            return layout.k_major(), layout.k_offset(WGMMA_STEP, True)
        return layout.mn_major(), layout.k_offset(WGMMA_STEP, False)
    if span:
        down = CORE * ROW_BYTES  # to the next 8 rows
        right = rows * ROW_BYTES  # to the next 8 columns: the next slab
        if k_major:
            return MatrixDescriptor(0, right, down, 0), 2 * right
        return MatrixDescriptor(0, down, right, 0), 2 * down
    core = pitch * ROW_BYTES  # from one core matrix to the next along the columns
    across = (cols // CORE) * core  # from one 8-row group to the next
    if k_major:
        return MatrixDescriptor(0, core, across, 0), 2 * core
    return MatrixDescriptor(0, across, core, 0), 2 * across


def k_offsets(rows: int, cols: int, k_major: bool, pitch: int, k: int) -> list[int]:
    """Where each step of 16 along K of the tile (`wgmma_fields`) starts, in bytes
    from the tile's start (a K-major step of swizzled slabs moves within a slab,
    then to the next)."""
    span = slab_span(pitch)
    if span > ROW_BYTES:
        layout = TileLayout(rows, cols, 2, span)
        return [layout.k_offset(s, k_major) for s in range(0, k, WGMMA_STEP)]
    _, step = wgmma_fields(rows, cols, k_major, pitch)
    return [s * step for s in range(k // WGMMA_STEP)]


def _index(value: int, ops: list[Operation]) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, IndexType()))
    ops.append(c)
    return c.result


def _i64(value: int, ops: list[Operation]) -> SSAValue:
    c = arith.ConstantOp(IntegerAttr(value, i64))
    ops.append(c)
    return c.result


def _start_field(
    tile: SSAValue, indices: list[SSAValue], ops: list[Operation]
) -> SSAValue:
    """The descriptor's start field of the element at `indices` of `tile`."""
    pointer = ElementPointerOp(tile, indices)
    address = PtrToIntOp(pointer.result, i64)
    masked = arith.AndIOp(address.output, _i64(0x3FFFF, ops))
    start = arith.ShRUIOp(masked.result, _i64(4, ops))
    ops += [pointer, address, masked, start]
    return start.result


@lowers(WarpgroupMmaStepOp)
def _lower_step(op: Operation) -> Lowered:
    assert isinstance(op, WarpgroupMmaStepOp)
    rows_a, k, pitch_a = op.a_tile()
    rows_b, cols_b, pitch_b = op.b_tile()
    if not (pitch_a and pitch_b):
        raise PassError(
            op,
            "reads a tile not laid out for wgmma (8 x 8 core matrices): run "
            "affinec-plan-shared-memory first",
        )
    b_k_major = op.b_k_major is not None
    n = op.n
    a_type = op.a.type
    assert isinstance(a_type, MemRefType)
    kind = "bf16" if isinstance(a_type.get_element_type(), BFloat16Type) else "f16"
    ops: list[Operation] = []
    zero = _index(0, ops)
    *lead_a, row = op.a_indices
    if pitch_a < 0:  # row `row` of the first slab
        start_a = _start_field(op.a, [*lead_a, zero, row, zero], ops)
    else:
        group = arith.DivUIOp(row, _index(CORE, ops))
        ops.append(group)
        start_a = _start_field(op.a, [*lead_a, group.result, zero, zero, zero], ops)
    tail_b = 3 if pitch_b < 0 else 4
    start_b = _start_field(op.b, [*op.b_indices, *[zero] * tail_b], ops)
    fields_a, _ = wgmma_fields(rows_a, k, True, pitch_a)
    fields_b, _ = wgmma_fields(rows_b, cols_b, b_k_major, pitch_b)
    steps_a = k_offsets(rows_a, k, True, pitch_a, k)
    steps_b = k_offsets(rows_b, cols_b, b_k_major, pitch_b, k)
    encoded_a = _i64(fields_a.encode(), ops)
    encoded_b = _i64(fields_b.encode(), ops)
    descriptors: list[tuple[SSAValue, SSAValue]] = []
    for s in range(k // WGMMA_STEP):
        pair = []
        for start, encoded, offset in (
            (start_a, encoded_a, steps_a[s]),
            (start_b, encoded_b, steps_b[s]),
        ):
            value = start
            if offset:
                moved = arith.AddiOp(value, _i64(offset >> 4, ops))
                ops.append(moved)
                value = moved.result
            full = arith.OrIOp(value, encoded)
            ops.append(full)
            pair.append(full.result)
        descriptors.append((pair[0], pair[1]))
    ops.append(FenceProxyAsyncSharedOp())
    places, value = _load_accumulator(op.fragments, n, ops)
    ops.append(nvvm.WgmmaFenceAlignedOp())
    for da, db in descriptors:  # adjacent: one run on one accumulator
        mma = nvvm.WgmmaMmaAsyncOp(da, db, value, n, kind)
        if b_k_major:
            mma.properties["layoutB"] = MMALayoutAttr(MMALayout.COL)
        ops.append(mma)
        value = mma.res
    ops += [nvvm.WgmmaGroupSyncAlignedOp(), nvvm.WgmmaWaitGroupSyncOp(op.groups_left)]
    _store_accumulator(op.fragments, places, value, ops)
    return ops, []


def _load_accumulator(
    fragments: SSAValue, n: int, ops: list[Operation]
) -> tuple[list[list[SSAValue]], SSAValue]:
    """The thread's registers of the accumulator (register j at [0, j / 4, j % 4]
    of `fragments`) as the struct `wgmma` takes, and their places."""
    places = [
        [_index(0, ops), _index(j // 4, ops), _index(j % 4, ops)] for j in range(n // 2)
    ]
    acc = UndefOp(nvvm.accumulator_struct(n))
    ops.append(acc)
    value = acc.res
    for j, place in enumerate(places):
        load = memref.LoadOp.get(fragments, place)
        insert = InsertValueOp(DenseArrayBase.from_list(i64, [j]), value, load.res)
        ops += [load, insert]
        value = insert.res
    return places, value


def _store_accumulator(
    fragments: SSAValue, places: list[list[SSAValue]], value: SSAValue, ops: list
) -> None:
    for j, place in enumerate(places):
        element = ExtractValueOp(
            DenseArrayBase.from_list(i64, [j]), value, Float32Type()
        )
        ops += [element, memref.StoreOp.get(element.res, fragments, place)]


@lowers(WarpgroupMmaRegistersOp)
def _lower_registers(op: Operation) -> Lowered:
    """A from the threads' registers, B through a descriptor a step: each tap's
    tile one tile's bytes after the one before, each step of 16 along K where
    `k_offsets` puts it."""
    assert isinstance(op, WarpgroupMmaRegistersOp)
    rows_b, cols_b, pitch_b = op.b_tile()
    if not pitch_b:
        raise PassError(
            op,
            "reads a tile not laid out for wgmma (8 x 8 core matrices): run "
            "affinec-plan-shared-memory first",
        )
    b_k_major = op.b_k_major is not None
    t = op.b.type
    assert isinstance(t, MemRefType)
    kind = "bf16" if isinstance(t.get_element_type(), BFloat16Type) else "f16"
    leading = len(op.b_indices) + op.tap_count
    tap_bytes = math.prod(t.get_shape()[leading:]) * 2
    ops: list[Operation] = [FenceProxyAsyncSharedOp()]
    zero = _index(0, ops)
    tail = len(t.get_shape()) - len(op.b_indices)
    start = _start_field(op.b, [*op.b_indices, *[zero] * tail], ops)
    fields, _ = wgmma_fields(rows_b, cols_b, b_k_major, pitch_b)
    steps = k_offsets(rows_b, cols_b, b_k_major, pitch_b, op.k)
    encoded = _i64(fields.encode(), ops)
    descriptors = []
    for tap in range(math.prod(op.tap_extents())):
        for step in steps:
            moved = arith.AddiOp(start, _i64((tap * tap_bytes + step) >> 4, ops))
            full = arith.OrIOp(moved.result, encoded)
            ops += [moved, full]
            descriptors.append(full.result)
    registers = []
    for fragment in op.a:
        for r in range(4):
            pair = vector.ExtractOp(
                fragment, [r], VectorType(t.get_element_type(), [2])
            )
            word = BitcastOp(pair.result, i32)
            ops += [pair, word]
            registers.append(word.result)
    places, value = _load_accumulator(op.fragments, op.n, ops)
    # the A registers' and the accumulator's writes before the wgmmas read them
    ops.append(nvvm.WgmmaFenceAlignedOp())
    run = WgmmaRegistersRunOp(descriptors, registers, value, op.n, kind, not b_k_major)
    waits = nvvm.WgmmaWaitGroupSyncOp(op.groups_left)
    ops += [run, nvvm.WgmmaGroupSyncAlignedOp(), waits]
    _store_accumulator(op.fragments, places, run.res, ops)
    return ops, []


__all__ = ["k_offsets", "wgmma_fields"]
