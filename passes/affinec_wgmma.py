"""`affinec-wgmma`: the block's accumulation on Hopper's warpgroup MMA.

The tensor-core pass of the pipeline for sm_90a, where `affinec-mma-sync` is for
sm_80: it takes the same IR (a promoted, pipelined, placed grid band whose compute
band reads shared tiles A and B) and writes, for each step of the reduction, one
`affinec.warpgroup_mma` of each warpgroup (128 threads, 64 rows of the block) on
the tiles the promotion copied; the accumulator is in each thread's registers
(`%fragments`), zeroed and written back through the epilogue as `affinec-mma-sync`
does (`affinec/transforms/gpu/wgmma_lowering.py` has the details). Everything
after it is the pipeline's: `affinec-map-threads` shares the copies out over the
warpgroups' threads, `affinec-plan-shared-memory` lays the tiles out as `wgmma`
reads them (8 x 8 core matrices, no swizzle) instead of padding them, and
`convert-nvgpu-to-nvvm` writes the `wgmma.mma_async` instructions on their
descriptors.

    affine.parallel (%i1, %j1) = (0, 0) to (64, 64) {
      affine.for %p1 = 0 to 32 {
        %a = affine.load %A_shared[%s, %i1, %p1] : memref<2x64x32xf16, 3>
        %b = affine.load %B_shared[%s, %p1, %j1] : memref<2x32x64xf16, 3>
        ... acc[%i1, %j1] += %a * %b ...
    } {affinec.mapping = "block"}

becomes

    affine.parallel (%tx) = (0) to (128) {
      %row = affine.apply affine_map<(d0) -> (d0 floordiv 128 * 64)>(%tx)
      affinec.warpgroup_mma %fragments, %A_shared[%s, %row], %B_shared[%s]
          : memref<1x8x4xf32, 5>, memref<2x64x32xf16, 3>, memref<2x32x64xf16, 3>
    } {affinec.mapping = "thread"}

Where the block's A is no 2-D tile (a filter's taps, a stride, pixels in several
band dimensions: a 3x3 convolution), A comes from registers instead: each warp
loads its rows of each tap with `affinec-mma-sync`'s `ldmatrix` fragments from the
promoted input window, and one `affinec.warpgroup_mma_registers` a step reads the
filter tile of each tap by descriptor (`affinec/transforms/gpu/wgmma_registers.py`);
there the block may have any number of rows up to the warpgroups' (those past it
are never stored).

Refused, located: a target without wgmma (sm_90a only), operands other than f16
and bf16, a block tile whose M is no multiple of 64 (A from shared memory) or over
the block's warpgroups, or whose N is no multiple of 8 (or over 256), a reduction
step no multiple of 16 (or, A from registers, over 288 channels), a filter tile
other than its taps' K x N tiles (RSCK) under A from registers. The MMA sums in
its own order, so `Pipeline.run(check=True)` holds this pass to the dtype's
tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels, require_placed
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass
from affinec.transforms.gpu.thread_plan import accumulator_phases
from affinec.transforms.gpu.wgmma_lowering import plan_wgmma, rewrite_wgmma


@dataclass(frozen=True)
class AffinecWgmma(ModulePass):
    """Rewrite the accumulation of each grid band into warpgroup MMA (sm_90a)."""

    name = "affinec-wgmma"

    in_flight: bool = False
    """With A from registers and taps' loops left around each step's runs (their
    fragments more than the registers hold at once): leave each run in flight
    while the next one's fragments load, waiting for all after the loops."""

    @property
    def changes_rounding(self) -> bool:
        return True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        plans = []
        grids = grid_parallels(op)
        # A grid band that accumulates nothing beside one that does (the band that
        # adds a split reduction's partial sums) is no contraction: left as it is.
        accumulates = [bool(accumulator_phases(analyze_grid(g))) for g in grids]
        for g, accumulating in zip(grids, accumulates, strict=True):
            if not accumulating and any(accumulates):
                continue
            analysis = analyze_grid(g)
            require_placed(analysis, self.name)
            plans.append(plan_wgmma(analysis))
        for plan in plans:
            rewrite_wgmma(plan, self.in_flight)
        check_after_pass(op)
