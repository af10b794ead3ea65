"""`affinec-tma-copies`: the tiles `wgmma` reads loaded by TMA, each pipeline stage
completing on an mbarrier (sm_90a).

Runs after `affinec-wgmma`, on the copies the promotion made (block bands of
`cp.async`, `affine-data-copy-generate{generate-dma}`) and the stages the
pipelining made (`affine-pipeline-data-transfer`): each copy band of a tile an
`affinec.warpgroup_mma` reads becomes one thread's `arrive.expect_tx` of the
tile's bytes on its stage's mbarrier and the tile's TMA loads, one box a column
slab of the tile (slabs of 128-, 64- or 32-byte rows swizzled so, as TMA and
`wgmma` swizzle them; of 16-byte rows, `wgmma`'s core matrices without swizzle,
where the rows allow no swizzle or with `{swizzle=false}`); each step waits, every
thread, for its stage's phase (`try_wait.parity`, the parity of the stage's use);
the host makes one tensor map per matrix, passed to the kernel as a grid-constant
parameter. The stages are handed back on a second mbarrier each (one thread of
each warpgroup arrives after its step, the loading thread waits before it reuses
the stage), so no `gpu.barrier` is left in the reduction loop; with
`{in-flight=true}` (3 stages or more) each step's MMAs stay in flight until the
next step (`affinec/transforms/gpu/wgmma_tma.py` and `wgmma_tma_release.py` have
the details).

    affine.parallel (%r, %v) = (0, 0) to (64, 4) {
      nvgpu.device_async_copy %A[..], %A_shared[%s, %r, %v * 8], 8, %n ...
    } {affinec.mapping = "block"}
    ...
    nvgpu.device_async_wait %g {numGroups = 1 : i32}

becomes

    affine.parallel (%one) = (0) to (1) {
      affine.if (g >= stages) { nvgpu.mbarrier.try_wait.parity %stage_released[%s] .. }
      nvgpu.mbarrier.arrive.expect_tx %stage_barriers[%s], %c4096 : ...
      nvgpu.tma.async.load %A_map[%col, %row], %stage_barriers[%s] to %slab ...
    } {affinec.mapping = "block"}
    ...
    nvgpu.mbarrier.try_wait.parity %stage_barriers[%s], %parity, %ticks : ...
    affinec.warpgroup_mma %fragments, %A_shared[%s, %row], %B_shared[%s] ...
    %h = nvgpu.mbarrier.arrive %stage_released[%s]     (one thread a warpgroup)

A convolution's tile of one tap (`affinec-wgmma` reading a box of pixels) is an
N-D box of the NHWC input at the tap's shifted origin, the padding by TMA's zero
fill; at a stride the box's elements are that many apart (TMA's element strides,
the descriptor's `traversal`).

Each copy band is proven to be a TMA box before it is replaced (its source the
tile's origin plus the element times the box's strides, the zero fill exactly past
the array's edges), and the result's phases are proven by running the block trip
by trip (`wgmma_tma_phases`). Refused, located: a copy TMA cannot do (rows not a
multiple of 16 bytes apart, a box over 256 elements along a dimension, a stride
over 8, zero fill other than TMA's), a stage index the pipelining did not write. A module
with no `wgmma` step reading copied tiles is left as it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.base.diagnostics import PassError
from affinec.dialects.nvvm_target import chip_of
from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.bands import grid_parallels
from affinec.transforms.gpu.wgmma_tma import rewrite_tma, tma_grid
from affinec.transforms.gpu.wgmma_tma_phases import check_phases


@dataclass(frozen=True)
class AffinecTmaCopies(ModulePass):
    """Load the tiles wgmma reads by TMA, the stages completing on mbarriers."""

    name = "affinec-tma-copies"

    swizzle: bool = True
    """Lay each tile out in slabs as wide as 128 (64, 32) bytes, swizzled (one TMA
    box per 64 columns of 16-bit elements); false: slabs of 8 columns, unswizzled."""

    in_flight: bool = False
    """With 3 stages or more: each step's MMAs left in flight until the next step
    (`wgmma.wait_group 1`), its stage handed back a step later."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        plans = []
        for grid in grid_parallels(op):
            copies = tma_grid(grid)
            if copies is None:
                continue
            chip = chip_of(grid)
            if not chip.has("tma"):
                raise PassError(
                    grid,
                    f"TMA needs sm_90 or sm_90a; the module is compiled for "
                    f"{chip.name}",
                )
            plans.append((grid, copies))
        for grid, copies in plans:
            rewrite_tma(grid, copies, self.swizzle, self.in_flight)
            check_phases(grid)
