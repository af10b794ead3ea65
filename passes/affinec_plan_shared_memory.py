"""`affinec-plan-shared-memory`: decide each block's shared memory in one place —
bank-conflict padding, static or dynamic placement with overlays, the capacity check.

Tiles whose rows are a multiple of 128 bytes put the same column of every row in one
bank: `ldmatrix` reading eight 64-byte rows, or threads reading a column, wait for
one another. The bank model (`affinec/transforms/gpu/bank_conflicts.py`) counts the
wavefronts each access of the block's first warp costs; the pass grows each buffer's
innermost dimension by the padding that costs its accesses the fewest (in 16-byte
steps when some access moves 16 bytes a lane, so rows stay aligned), the smallest on
ties. Nothing reads the padding, so the result is bit for bit the same. Then it
places the buffers: all static where they fit in 48 KiB, else at byte offsets in
dynamic shared memory, a buffer marked `affinec.overlay` on the bytes of a dead one
(`affinec/ir/shared_memory_layout.py`), and refuses a block that no longer fits the
chip the IR is compiled for.

    %input_shared = memref.alloc() : memref<3x1x4x32x32xf16, 3 : i64>

becomes

    %input_shared = memref.alloc() {affinec.shared_offset = 0 : i64}
        : memref<3x1x4x32x40xf16, 3 : i64>

(the offset only where the block's buffers are dynamic shared memory).
`convert-gpu-to-nvvm` follows the offsets. Runs at the mapped level (after
`affinec-map-threads`), where every index is a function of the thread's id.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from affinec.ir.context import require_affinec_dialects
from affinec.transforms.gpu.bands import grid_parallels
from affinec.transforms.gpu.shared_memory_plan import plan_shared_memory


@dataclass(frozen=True)
class AffinecPlanSharedMemory(ModulePass):
    """Pad, place and check each block's shared buffers (the one owner of shared
    memory)."""

    name = "affinec-plan-shared-memory"

    pad: bool = True
    """Pad the buffers' rows against bank conflicts."""

    split_phases: bool = False
    """First store a buffer read with a stride (a strided window's input tile) by
    phase — a dimension's even indices, then its odd ones — where that costs its
    accesses fewer wavefronts than any padding."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        require_affinec_dialects(op)
        for g in grid_parallels(op):
            plan_shared_memory(g, pad=self.pad, split_phases=self.split_phases)
