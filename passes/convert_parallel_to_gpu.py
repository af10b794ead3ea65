"""`affinec-convert-parallel-to-gpu`: grid/block-mapped `affine.parallel` → `gpu.launch`.

MLIR's `convert-parallel-loops-to-gpu` does this for mapped `scf.parallel`; ours takes
the tiled affine IR directly. One block per iteration of the grid band (linearized onto
`blockIdx.x`); the iterations of each block band are shared by the block's threads, a
thread taking iteration `%tx + %j * T` in its turn `%j`, under a guard for the band's end
and for partial tiles. Block-shaped buffers indexed by the block band's own induction
variables become per-thread storage indexed by the turn; other grid-level buffers
become workgroup (shared) memory, with `gpu.barrier` between the phases that
communicate through memory. `affinec/gpu_mapping.py` has the details.

    affine.parallel (%i) = (0) to (4) {
      %acc = memref.alloc() : memref<16xf32>
      affine.parallel (%t) = (0) to (min(16, 50 - %i * 16)) {
        affine.store %zero, %acc[%t] : memref<16xf32>
      } {affinec.mapping = "block"}
      ...
    } {affinec.mapping = "grid"}

becomes, with `threads-per-block=8`:

    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, ...) threads(%tx, %ty, %tz)
        in (%sx = %c8, ...) {
      %i = affine.apply affine_map<(d0) -> (d0)>(%bx)
      %acc = memref.alloca() : memref<2xf32>
      affine.for %j = 0 to 2 {
        %t = affine.apply affine_map<(d0, d1) -> (d0 + d1 * 8)>(%tx, %j)
        affine.if affine_set<(d0, d1) : (-d0 - d1 * 16 + 49 >= 0)>(%t, %i) {
          affine.store %zero, %acc[%j] : memref<2xf32>
        }
      } {affinec.unroll}
      ...
      gpu.terminator
    }

Option `threads-per-block` (0: the largest band's size, at most 256).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.context import require_affinec_dialects
from affinec.transforms.gpu.mapping import (
    build_launch,
    check_threads_per_block,
    grid_parallels,
    plan_launch,
)


@dataclass(frozen=True)
class ConvertParallelToGpu(ModulePass):
    """Grid/block-mapped affine.parallel to gpu.launch (blocks, threads, shared memory)."""

    name = "affinec-convert-parallel-to-gpu"

    threads_per_block: int = 0
    """Threads of each block; 0 picks the largest block band's size, at most 256."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        grids = grid_parallels(op)
        for g in grids:
            check_threads_per_block(g, self.threads_per_block)
        plans = [plan_launch(g, self.threads_per_block) for g in grids]
        for plan in plans:
            build_launch(plan)
