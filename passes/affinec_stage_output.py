"""`affinec-stage-output`: store each block's output through a shared tile and copy it
out 16 bytes a thread.

On the tensor cores a lane holds pairs of adjacent channels, so a write-back that
stores its elements straight to global memory moves 4 bytes of f16 a store. Staged,
the write-back band stores into a shared tile of the block's outputs, and a new band
copies each pixel's channels out in 16-byte vectors (details and an example:
`affinec/transforms/gpu/output_staging.py`):

    affine.parallel (%n1, %oh1, %ow1, %k1) = ... to (1, 4, 4, 64) {
      ... affine.store %out, %output[..., %k0 * 64 + %k1]
    } {affinec.mapping = "block"}

becomes

    %output_shared = memref.alloc() {affinec.overlay} : memref<16x64xf16, 3 : i64>
    affine.parallel (%n1, %oh1, %ow1, %k1) = ... to (1, 4, 4, 64) {
      ... affine.store %out, %output_shared[%oh1 * 4 + %ow1, %k1]
    } {affinec.mapping = "block"}
    affine.parallel (%m, %kv) = (0, 0) to (16, 8) {
      ... (%oh1, %ow1 from %m)
      %v = affine.vector_load %output_shared[%m, %kv * 8] : vector<8xf16>
      affine.vector_store %v, %output[..., %k0 * 64 + %kv * 8] : vector<8xf16>
    } {affinec.mapping = "block", affinec.unroll}

The tile may take the bytes of the block's other shared buffers (`affinec.overlay`;
`affinec-insert-barriers` fences it, `affinec-plan-shared-memory` places it). A
write-back that cannot be staged (its channels not in aligned 16-byte runs, inside a
loop, a tile that does not fit the chip) is left as it is, with a remark saying why.
Runs after `affinec-place-buffers`, before `affinec-insert-barriers` (and
`affinec-mma-sync`, which stores the lanes' pairs into the tile). Moves values
without computing: the result is bit for bit the same.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import remark
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels, require_placed
from affinec.transforms.gpu.output_staging import plan_staging, stage


@dataclass(frozen=True)
class AffinecStageOutput(ModulePass):
    """Store each block's output through a shared tile, copied out 16 bytes a thread."""

    name = "affinec-stage-output"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        work = []
        for g in grid_parallels(op):
            analysis = analyze_grid(g)
            require_placed(analysis, self.name)
            stageable, refused = plan_staging(analysis)
            for phase, why in refused:
                remark(phase.op, f"the output is not staged: {why}")
            work += stageable
        for staging in work:
            stage(staging)
