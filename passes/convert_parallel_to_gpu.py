"""`affinec-convert-parallel-to-gpu`: a thread-mapped grid band → `gpu.launch`.

MLIR's `convert-parallel-loops-to-gpu` does this for mapped `scf.parallel`; ours
takes the mapped affine IR directly, and decides nothing: the grid band's extents are
the grid (linearized onto `blockIdx.x`), the thread bands' size is the block (their
variable is `threadIdx.x`), buffers in memory space 3 become workgroup attributions
and those in space 5 per-thread allocas, barriers are where they are.
`affinec/transforms/gpu/conversion.py` has the details.

    affine.parallel (%i) = (0) to (4) {
      %acc = memref.alloc() : memref<2xf32, 5 : i64>
      affine.parallel (%tx) = (0) to (8) {
        affine.for %j = 0 to 2 { ... %acc[%j] ... } {affinec.unroll}
      } {affinec.mapping = "thread"}
    } {affinec.mapping = "grid"}

becomes

    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c4, ...) threads(%tx, %ty, %tz)
        in (%sx = %c8, ...) {
      %i = affine.apply affine_map<(d0) -> (d0)>(%bx)
      %acc = memref.alloca() : memref<2xf32>
      affine.for %j = 0 to 2 { ... %acc[%j] ... } {affinec.unroll}
      gpu.terminator
    }

The decisions are made by `affinec-place-buffers`, `affinec-insert-barriers` and
`affinec-map-threads` (the named pipeline `affinec-map-to-gpu` runs all four).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels
from affinec.transforms.gpu.conversion import block_size, build_launch
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass


@dataclass(frozen=True)
class ConvertParallelToGpu(ModulePass):
    """Thread-mapped affine.parallel bands to gpu.launch (blocks, threads, shared memory)."""

    name = "affinec-convert-parallel-to-gpu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        work = []
        for g in grid_parallels(op):
            analysis = analyze_grid(g)
            work.append((analysis, block_size(analysis)))
        for analysis, threads in work:
            build_launch(analysis, threads)
        check_after_pass(op)
