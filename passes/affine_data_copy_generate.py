"""`affine-data-copy-generate`: copy what each compute band reads into shared memory.

MLIR's pass of this name copies the data a loop nest accesses into a faster memory
space, sized by its exact footprint. Ours does that at the reference design's depth:
for each block band with a reduction loop inside (the compute phase, under the
reduction's tile loops), each function argument it reads and the grid band never
writes gets a buffer of the block in memory space 3, shaped by the footprint of the
band's accesses (`affinec/transforms/affine/footprint.py`), filled by a
block-mapped copy band right before the compute band (zeros where the box leaves the
tensor: padding, partial tiles); the band reads the buffer instead.
`affinec/transforms/affine/data_copy.py` has an example.

    affine.for %c0 = 0 to 2 {
      affine.parallel (%oh1, %ow1, %k1) = ... {
        affine.for %c1 = 0 to 4 {
          %a = affinec.padded_load %input[%oh0 * 4 + %oh1 + %r0 - 1, ...]

becomes

    %input_shared = memref.alloc() : memref<1x4x8x4xf32, 3 : i64>
    affine.for %c0 = 0 to 2 {
      affine.parallel (%f0, %f1, %f2, %f3) = (0, 0, 0, 0) to (1, 4, 8, 4) {
        %v = affinec.padded_load %input[%n0 + %f0, %oh0 * 4 + %r0 - 1 + %f1, ...]
        affine.store %v, %input_shared[%f0, %f1, %f2, %f3]
      } {affinec.mapping = "block"}
      affine.parallel (%oh1, %ow1, %k1) = ... {
        affine.for %c1 = 0 to 4 {
          %a = affine.load %input_shared[0, %oh1, %ow1, %c1]

Options: `memrefs` (the arguments to copy, by name; all by default),
`fast-mem-capacity` (KiB of shared memory a block may use, 48 by default: the static
limit every CUDA GPU grants), `generate-dma` (16-byte asynchronous copies where the
footprint's rows allow), `reduction-innermost` (lay the buffers out for a
tensor-core consumer: the reduction's channel dimension innermost); MLIR's
`fast-mem-space` and `slow-mem-space` are taken at their GPU values (3 and 0),
`skip-non-unit-stride-loops` changes nothing (the copies sit at the compute band).
Refuses, before rewriting, a footprint that is not a box with constant extents and
copies that do not fit, naming the bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError, location_of
from affinec.dialects.nvvm_target import chip_of
from affinec.hardware.chips import CHIPS, KIB
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.affine.data_copy import generate_copies, plan_copies
from affinec.transforms.mapped_bands import grid_loops

MAX_CAPACITY_KIB = max(c.max_shared_per_block for c in CHIPS.values()) // KIB
"""The most shared memory a block can have on any chip affinec knows (sm_90's)."""


@dataclass(frozen=True)
class AffineDataCopyGenerate(ModulePass):
    """Copy each compute band's footprint of its inputs into shared memory."""

    name = "affine-data-copy-generate"

    memrefs: tuple[str, ...] = ()
    """Names of the function arguments to copy (default: every one a compute band
    reads and the grid band does not write)."""

    fast_mem_capacity: int = 48
    """Shared memory a block may use for the copies, in KiB."""

    generate_dma: bool = False
    """Copy rows 16 bytes at a time with asynchronous copies (`cp.async`, as MLIR's
    option generates DMA transfers) where the footprint allows it: each chunk is an
    `nvgpu.device_async_copy` (zero-filling outside the tensor), the compute band
    waits for them; other footprints are copied element by element."""

    fast_mem_space: int = 3
    """The memory space of the buffers: 3, a GPU block's shared memory (the only
    fast memory it has; MLIR's default, 1, names none on a GPU)."""

    slow_mem_space: int = 0
    """The memory space copied from: 0, the GPU's global memory."""

    skip_non_unit_stride_loops: bool = False
    """MLIR's choice of the loop depth to copy at; this pass copies at the compute
    band's depth whatever the strides, so the option changes nothing here."""

    reduction_innermost: bool = False
    """Lay each buffer out with the reduction's channel dimension innermost (what a
    tensor-core MMA reads along its k), whatever the tensor's layout: an NCHW input
    is copied into a tile whose channels are contiguous."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        site = _option_site(op)
        if not 0 < self.fast_mem_capacity <= MAX_CAPACITY_KIB:
            raise PassError(
                site,
                f"fast-mem-capacity must be between 1 and {MAX_CAPACITY_KIB} KiB, "
                f"got {self.fast_mem_capacity}",
            )
        for option, value, only in (
            ("fast-mem-space", self.fast_mem_space, 3),
            ("slow-mem-space", self.slow_mem_space, 0),
        ):
            if value != only:
                raise PassError(
                    site,
                    f"{option}={value}: this pass copies from global memory (space "
                    f"0) into a block's shared memory (space 3) only",
                )
        # No more than the module's chip gives a block.
        capacity = min(self.fast_mem_capacity, chip_of(op).max_shared_per_block // KIB)
        plans = [
            plan
            for grid in grid_loops(op, self.name)
            for plan in plan_copies(
                grid,
                self.memrefs,
                capacity * KIB,
                self.reduction_innermost,
            )
        ]
        generate_copies(plans, self.generate_dma)


def _option_site(module: ModuleOp) -> Operation:
    """Where an option's refusal is reported: the module, or, for one the parser
    made around the input's ops (which has no place in the text), the first op
    that has one."""
    if location_of(module) is not None:
        return module
    return next((o for o in module.walk() if location_of(o) is not None), module)
