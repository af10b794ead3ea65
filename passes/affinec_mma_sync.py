"""`affinec-mma-sync`: the block's accumulation on tensor cores, warp by warp.

The reference design's "Volta MMA" step as a pass: the accumulator's bands of a
promoted grid band (zeroing, accumulation over the shared tiles, write-back) become
warp bands of m16n8k16 `nvgpu.mma.sync`, their operands loaded from the shared tiles
with `nvgpu.ldmatrix`, every lane keeping its fragments of the accumulator in its own
registers (`affinec/transforms/gpu/mma.py` has the details and an example). The
block's warps tile its pixels x output channels `warp-grid` = M x N warps.

    affine.parallel (%oh1, %ow1, %k1) = ... {
      affine.for %c1 = 0 to 16 {
        %a = affine.load %input_shared[%oh1, %ow1, %c1] ...
        %b = affine.load %filter_shared[%c1, %k1] ...
        ... acc[%oh1, %ow1, %k1] += %a * %b ...
    } {affinec.mapping = "block"}

becomes

    affine.parallel (%tx) = (0) to (128) {
      affine.for %kc = 0 to 1 { affine.for %mt = ... { affine.for %nt = ... {
        %a = nvgpu.ldmatrix %input_shared[...] {numTiles = 4 : i32, transpose = false}
        %b = nvgpu.ldmatrix %filter_shared[...] {numTiles = 2 : i32, transpose = true}
        %d = nvgpu.mma.sync (%a, %b, %c) {mmaShape = [16, 8, 16]} ...
    } {affinec.mapping = "thread"}

Runs after `affine-data-copy-generate{reduction-innermost=true}`,
`affinec-place-buffers` and `affinec-insert-barriers`, before `affinec-map-threads`
(which shares the copy bands out over the warps' threads). The MMA sums in its own
order, so `Pipeline.run(check=True)` holds this pass to the dtype's tolerance.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.frontend.reference import TOLERANCE
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels, require_placed
from affinec.transforms.gpu.mma import rewrite_mma
from affinec.transforms.gpu.mma_plan import fold_group_dimensions, plan_mma
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass
from affinec.transforms.gpu.thread_plan import accumulator_phases


@dataclass(frozen=True)
class AffinecMmaSync(ModulePass):
    """Rewrite the accumulation of each grid band into warp-level mma.sync (tensor cores)."""

    name = "affinec-mma-sync"

    warp_grid: tuple[int, ...] = (2, 2)
    """Warps of a block along its pixels (M) and its output channels (N)."""

    tf32: bool = False
    """Take f32 operands on the tensor cores as tf32 (m16n8k8: 10 bits of mantissa,
    the operands truncated), held to tf32's tolerance."""

    unroll_taps: bool = False
    """Unroll the loops over a step's filter taps, so that the next tap's fragment
    loads are in the same basic block as this tap's MMAs and ptxas can issue them
    while the MMAs run (at the cost of registers)."""

    @property
    def changes_rounding(self) -> bool:
        return True

    @property
    def tolerance(self) -> float | None:
        """tf32's tolerance when the pass computes in tf32 (the checker holds this
        stage and every later one to it)."""
        return TOLERANCE["tf32"] if self.tf32 else None

    @property
    def precision(self) -> str:
        return "tf32" if self.tf32 else "the storage type"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)

        if len(self.warp_grid) != 2:
            raise PassError(
                op, f"warp-grid takes two sizes (M, N), got {self.warp_grid}"
            )
        plans = []
        grids = grid_parallels(op)
        # A grid band that accumulates nothing beside one that does (the band that
        # adds a split reduction's partial sums) is no contraction: left as it is.
        analyses = [analyze_grid(g) for g in grids]
        accumulates = [bool(accumulator_phases(a)) for a in analyses]
        for g, analysis, accumulating in zip(grids, analyses, accumulates, strict=True):
            if not accumulating and any(accumulates):
                continue
            if fold_group_dimensions(analysis):
                analysis = analyze_grid(g)
            require_placed(analysis, self.name)
            plans.append(
                plan_mma(
                    analysis,
                    (self.warp_grid[0], self.warp_grid[1]),
                    self.tf32,
                    unroll_taps=self.unroll_taps,
                )
            )
        for plan in plans:
            rewrite_mma(plan)
        check_after_pass(op)
