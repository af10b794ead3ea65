"""A block's output through shared memory: the write-back into a shared tile, then a
band that copies the tile out 16 bytes a thread.

A write-back band stores one element an iteration: on the tensor cores a lane holds
pairs of channels, so without staging every store moves 4 bytes of f16. Staged, the
band stores into a tile of the block's outputs, and a second band copies each
pixel's channels out in 16-byte vectors:

    affine.parallel (%n1, %oh1, %ow1, %k1) = (0, 0, 0, 0) to (1, 4, 4, 64) {
      %sum = affine.load %acc[%n1, %oh1, %ow1, %k1] ...
      %out = arith.truncf %sum : f32 to f16
      affine.store %out, %output[%n0 + %n1, ..., %k0 * 64 + %k1]
    } {affinec.mapping = "block"}

becomes

    %output_shared = memref.alloc() {affinec.overlay} : memref<16x64xf16, 3 : i64>
    affine.parallel (%n1, %oh1, %ow1, %k1) = (0, 0, 0, 0) to (1, 4, 4, 64) {
      ... affine.store %out, %output_shared[%oh1 * 4 + %ow1, %k1]
    } {affinec.mapping = "block"}
    affine.parallel (%m, %kv) = (0, 0) to (16, 8) {
      %oh1 = affine.apply (d0 floordiv 4)(%m), %ow1 = (d0 mod 4)(%m), ...
      %v = affine.vector_load %output_shared[%m, %kv * 8] : vector<8xf16>
      affine.vector_store %v, %output[%n0 + %n1, ..., %k0 * 64 + %kv * 8]
    } {affinec.mapping = "block", affinec.unroll}

The tile is pixels (the band's other dimensions, row-major) by channels, so that
`affinec-mma-sync`'s pairs land at the lane's own pixel and channel. It is written
after the block is done with its other shared buffers, so it
may take their bytes (`affinec.overlay`: `affinec-insert-barriers` puts a barrier
before its first write, `affinec-plan-shared-memory` decides where it goes). A
write-back that does not allow it keeps its stores, and `plan_staging` says why.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from xdsl.dialects import memref
from xdsl.dialects.builtin import (
    BFloat16Type,
    Float16Type,
    Float32Type,
    IndexType,
    MemRefType,
    StringAttr,
    UnitAttr,
    VectorType,
)
from xdsl.ir import Block, Operation, SSAValue
from xdsl.ir.affine import AffineExpr, AffineMap

from affinec.base.element_types import element_size
from affinec.dialects import affine, gpu
from affinec.dialects.affinec import BLOCK, MAPPING, OVERLAY, UNROLL, mapping_of
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.affine_exprs import linear_form
from affinec.ir.shared_memory_layout import placed_layout, shared_overflow
from affinec.transforms.gpu.bands import Band, GridAnalysis, is_shared
from affinec.transforms.gpu.thread_bands import add_guarded, partial_tile_guards

STAGED_BYTES = 16
"""What a thread copies from the tile to the output at once."""


@dataclass(frozen=True)
class Staging:
    """A write-back band to stage: its one store, the channel dimension (the store's
    innermost, unit-stride index) and the elements a copy moves."""

    phase: Band
    store: affine.StoreOp
    channel: int
    width: int

    @cached_property
    def pixel_dims(self) -> list[int]:
        """The band's dimensions but the channel's that have more than one
        iteration: the tile's rows, row-major."""
        dims = self.phase.dims
        return [k for k, d in enumerate(dims) if k != self.channel and d.extent > 1]

    def stride(self, k: int) -> int:
        """The tile rows between two values of pixel dimension `k`."""
        after = self.pixel_dims[self.pixel_dims.index(k) + 1 :]
        return math.prod(self.phase.dims[j].extent for j in after)

    @cached_property
    def tile_type(self) -> MemRefType:
        """Pixels x channels of the output's element type, in shared memory."""
        t = self.store.memref.type
        assert isinstance(t, MemRefType)
        pixels = math.prod(self.phase.dims[k].extent for k in self.pixel_dims)
        channels = self.phase.dims[self.channel].extent
        return gpu.in_memory_space(
            MemRefType(t.get_element_type(), [pixels, channels]),
            gpu.WORKGROUP_ADDRESS_SPACE,
        )


