"""`affine-pipeline-data-transfer`: keep the next tiles' copies in flight while the
block computes on this one.

MLIR's pass of this name double-buffers the DMA transfers of a loop, starting the
next iteration's before this one's compute. Ours does so for the asynchronous copies
`affine-data-copy-generate{generate-dma}` makes, with `stages` buffers (2: double
buffering): the shared buffers get a leading dimension of `stages`, the reduction's
tile loops become one loop over the tiles, copies run `stages - 1` tiles ahead (a
prologue issues the first ones), and each tile waits only for its own copies
(`nvgpu.device_async_wait {numGroups = stages - 1}`). A nest of fewer tiles than
`stages` gets one stage per tile (at least two): more could never be in flight, and the
wait's count is right only when the prologue issues `stages - 1` groups.
`affinec/transforms/affine/pipelining.py` shows the loop before and after.

    affine.for %c0 = 0 to 4 {
      <copies of tile %c0>; create_group; wait {numGroups = 0}; <compute>
    }

becomes, with `stages=2`:

    <copies of tile 0 into stage 0>; create_group
    affine.for %t = 0 to 4 {
      affine.if (%t + 1 < 4) { <copies of tile %t + 1 into stage (%t + 1) mod 2> }
      create_group; wait {numGroups = 1}
      <compute on stage %t mod 2>
    }

Runs after `affine-data-copy-generate{generate-dma=true}`, before
`affinec-place-buffers` and `affinec-insert-barriers` (the barriers it places around
the copies and the compute keep a stage from being overwritten while it is read; the
interpreter reports a race where they would be missing). Tile loops without
asynchronous copies are left alone. The order of summation is unchanged. The result is
checked for reads the waits do not cover (`affinec-verify-shared-memory`'s check,
without the barriers, which come later).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import remark
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.pipelining import pipeline, plan_pipelines
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass
from affinec.transforms.mapped_bands import grid_loops


@dataclass(frozen=True)
class AffinePipelineDataTransfer(ModulePass):
    """Run each grid band's asynchronous copies stages - 1 tiles ahead of its compute."""

    name = "affine-pipeline-data-transfer"

    stages: int = 2
    """Buffers of each copied tile (2: double buffering; at most 8; at most one per
    tile of the nest)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        plans = [
            p for g in grid_loops(op, self.name) for p in plan_pipelines(g, self.stages)
        ]
        for plan in plans:
            used = plan.stages_for(self.stages)
            if used < self.stages:
                remark(
                    plan.loops[0],
                    f"{self.stages} stages asked for {plan.tiles} tiles: "
                    f"{used} stages (no more can be in flight)",
                )
            pipeline(plan, self.stages)
        check_after_pass(op, barriers=False)
