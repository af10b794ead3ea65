"""`affinec-insert-barriers`: a `gpu.barrier` wherever the phases of a block pass
data to each other through memory.

The threads of a block run the grid level's phases (block- or thread-mapped bands)
each at its own pace. A phase that reads what an earlier phase wrote, or writes what
it read or wrote, since the last barrier, gets a barrier before it; across the trips
of an enclosing loop too (the next tile's copy waits for this tile's compute).
Private buffers (memory space 5) need none. `affinec/transforms/gpu/barriers.py` has
the analysis.

    affine.for %c0 = 0 to 2 {
      affine.parallel ... { ... store %tile ... } {affinec.mapping = "block"}
      affine.parallel ... { ... load %tile ... } {affinec.mapping = "block"}
    }

becomes

    affine.for %c0 = 0 to 2 {
      gpu.barrier
      affine.parallel ... { ... store %tile ... } {affinec.mapping = "block"}
      gpu.barrier
      affine.parallel ... { ... load %tile ... } {affinec.mapping = "block"}
    }

Runs after `affinec-place-buffers` (it needs to know the private buffers); the
barriers it places are proven by the interpreter once the bands are mapped to threads
(a missing one is a data race on shared memory there).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels, require_placed
from affinec.transforms.gpu.barriers import insert_barriers, plan_barriers
from affinec.transforms.gpu.shared_memory_hazards import check_after_pass


@dataclass(frozen=True)
class AffinecInsertBarriers(ModulePass):
    """Insert gpu.barrier between the phases of a block that communicate through memory."""

    name = "affinec-insert-barriers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        analyses = [analyze_grid(g) for g in grid_parallels(op)]
        for analysis in analyses:
            require_placed(analysis, self.name)
        for sites in [plan_barriers(a) for a in analyses]:
            insert_barriers(sites)
        check_after_pass(op)