def plan_staging(
    analysis: GridAnalysis,
) -> tuple[list[Staging], list[tuple[Band, str]]]:
    """The write-back bands of the grid band that can be staged, and why the others
    cannot. A write-back band is a block band at grid level that stores to global
    memory."""
    stageable: list[Staging] = []
    refused: list[tuple[Band, str]] = []
    shared = [a.results[0].type for a in analysis.allocs if is_shared(a.results[0])]
    for phase in analysis.phases:
        stores = [
            o
            for o in phase.op.walk()
            if isinstance(o, affine.StoreOp | affine.VectorStoreOp)
            and gpu.memory_space(o.memref.type) == 0
        ]
        if mapping_of(phase.op) != BLOCK or not stores:
            continue
        why = _refusal(analysis, phase, stores)
        if why is None:
            staging = _staging(phase, stores[0])  # pyright: ignore[reportArgumentType]
            if isinstance(staging, str):
                why = staging
            else:
                shared.append(staging.tile_type)
                why = _does_not_fit(analysis, shared)
                if why is None:
                    stageable.append(staging)
                    continue
                shared.pop()
        refused.append((phase, why))
    return stageable, refused


def stage(staging: Staging) -> None:
    """Rewrite `staging`'s band to store into a shared tile (pixels x channels, the
    band's other dimensions row-major as the pixel), and copy it out after."""
    phase, store = staging.phase, staging.store
    grid_block = phase.op.parent_block()
    assert grid_block is not None
    alloc = memref.AllocOp([], [], staging.tile_type)
    alloc.memref.name_hint = "output_shared"
    alloc.attributes[OVERLAY] = UnitAttr()
    allocs = [o for o in grid_block.ops if isinstance(o, memref.AllocOp)]
    if allocs:
        grid_block.insert_op_after(alloc, allocs[-1])
    else:
        grid_block.insert_op_before(alloc, phase.op)
    tile = alloc.memref

    ivs = list(phase.op.induction_variables)
    pixel = staging.pixel_dims
    d = AffineExpr.dimension
    row = sum(
        ((d(k) - phase.dims[k].lower) * staging.stride(k) for k in pixel),  # pyright: ignore[reportOperatorIssue]
        AffineExpr.constant(0),
    )
    at_tile = AffineMap(
        len(ivs),
        0,
        (row, d(staging.channel) - phase.dims[staging.channel].lower),  # pyright: ignore[reportOperatorIssue]
    )
    block = store.parent_block()
    assert block is not None
    block.insert_op_before(affine.StoreOp(store.value, tile, ivs, at_tile), store)
    block.erase_op(store)
    grid_block.insert_op_after(_copy_out(staging, tile), phase.op)


