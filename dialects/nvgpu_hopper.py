"""nvgpu's Hopper ops, as MLIR's: mbarriers, TMA loads, and warpgroup MMA (`wgmma`)
reading both operands from shared memory.

    %bar = nvgpu.mbarrier.create -> !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
    nvgpu.mbarrier.init %bar[%c0], %c1 : !barriers
    nvgpu.mbarrier.arrive.expect_tx %bar[%c0], %bytes : !barriers
    nvgpu.tma.async.load %map[%x, %y], %bar[%c0] to %tile : !map, !barriers -> memref<64x64xf16, 3>
    nvgpu.mbarrier.try_wait.parity %bar[%c0], %parity, %ticks : !barriers
    %da = nvgpu.warpgroup.generate.descriptor %tile, %map : memref<64x64xf16, 3>, !map -> !descA
    %acc = nvgpu.warpgroup.mma.init.accumulator -> !acc
    %d = nvgpu.warpgroup.mma %da, %db, %acc {transposeB} : !descA, !descB, !acc -> !acc
    nvgpu.warpgroup.mma.store %d, %out : !acc to memref<64x64xf32>

What they mean (the interpreter runs exactly this, `affinec.interpreter.hopper`):

- An **mbarrier** counts arrivals and bytes. `init` sets the arrivals a phase needs;
  a phase completes when they have all arrived and every byte announced with
  `arrive.expect_tx` has landed; `try_wait.parity %p` blocks until the phase of
  parity `%p` has completed (a new barrier is in phase 0, so parity 1 passes at once).
- **`tma.async.load`** copies the box of the tensor map at the coordinates (innermost
  dimension first, as PTX orders them; elements out of the tensor read zero) into the
  shared tile, swizzled as the map says, and counts its bytes on the barrier; the
  tile is written when the barrier's phase completes.
- **`warpgroup.mma`** is run by the 128 threads of a warpgroup together: D = A × B + C
  with A (M × K) read K-major from its tile and B (K × N) read from its row-major tile
  (`transposeB`: PTX's MN-major B), as `m64nNk16` instructions, each rounded once to
  f32. `warpgroup.mma.store` writes each thread's registers of the accumulator to
  their places in a memref (`affinec.hardware.wgmma_layouts` has the fragment).

The tiles `wgmma` reads are those TMA wrote, swizzled (32, 64 or 128 B): the
descriptor gets its swizzle from the tensor map. Verifiers are stricter than MLIR's
where the lowering needs it: f16 and bf16 operands, `transposeB` required,
`transposeA` refused, accumulators of f32.
"""

from __future__ import annotations

from xdsl.ir import Operation

from affinec.dialects.nvgpu_hopper_types import (
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    WarpgroupAccumulatorType,
    WarpgroupMatrixDescriptorType,
)
from affinec.dialects.nvgpu_mbarrier import (
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierCreateOp,
    MBarrierInitOp,
    MBarrierTryWaitParityOp,
    TmaAsyncLoadOp,
    TmaCreateDescriptorOp,
)
from affinec.dialects.nvgpu_warpgroup import (
    WarpgroupGenerateDescriptorOp,
    WarpgroupMmaInitAccumulatorOp,
    WarpgroupMmaOp,
    WarpgroupMmaStoreOp,
)

HOPPER_OPS: tuple[type[Operation], ...] = (
    MBarrierCreateOp,
    MBarrierInitOp,
    MBarrierArriveExpectTxOp,
    MBarrierArriveOp,
    MBarrierTryWaitParityOp,
    TmaCreateDescriptorOp,
    TmaAsyncLoadOp,
    WarpgroupGenerateDescriptorOp,
    WarpgroupMmaInitAccumulatorOp,
    WarpgroupMmaOp,
    WarpgroupMmaStoreOp,
)
HOPPER_TYPES = (
    MBarrierGroupType,
    MBarrierTokenType,
    TensorMapDescriptorType,
    WarpgroupMatrixDescriptorType,
    WarpgroupAccumulatorType,
)


__all__ = [
    "HOPPER_OPS",
    "HOPPER_TYPES",
    "MBarrierArriveExpectTxOp",
    "MBarrierArriveOp",
    "MBarrierCreateOp",
    "MBarrierInitOp",
    "MBarrierTryWaitParityOp",
    "TmaAsyncLoadOp",
    "TmaCreateDescriptorOp",
    "WarpgroupGenerateDescriptorOp",
    "WarpgroupMmaInitAccumulatorOp",
    "WarpgroupMmaOp",
    "WarpgroupMmaStoreOp",
]
