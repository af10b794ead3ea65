"""`affinec-warp-specialize`: a producer warpgroup issues every TMA load, the block's
warpgroups only wait, multiply and hand the stages back (sm_90a).

Runs after `affinec-tma-copies` and `affinec-map-threads`, on a block whose stages
TMA loads: the block takes one warpgroup more (T + 128 threads). The reduction
(from the barriers' initialization to its last wait) becomes one thread band split
on the warpgroup: the last warpgroup lowers its registers (`setmaxnreg.dec`) and its
first thread issues the loads, each after its stage's release, as far ahead as the
releases let it; the others raise theirs (`setmaxnreg.inc`) and run the reduction
without its loads (waits on each stage, MMAs, one arrival a warpgroup on the
stage's release) and the epilogue up to its first `gpu.barrier` (an epilogue staged
through shared memory up to its second, the first made a barrier of the consumers
alone on an mbarrier, so the accumulators stay in their branch). The bands before
and after (the barriers' initialization, the rest of the epilogue) run on the first
T threads, every `gpu.barrier` left meeting the whole block.

    affine.for %t = 0 to 8 {
      affine.parallel (%tx) = (0) to (256) { nvgpu.mbarrier.try_wait.parity .. }
      affine.parallel (%tx) = (0) to (256) { affinec.warpgroup_mma .. }
      affine.parallel (%tx) = (0) to (256) { (one a warpgroup) nvgpu.mbarrier.arrive %released .. }
      affine.if (%t <= 5) {
        affine.parallel (%tx) = (0) to (256) {
          affine.if (%tx == 0) { try_wait %released ..; arrive.expect_tx ..; nvgpu.tma.async.load .. }
        }
      }
    }

becomes

    affine.parallel (%tx) = (0) to (384) {
      affine.if (%tx >= 256) {
        nvvm.setmaxregister decrease 56
        affine.for %t = 0 to 8 {
          affine.if (%t <= 5) {
            affine.if (%tx == 256) { try_wait %released ..; arrive.expect_tx ..; nvgpu.tma.async.load .. }
          }
        }
      } else {
        nvvm.setmaxregister increase 224
        affine.for %t = 0 to 8 {
          nvgpu.mbarrier.try_wait.parity ..
          affinec.warpgroup_mma ..
          (one a warpgroup) nvgpu.mbarrier.arrive %released ..
        }
      }
    }

The phases are proven by running the producer's thread and the consumers'
concurrently, each ahead in turn (`warp_specialize_phases`), and the shared
memory's hazards checked. Refused, located: a block not loaded by TMA, a load not
elected to one thread, a `gpu.barrier` inside the reduction, registers the
multiprocessor does not have. A module with no TMA-loaded block is left as it is.
`affinec/transforms/gpu/warp_specialize.py` has the details.
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
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass
from affinec.transforms.gpu.warp_specialize import is_tma_block, specialize
from affinec.transforms.gpu.warp_specialize_phases import check_specialized_phases


@dataclass(frozen=True)
class AffinecWarpSpecialize(ModulePass):
    """A producer warpgroup for the TMA loads, the block's warpgroups consumers."""

    name = "affinec-warp-specialize"

    producer_registers: int = 56
    """Registers a thread of the producer warpgroup keeps (`setmaxnreg.dec`): a
    multiple of 8 from 24 to 256."""

    consumer_registers: int = 0
    """Registers a consumer thread takes (`setmaxnreg.inc`; a multiple of 8 from 24
    to 256); 0: the most the multiprocessor's register file leaves, at most 240."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        for count, what in (
            (self.producer_registers, "producer-registers"),
            (self.consumer_registers, "consumer-registers"),
        ):
            if count == 0 and what == "consumer-registers":
                continue
            if not (24 <= count <= 256 and count % 8 == 0):
                raise PassError(
                    op, f"{what} must be a multiple of 8 from 24 to 256, got {count}"
                )
        grids = [g for g in grid_parallels(op) if is_tma_block(g)]
        for grid in grids:
            chip = chip_of(grid)
            if not chip.has("setmaxnreg"):
                raise PassError(
                    grid,
                    f"warp specialization reallocates registers (setmaxnreg): it "
                    f"needs sm_90a; the module is compiled for {chip.name}",
                )
        for grid in grids:
            specialize(
                grid,
                chip_of(grid),
                self.producer_registers,
                self.consumer_registers,
            )
            check_specialized_phases(grid)
        check_after_pass(op)
