"""`affinec-place-buffers`: decide, for each buffer of a block, shared memory or each
thread's own, and write it into the buffer's memory space.

A buffer allocated inside a grid-mapped band exists once per block. One whose every
access is indexed by exactly the induction variables of block bands with one
iteration space is touched, element by element, only by the thread running that
iteration: it is private (memory space 5). Any other is shared by the block's threads
(memory space 3, shared memory). `affinec/transforms/gpu/placement.py` has the rule.

    affine.parallel (%i) = (0) to (4) {
      %acc = memref.alloc() : memref<16xf32>
      affine.parallel (%t) = (0) to (16) {
        affine.store %zero, %acc[%t] : memref<16xf32>
      } {affinec.mapping = "block"}
      ...
    } {affinec.mapping = "grid"}

becomes

      %acc = memref.alloc() : memref<16xf32, 5 : i64>

Refuses, before rewriting, a block whose shared buffers exceed the 227 KiB a block
may have on sm_90 (past 48 KiB, `convert-gpu-to-nvvm` places them in dynamic shared
memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.affine.analysis import refuse_unsupported
from affinec.transforms.gpu.bands import analyze_grid, grid_parallels
from affinec.transforms.gpu.placement import place, plan_placement


@dataclass(frozen=True)
class AffinecPlaceBuffers(ModulePass):
    """Put each buffer of a block in shared memory (space 3) or the threads' own (5)."""

    name = "affinec-place-buffers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        refuse_unsupported(op, self.name)
        plans = [plan_placement(analyze_grid(g)) for g in grid_parallels(op)]
        for plan in plans:
            place(plan)
