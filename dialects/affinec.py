"""affinec's own ops and attribute names.

`affinec.padded_load` is the reference design's `affine.padded.load`: an affine load
whose out-of-bounds accesses read zero, so zero padding of a convolution needs no
pre-padded copy of its input:

    %a = affinec.padded_load %in[%n, %c, %oh * 2 + %r - 3, %ow * 2 + %s - 3]
        : memref<1x4x224x224xf16>

Attribute names that passes read and write:

- `affinec.mapping` on an `affine.parallel`: `"grid"` (one iteration per GPU block) or
  `"block"` (one iteration per thread of a block), set by tiling.
- `affinec.tile` on an `affine.for`: a loop over the tiles of a reduction dimension,
  made by tiling.
- `affinec.unroll` on a loop: unroll it fully (set by the GPU mapping).
- `affinec.spec` on the module: the spec the frontend built it from, so a checker can
  rebuild the float64 reference.
"""

from __future__ import annotations

from xdsl.ir import Dialect, Operation
from xdsl.irdl import (
    irdl_op_definition,
)

from affinec.dialects.affine import AffineLoadBase

MAPPING = "affinec.mapping"
"""Attribute on `affine.parallel`: which level of the GPU its iterations map to."""

GRID = "grid"
BLOCK = "block"
MAPPING_LEVELS = (GRID, BLOCK)

TILE = "affinec.tile"
"""Unit attribute `affine-loop-tile` puts on the `affine.for` loops that step over the
tiles of a reduction (`%c0`, `%r0`, `%s0`), as opposed to the point loops within a tile:
`affinec-sink` moves the block-level loop below these, and shared-memory promotion
copies one tile's footprint per iteration of them."""

UNROLL = "affinec.unroll"
"""Unit attribute on a loop: unroll it fully. `affinec-convert-parallel-to-gpu` sets it
on a thread's turn loop over a phase that uses thread-private buffers (indexed by the
turn, they stay in registers only once every index is a constant); `lower-affine` and
`convert-scf-to-cf` keep it on the loop's back edge and the emitter hands it to LLVM as
`llvm.loop.unroll.full`."""

SPEC = "affinec.spec"
"""Module attribute recording the spec (a dictionary) the frontend built it from."""


def mapping_of(op: Operation) -> str | None:
    """The GPU level an `affine.parallel` is mapped to, if any."""
    attr = op.attributes.get(MAPPING)
    return attr.data if attr is not None else None  # pyright: ignore


@irdl_op_definition
class PaddedLoadOp(AffineLoadBase):
    """An `affine.load` that reads zero wherever the access falls outside the memref."""

    name = "affinec.padded_load"


Affinec = Dialect("affinec", [PaddedLoadOp], [])