def _copy_out(staging: Staging, tile) -> affine.ParallelOp:
    """The band copying `tile` to the output, `width` channels an iteration:

    affine.parallel (%m, %kv) = (0, 0) to (pixels, channels / width) {
      %oh1 = affine.apply (m floordiv 28), %ow1 = (m mod 28), %k1 = kv * 8
      affine.if <(%oh1, %ow1) in the partial tile> {
        %v = affine.vector_load %tile[%m, %k1 - lower]
        affine.vector_store %v, %output[<the write-back's indices>]
    } {affinec.mapping = "block"}
    """
    phase, store, width = staging.phase, staging.store, staging.width
    t = staging.tile_type
    pixels, channels = t.get_shape()
    body = Block(arg_types=[IndexType(), IndexType()])
    m, kv = body.args
    m.name_hint, kv.name_hint = "m", "kv"
    d = AffineExpr.dimension
    ops: list[Operation] = []
    values: dict[SSAValue, SSAValue] = {}
    ivs = list(phase.op.induction_variables)
    for k, iv in enumerate(ivs):
        dim = phase.dims[k]
        if k == staging.channel:
            e = d(0) * width + dim.lower  # pyright: ignore[reportOperatorIssue]
            source = kv
        elif k in (pixel := staging.pixel_dims):
            stride = staging.stride(k)
            e = d(0) if stride == 1 else d(0) // stride
            if k != pixel[0]:  # the outermost needs no remainder: m < pixels
                e = e % dim.extent
            e = e + dim.lower  # pyright: ignore[reportOperatorIssue]
            source = m
        else:
            e = AffineExpr.constant(dim.lower)  # pyright: ignore[reportArgumentType]
            source = m
        apply = affine.ApplyOp([source], AffineMap(1, 0, (e,)))
        apply.result.name_hint = iv.name_hint
        ops.append(apply)
        values[iv] = apply.result
    operands: list[SSAValue] = []
    constraints = partial_tile_guards(
        ((values[iv], dim) for iv, dim in zip(ivs, phase.dims, strict=True)),
        phase.op.upper_bound_operands,
        operands,
    )
    load = affine.VectorLoadOp(
        tile,
        [m, kv],
        AffineMap(2, 0, (d(0), d(1) * width)),
        VectorType(t.get_element_type(), [width]),
    )
    indices = [values.get(v, v) for v in store.indices]
    save = affine.VectorStoreOp(load.result, store.memref, indices, store.map.data)
    add_guarded(ops, constraints, operands, [load, save])
    body.add_ops([*ops, affine.YieldOp()])
    band = affine.ParallelOp(
        AffineMap(0, 0, (AffineExpr.constant(0), AffineExpr.constant(0))),
        [1, 1],
        AffineMap(
            0, 0, (AffineExpr.constant(pixels), AffineExpr.constant(channels // width))
        ),
        [1, 1],
        body,
    )
    band.attributes[MAPPING] = StringAttr(BLOCK)
    # its turns unrolled: the stores of one thread go out together
    band.attributes[UNROLL] = UnitAttr()
    return band


def _refusal(
    analysis: GridAnalysis, phase: Band, stores: list[Operation]
) -> str | None:
    if len(stores) != 1 or not isinstance(stores[0], affine.StoreOp):
        return "the write-back does not store one element an iteration"
    if any(isinstance(o, affine.IfOp | affine.ForOp) for o in phase.op.walk()):
        return "the write-back has loops or conditions inside"
    if phase.op.parent_op() is not analysis.grid.op:
        # in a loop, the next trip's writes would race the copy-out
        return "the write-back is inside a loop"
    if any(d.lower is None or d.step != 1 for d in phase.dims):
        return "the write-back band's bounds are not constant with unit steps"
    element = stores[0].memref.type.get_element_type()  # pyright: ignore
    if not isinstance(element, Float16Type | BFloat16Type | Float32Type):
        return f"the output's elements are {element}"
    return None


def _staging(phase: Band, store: affine.StoreOp) -> Staging | str:
    """The store's channel dimension and vector width, or why there is none: the
    band dimension that is the innermost index with coefficient 1 and no other, every
    other term of that index (and the output's innermost extent, the dimension's
    lower bound and extent) a multiple of the width: a partial tile along it (cut
    at the output's extent) then ends on a whole vector too."""
    t = store.memref.type
    assert isinstance(t, MemRefType)
    width = STAGED_BYTES // element_size(t.get_element_type())
    m = store.map.data
    forms = [linear_form(e, m.num_dims, m.num_symbols) for e in m.results]
    if m.num_symbols or any(f is None for f in forms):
        return "the output's indices are not linear in the band's variables"
    ivs = list(phase.op.induction_variables)
    *outer, last = forms

    def coefficient(form, iv) -> int:
        return sum(c for c, x in zip(form[0], store.indices, strict=True) if x is iv)

    channels = [
        k
        for k, iv in enumerate(ivs)
        if coefficient(last, iv) == 1 and not any(coefficient(f, iv) for f in outer)
    ]
    if len(channels) != 1:
        return "the output's innermost index is not one of the band's dimensions"
    (channel,) = channels
    dim = phase.dims[channel]
    others = [
        c for c, x in zip(last[0], store.indices, strict=True) if x is not ivs[channel]
    ]
    if (
        any(c % width for c in others)
        or last[2] % width
        or t.get_shape()[-1] % width
        or dim.lower % width  # pyright: ignore[reportOptionalOperand]
        or dim.extent % width
    ):
        name = ivs[channel].name_hint or f"dimension {channel}"
        return (
            f"the output's innermost index does not run in aligned {STAGED_BYTES}-"
            f"byte vectors ({width} elements) across the block's {dim.extent} "
            f"values of %{name}"
        )
    return Staging(phase, store, channel, width)


def _does_not_fit(analysis: GridAnalysis, shared: list) -> str | None:
    target = chip_of(analysis.grid.op)
    _, total = placed_layout(shared, {len(shared) - 1}, target)
    return shared_overflow(total, target, " with the tile")
